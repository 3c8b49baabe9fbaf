/**
 * The `surety` command for tests that run it many times. bin/surety.js, in a checkout, registers tsx
 * and compiles src/ on every start (0.7 to 1 s of CPU per process); test/processes/cli.test.ts starts about a
 * hundred. compiledCli() builds src/ once per vitest run with the build script (scripts/build.mjs) into
 * the run's temporary directory (test/helpers/cli-build-dir.ts), laid out as an installed package, and
 * returns its dist/cli/main.js, which starts in about 0.15 s. A few tests still go through LAUNCHER,
 * so the launcher itself stays covered.
 */
import { execFile, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { inject } from 'vitest';

const root = (path: string) => fileURLToPath(new URL(`../../${path}`, import.meta.url));

/** What users run: `npx surety` in a checkout or an installed package. */
export const LAUNCHER = root('bin/surety.js');

/** Building takes 4 to 10 s on two busy cores: more than vitest's default hook timeout allows for. */
export const BUILD_TIMEOUT_MS = 120_000;

let built: Promise<string> | undefined;

/** The compiled CLI's entry point, built on the first call of the run (see above). */
export function compiledCli(): Promise<string> {
  built ??= build();
  return built;
}

async function build(): Promise<string> {
  const dir = inject('cliBuildDir');
  const pkg = join(dir, 'package');
  const main = join(pkg, 'dist', 'cli', 'main.js');
  // Test files run in separate processes: another one of this run may have built it already.
  if (existsSync(main)) return main;
  // Built aside, then renamed into place in one step, so a file never sees half a build; if two files
  // build at once (parallel workers), the first rename wins and the other build is dropped.
  const staging = mkdtempSync(join(dir, 'staging-'));
  // As in an installed package: package.json (the version; "type": "module") beside dist/, and the
  // dependencies (commander, ioredis, tsx for TypeScript processors) found in node_modules.
  copyFileSync(root('package.json'), join(staging, 'package.json'));
  symlinkSync(root('node_modules'), join(staging, 'node_modules'), 'dir');
  await promisify(execFile)(process.execPath, [
    root('scripts/build.mjs'),
    '--out-dir',
    join(staging, 'dist'),
    '--no-declarations',
  ]);
  try {
    renameSync(staging, pkg);
  } catch (err) {
    if (!existsSync(main)) throw err;
    rmSync(staging, { recursive: true, force: true });
  }
  return main;
}

/** What a run of the CLI printed, and how it exited. */
export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the compiled CLI (`compiled`, from compiledCli) with `args`, stdin an empty pipe, REDIS_URL set
 * to `redisUrl` and colours off; resolves once it exits.
 */
export function runCompiledCli(compiled: string, redisUrl: string, args: readonly string[]): Promise<CliRun> {
  const env: NodeJS.ProcessEnv = { ...process.env, REDIS_URL: redisUrl, NO_COLOR: '1' };
  delete env.DEBUG;
  delete env.FORCE_COLOR;
  const child = spawn(process.execPath, [compiled, ...args], { env });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => {
    stdout += d;
  });
  child.stderr.on('data', (d) => {
    stderr += d;
  });
  child.stdin.end();
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}
