/** Every file under `dir`, recursively (for tests that check the source tree). */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? filesUnder(p) : [p];
  });
}
