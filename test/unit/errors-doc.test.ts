/** Every error code used in src/ is documented in docs/errors.md (Fastify's trick). */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { filesUnder } from '../helpers/files.js';

describe('docs/errors.md', () => {
  it('documents every error code used in src/', () => {
    const root = new URL('../..', import.meta.url).pathname;
    const doc = readFileSync(join(root, 'docs/errors.md'), 'utf8');
    const codes = new Set<string>();
    for (const f of filesUnder(join(root, 'src'))) {
      for (const m of readFileSync(f, 'utf8').matchAll(/['"](ERR_[A-Z_]+)['"]/g)) codes.add(m[1]!);
    }
    expect(codes.size).toBeGreaterThan(10);
    const missing = [...codes].filter((c) => !doc.includes(`\`${c}\``));
    expect(missing).toEqual([]);
  });

  it('every error class in src/errors.ts is exported from the package root', async () => {
    const root = new URL('../..', import.meta.url).pathname;
    const source = readFileSync(join(root, 'src/errors.ts'), 'utf8');
    const classes = [...source.matchAll(/^export class (\w+)/gm)].map((m) => m[1]!);
    expect(classes.length).toBeGreaterThan(20);
    const api = (await import('../../src/index.js')) as Record<string, unknown>;
    expect(classes.filter((c) => typeof api[c] !== 'function')).toEqual([]);
  });
});
