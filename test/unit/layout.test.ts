/**
 * The house keeps its shape: the folders of src/ layer one way (each imports only the folders below
 * it), docs/design.md is the map of src/ (every source path it names exists, every folder has its
 * row), and every Lua script has its row in design.md (test/unit/script-headers.test.ts checks the keys of each
 * row). Modules are split by their reason to change, never by length; the size guard below is an
 * alarm for a file that has grown several reasons, not a limit to cut files at.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SCRIPT_FILES } from '../../src/dashboard/page.js';

const root = new URL('../..', import.meta.url).pathname;
const src = join(root, 'src');

/**
 * The layers of src/, bottom first: a module may import its own folder and any folder of an earlier
 * layer. `base` is the root's shared files (errors, types, validation, timers, clock); `index.ts` is
 * the package's face and may import anything.
 */
const LAYERS: readonly (readonly string[])[] = [
  ['base'],
  ['store', 'redis'],
  ['scripts', 'telemetry'],
  ['options'],
  ['queue'],
  ['worker'],
  ['testing', 'dashboard', 'migrate', 'postgres'],
  ['cli'],
];

/** A module bigger than this has most likely grown a second reason to change: look, then split by reason. */
const SIZE_ALARM_LINES = 600;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return /\.(ts|js)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

/** The folder a src/ file belongs to: its first path segment, `base` for the root's files. */
function folderOf(file: string): string {
  const rel = relative(src, file);
  return rel.includes('/') ? rel.split('/')[0]! : rel === 'index.ts' ? 'index' : 'base';
}

function layerOf(folder: string): number {
  const i = LAYERS.findIndex((l) => l.includes(folder));
  if (i < 0) throw new Error(`src/${folder}/ has no layer in test/unit/layout.test.ts: give it one`);
  return i;
}

/** Relative imports (static, dynamic, type-only and re-exports) of a file, as absolute paths. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specs = [...text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)].map((m) => m[1]!);
  return specs.map((s) => normalize(join(dirname(file), s)));
}

describe('source layout', () => {
  it('each folder of src/ imports only its own folder and the layers below it', () => {
    const upward: string[] = [];
    for (const file of sourceFiles(src)) {
      const from = folderOf(file);
      if (from === 'index') continue;
      for (const target of importsOf(file)) {
        if (!target.startsWith(src)) continue;
        const to = folderOf(target);
        if (to === from) continue;
        if (to === 'index' || layerOf(to) >= layerOf(from))
          upward.push(`${relative(root, file)} -> ${relative(root, target)}`);
      }
    }
    expect(upward).toEqual([]);
  });

  it(`no module of src/ passes ${SIZE_ALARM_LINES} lines`, () => {
    const big = sourceFiles(src)
      .map((f) => ({ f: relative(root, f), lines: readFileSync(f, 'utf8').split('\n').length }))
      .filter((x) => x.lines > SIZE_ALARM_LINES);
    expect(big).toEqual([]);
  });

  it('every src/ path that docs/design.md names exists, and every folder of src/ is named', () => {
    const design = readFileSync(join(root, 'docs/design.md'), 'utf8');
    const named = [...design.matchAll(/`(src\/[\w./*-]+)`/g)].map((m) => m[1]!.replace(/\/?\*.*$/, ''));
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
    const folders = readdirSync(src, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => `src/${e.name}/`);
    expect(folders.filter((f) => !design.includes(`\`${f}\``))).toEqual([]);
  });

  it('every test file sits in the folder of its axis (test/README.md)', () => {
    const axes = ['unit', 'scripts', 'behaviour', 'model', 'processes'];
    const tests = sourceFiles(join(root, 'test')).filter((f) => f.endsWith('.test.ts'));
    expect(tests.length).toBeGreaterThan(50);
    const astray = tests
      .map((f) => relative(join(root, 'test'), f))
      .filter((f) => !axes.includes(f.split('/')[0]!));
    expect(astray).toEqual([]);
  });

  it('the dashboard page joins every browser script file, each once', () => {
    const onDisk = readdirSync(join(root, 'src/dashboard/browser')).filter((f) => f.endsWith('.js'));
    expect([...SCRIPT_FILES].sort()).toEqual(onDisk.sort());
  });
});
