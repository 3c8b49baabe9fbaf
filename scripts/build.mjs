// `npm run build` (and `prepare`, so before `npm pack` and on `npm ci`): compiles src/ into dist/, from
// scratch so that no file of an earlier build is packed, and copies what tsc does not emit: the Lua
// scripts and the dashboard's browser files.
import { spawnSync } from 'node:child_process';
import { cpSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = new URL('../', import.meta.url);
const at = (path) => new URL(path, root);
rmSync(at('dist'), { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const { status } = spawnSync(process.execPath, [tsc, '-p', fileURLToPath(at('tsconfig.build.json'))], {
  stdio: 'inherit',
});
if (status !== 0) process.exit(status ?? 1);
cpSync(at('src/scripts'), at('dist/scripts'), { recursive: true });
cpSync(at('src/dashboard/browser'), at('dist/dashboard/browser'), {
  recursive: true,
  filter: (f) => !f.endsWith('.json'), // its tsconfig.json
});
