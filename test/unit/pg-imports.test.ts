/**
 * `pg` is an optional peer dependency: the library takes the caller's Pool and never loads node-postgres
 * itself, so importing surety or surety/postgres works without it. Only the CLI loads it, on demand
 * (src/cli/postgres.ts). A value import of 'pg' anywhere else would break installs without it.
 */
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { filesUnder } from '../helpers/files.js';

describe("the library and 'pg'", () => {
  it("imports only types from 'pg' (the CLI loads it on demand)", () => {
    const root = new URL('../..', import.meta.url).pathname;
    const offenders: string[] = [];
    let typeImports = 0;
    for (const f of filesUnder(join(root, 'src')).filter((p) => p.endsWith('.ts'))) {
      const text = readFileSync(f, 'utf8');
      for (const m of text.matchAll(/^\s*(import|export)\s+(type\s+)?[^;]*?from\s+'(pg|pg\/[^']*)'/gm)) {
        if (m[2]) typeImports++;
        else offenders.push(`${relative(root, f)}: ${m[0].trim()}`);
      }
      if (/\b(require|import)\(\s*'pg'\s*\)/.test(text)) offenders.push(`${relative(root, f)}: loads 'pg'`);
    }
    expect(typeImports).toBeGreaterThan(3);
    expect(offenders).toEqual([]);
  });
});
