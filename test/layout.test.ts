/**
 * The house keeps its shape (issue 13): docs/design.md is the map of src/, so every source path it
 * names exists; every Lua script has its row in design.md (test/scripts.test.ts checks the keys of each row).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SCRIPT_FILES } from '../src/dashboard/page.js';

const root = new URL('..', import.meta.url).pathname;

describe('source layout', () => {
  it('every src/ path that docs/design.md names exists', () => {
    const design = readFileSync(join(root, 'docs/design.md'), 'utf8');
    const named = [...design.matchAll(/`(src\/[\w./-]+)`/g)].map((m) => m[1]!);
    expect(named.length).toBeGreaterThan(20);
    const missing = named.filter((p) => {
      try {
        statSync(join(root, p));
        return false;
      } catch {
        return true;
      }
    });
    expect(missing).toEqual([]);
  });

  it('the dashboard page joins every browser script file, each once', () => {
    const onDisk = readdirSync(join(root, 'src/dashboard/browser')).filter((f) => f.endsWith('.js'));
    expect([...SCRIPT_FILES].sort()).toEqual(onDisk.sort());
  });
});
