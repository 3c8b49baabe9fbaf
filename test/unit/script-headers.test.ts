/** Each script description in specs.ts must match the KEYS/ARGV header of its Lua file. */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadLua, scripts } from '../../src/scripts/specs.js';

const dir = new URL('../../src/scripts/', import.meta.url);

function header(name: string) {
  const text = readFileSync(new URL(`${name}.lua`, dir), 'utf8');
  const keys = [...text.matchAll(/^-- KEYS\[(\d+)\] (\w+)/gm)].map((m) => [Number(m[1]), m[2]] as const);
  const args = [...text.matchAll(/^-- ARGV\[(\d+)\] (\w+)/gm)].map((m) => [Number(m[1]), m[2]] as const);
  const rep = /^-- ARGV\[\d+\.\.\] repeated: (.+)$/m.exec(text);
  return { text, keys, args, repeated: rep ? rep[1]!.split(',').map((s) => s.trim()) : [] };
}

describe('Lua script headers', () => {
  for (const spec of Object.values(scripts)) {
    it(`${spec.name}.lua documents exactly the KEYS and ARGV its description passes`, () => {
      const h = header(spec.name);
      expect(h.keys.map(([i]) => i)).toEqual(spec.keys.map((_, i) => i + 1));
      expect(h.keys.map(([, n]) => n)).toEqual([...spec.keys]);
      expect(h.args.map(([i]) => i)).toEqual(spec.args.map((_, i) => i + 1));
      expect(h.args.map(([, n]) => n)).toEqual([...spec.args]);
      expect(h.repeated).toEqual([...spec.repeated]);
      expect(h.text).toMatch(/^-- Returns: /m);
    });

    it(`${spec.name}.lua reads its KEYS and ARGV by name, never by a fixed position`, () => {
      const code = header(spec.name)
        .text.split('\n')
        .filter((line) => !line.trimStart().startsWith('--'))
        .map((line) => line.replace(/--.*$/, ''));
      expect(code.filter((line) => /\b(KEYS|ARGV)\[\d+\]/.test(line))).toEqual([]);
    });
  }

  it('docs/design.md lists every script with exactly the keys its description passes', () => {
    const design = readFileSync(new URL('../../docs/design.md', import.meta.url), 'utf8');
    for (const spec of Object.values(scripts)) {
      const row = new RegExp(`\\| \`src/scripts/${spec.name}\\.lua\` \\| ([^|]+) \\|`).exec(design);
      expect(row, `design.md has no row for ${spec.name}.lua`).not.toBeNull();
      expect(row![1]!.trim()).toBe(spec.keys.join(', '));
    }
  });

  it('every include includes what it uses, so it works whatever includes it and in whatever order', () => {
    const incDir = new URL('includes/', dir);
    const files = readdirSync(incDir).filter((f) => f.endsWith('.lua'));
    const code = (text: string) =>
      text
        .split('\n')
        .filter((l) => !l.trimStart().startsWith('--'))
        .map((l) => l.replace(/--.*$/, '').replace(/'[^'\n]*'/g, "''"))
        .join('\n');
    // Each top-level name (function or constant) and the include that defines it.
    const owner = new Map<string, string>();
    const texts = new Map<string, string>();
    for (const f of files) {
      const name = f.slice(0, -4);
      const text = readFileSync(new URL(f, incDir), 'utf8');
      texts.set(name, text);
      for (const m of text.matchAll(/^local (?:function )?([A-Za-z_]\w*)/gm)) owner.set(m[1]!, name);
    }
    const missing: string[] = [];
    for (const [name, text] of texts) {
      const included = new Set([...text.matchAll(/^-- @include (\w+)$/gm)].map((m) => m[1]!));
      for (const word of new Set(code(text).match(/\b[A-Za-z_]\w*\b/g) ?? [])) {
        const from = owner.get(word);
        if (from && from !== name && !included.has(from)) missing.push(`${name} uses ${word} of ${from}`);
      }
    }
    expect(missing).toEqual([]);
    // No cycle: an include is inlined once, at its first mention, so in a cycle one side would call a
    // function defined after it (a nil global at run time).
    const edges = new Map(
      [...texts].map(([n, t]) => [n, [...t.matchAll(/^-- @include (\w+)$/gm)].map((m) => m[1]!)]),
    );
    const cycles: string[] = [];
    const visit = (n: string, path: string[]) => {
      for (const m of edges.get(n) ?? []) {
        if (path.includes(m)) cycles.push([...path, m].join(' -> '));
        else visit(m, [...path, m]);
      }
    };
    for (const n of edges.keys()) visit(n, [n]);
    expect(cycles).toEqual([]);
  });

  it('every Lua file under src/scripts has a description, and every include exists', () => {
    const files = readdirSync(dir)
      .filter((f) => f.endsWith('.lua'))
      .map((f) => f.slice(0, -4));
    expect(files.sort()).toEqual(
      Object.values(scripts)
        .map((s) => s.name)
        .sort(),
    );
    for (const f of files) expect(loadLua(f)).not.toMatch(/@include/);
  });
});
