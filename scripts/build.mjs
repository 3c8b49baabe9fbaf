// `npm run build` (and `prepare`, so before `npm pack` and on `npm ci`): compiles src/ into dist/, from
// scratch so that no file of an earlier build is packed, and copies what tsc does not emit: the Lua
// scripts and the dashboard's browser files.
// `node scripts/build.mjs --out-dir <dir> --no-declarations` makes the same build elsewhere without the
// .d.ts files: the tests run the CLI from such a build (test/helpers/cli-build.ts), and one shared
// script keeps that build from drifting from the one that is packed.
import { spawnSync } from 'node:child_process';
import { cpSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: { 'out-dir': { type: 'string' }, 'no-declarations': { type: 'boolean', default: false } },
});
const root = new URL('../', import.meta.url);
const at = (path) => new URL(path, root);
const out = values['out-dir'] ? resolve(values['out-dir']) : fileURLToPath(at('dist'));
rmSync(out, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const args = [tsc, '-p', fileURLToPath(at('tsconfig.build.json')), '--outDir', out];
if (values['no-declarations']) args.push('--declaration', 'false');
const { status } = spawnSync(process.execPath, args, { stdio: 'inherit' });
if (status !== 0) process.exit(status ?? 1);
cpSync(at('src/scripts'), `${out}/scripts`, {
  recursive: true,
  filter: (f) => !f.endsWith('.ts'), // the Lua files beside the TypeScript that describes them
});
cpSync(at('src/dashboard/browser'), `${out}/dashboard/browser`, {
  recursive: true,
  filter: (f) => !f.endsWith('.json'), // its tsconfig.json
});
