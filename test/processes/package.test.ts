/**
 * What a user installs: this checkout packed with `npm pack` (which builds it: `prepack`), as a fresh
 * clone would be (no dist/ of ours), the tarball installed into an empty project, then used from there
 * as the README's Install section says: from ESM and from CommonJS, with its types, and its command.
 * Everything happens in a temp dir: the checkout's own dist/ is neither used nor touched.
 */
import { execFile } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

const exec = promisify(execFile);
const repo = realpathSync(new URL('../..', import.meta.url).pathname);
const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { version: string };

let work: string;
let app: string;
let packed: string[];
let redis: RedisServer;

/** The environment of a user's shell: none of the npm_* variables of the `npm test` running this. */
function userEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
  return { ...env, ...extra };
}

function sh(file: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = userEnv()) {
  return exec(file, args, { cwd, env, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 });
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'surety-pack-'));
  // The checkout as a clone of it would be (tracked files and new ones, nothing ignored: no dist/),
  // with the checkout's node_modules for the build's tools.
  const checkout = join(work, 'checkout');
  const { stdout: files } = await sh(
    'git',
    ['ls-files', '-z', '--cached', '--others', '--exclude-standard'],
    repo,
  );
  for (const f of files.split('\0').filter(Boolean)) {
    mkdirSync(dirname(join(checkout, f)), { recursive: true });
    try {
      cpSync(join(repo, f), join(checkout, f));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err; // deleted, not yet committed
    }
  }
  symlinkSync(join(repo, 'node_modules'), join(checkout, 'node_modules'));
  const { stdout: pack } = await sh('npm', ['pack', '--json', '--pack-destination', work], checkout);
  const [result] = JSON.parse(pack) as { filename: string; files: { path: string }[] }[];
  packed = result!.files.map((f) => f.path);

  app = join(work, 'app');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
  await sh(
    'npm',
    [
      'install',
      join(work, result!.filename),
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
      '--loglevel=error',
    ],
    app,
  );
  redis = await startRedis();
}, 300_000);

afterAll(async () => {
  await redis?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
});

// Generous: a loaded 2-core CI machine runs tsc and npm here alongside the other test files.
describe('the packed package', { timeout: 120_000 }, () => {
  it('holds the build, its Lua scripts, the dashboard page and the command; no tests, no TypeScript source', () => {
    for (const f of [
      'package.json',
      'bin/surety.js',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/dashboard/index.js',
      'dist/dashboard/index.d.ts',
      'dist/dashboard/browser/app.js',
      'dist/scripts/claim.lua',
      'dist/scripts/includes/enqueue.lua',
      'dist/worker/sandbox/entry.js',
      'dist/cli/main.js',
      'dist/testing/index.js',
      'LICENSE',
    ]) {
      expect(packed).toContain(f);
    }
    // Source maps would point at TypeScript sources the package does not ship; the Lua scripts are
    // loaded from dist/scripts only.
    expect(packed.filter((f) => f.endsWith('.map') || f.startsWith('src/'))).toEqual([]);
    // No tests, harnesses or build scripts; TypeScript only as declarations and the examples the docs
    // link to; of bench/ only the pages the README links to.
    expect(
      packed.filter(
        (f) => /^(test|chaos|scripts)\/|\.ts$/.test(f) && !f.endsWith('.d.ts') && !f.startsWith('examples/'),
      ),
    ).toEqual([]);
    expect(
      packed.filter((f) => f.startsWith('bench/') && !/^bench\/(README\.md|results\/.*\.json)$/.test(f)),
    ).toEqual([]);
  });

  it('runs nothing when installed: no prepare or install script (npm would warn about it)', () => {
    const scripts = (JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { scripts?: object })
      .scripts;
    const installTime = ['preinstall', 'install', 'postinstall', 'prepare'];
    expect(Object.keys(scripts ?? {}).filter((s) => installTime.includes(s))).toEqual([]);
  });

  it('resolves every relative link of its README inside the package (docs, examples, CHANGELOG)', () => {
    const readme = readFileSync(join(repo, 'README.md'), 'utf8');
    const targets = [...readme.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)]
      .map((m) => m[1]!)
      .filter((t) => !/^[a-z]+:/.test(t));
    expect(targets.length).toBeGreaterThan(20);
    const dead = targets.filter((t) =>
      t.endsWith('/') ? !packed.some((f) => f.startsWith(t)) : !packed.includes(t),
    );
    expect(dead).toEqual([]);
  });

  it('runs a job from an ES module: import { Queue, Worker } from "surety", inline and sandboxed', async () => {
    writeFileSync(
      join(app, 'double.mjs'),
      'export default async function (job) { return { doubled: job.data.n * 2, pid: process.pid }; }\n',
    );
    writeFileSync(
      join(app, 'round-trip.mjs'),
      `import { Queue, Worker } from 'surety';
const connection = process.env.REDIS_URL;
const queue = new Queue('pack', { connection });
const inline = new Worker('pack', async (job) => ({ doubled: job.data.n * 2, pid: process.pid }), { connection });
const a = await queue.add({ n: 21 });
const inlineResult = await queue.waitFor(a.id, { timeoutMs: 10000 });
await inline.close();
const sandboxed = new Worker('pack', new URL('./double.mjs', import.meta.url), { connection, sandbox: 'process' });
const b = await queue.add({ n: 4 });
const sandboxResult = await queue.waitFor(b.id, { timeoutMs: 10000 });
await sandboxed.close();
await queue.close();
console.log(JSON.stringify({ pid: process.pid, inlineResult, sandboxResult }));
`,
    );
    const { stdout } = await sh(process.execPath, ['round-trip.mjs'], app, userEnv({ REDIS_URL: redis.url }));
    type Result = { doubled: number; pid: number };
    const out = JSON.parse(stdout) as { pid: number; inlineResult: Result; sandboxResult: Result };
    expect(out.inlineResult).toEqual({ doubled: 42, pid: out.pid });
    expect(out.sandboxResult.doubled).toBe(8);
    expect(out.sandboxResult.pid).not.toBe(out.pid); // it ran in the sandbox's own process
  });

  it("works from CommonJS: require('surety') and require('surety/dashboard') give the same classes as import", async () => {
    writeFileSync(
      join(app, 'require.cjs'),
      `const { Queue, Worker, SuretyError } = require('surety');
const { createDashboard } = require('surety/dashboard');
import('surety').then((esm) => {
  console.log(JSON.stringify({
    types: [typeof Queue, typeof Worker, typeof createDashboard],
    same: Queue === esm.Queue && SuretyError === esm.SuretyError,
  }));
});
`,
    );
    const { stdout, stderr } = await sh(process.execPath, ['require.cjs'], app);
    expect(JSON.parse(stdout)).toEqual({ types: ['function', 'function', 'function'], same: true });
    expect(stderr).toBe(''); // no ExperimentalWarning on the supported Node versions
  });

  it('loads surety/postgres without pg installed: pg is an optional peer, only its types are imported', async () => {
    expect(existsSync(join(app, 'node_modules/pg'))).toBe(false);
    writeFileSync(
      join(app, 'postgres.mjs'),
      `import * as postgres from 'surety/postgres';\nconsole.log(JSON.stringify(Object.keys(postgres).sort()));\n`,
    );
    const { stdout } = await sh(process.execPath, ['postgres.mjs'], app);
    expect(JSON.parse(stdout)).toEqual(
      expect.arrayContaining(['createOutbox', 'migrateSteps', 'pgStep', 'pruneSteps']),
    );
  });

  it.runIf(process.allowedNodeEnvironmentFlags.has('--experimental-require-module'))(
    "on a Node without require(esm) (before 20.19 or 22.12), require('surety') fails saying to use import()",
    async () => {
      const err = await sh(process.execPath, ['--no-experimental-require-module', 'require.cjs'], app).then(
        () => null,
        (e: { stderr: string }) => e,
      );
      expect(err?.stderr).toContain('ERR_REQUIRE_ESM');
      expect(err?.stderr).toContain('dynamic import()');
    },
  );

  it('installs the `surety` command: npx surety --help, --version', async () => {
    const help = await sh('npx', ['--yes=false', 'surety', '--help'], app);
    expect(help.stdout).toContain('Usage: surety');
    expect(help.stdout).toContain('worker');
    const version = await sh('npx', ['--yes=false', 'surety', '--version'], app);
    expect(version.stdout.trim()).toBe(pkg.version);
  });

  it('gives TypeScript its types: ESM (node16, bundler) and CommonJS (nodenext, NestJS-style commonjs/node10)', async () => {
    const code = `import { Queue, Worker, type Job } from 'surety';
import { createDashboard } from 'surety/dashboard';
const queue = new Queue<{ n: number }, number>('t', { connection: 'redis://127.0.0.1:6379' });
const worker = new Worker<{ n: number }, number>('t', async (job: Job<{ n: number }>) => job.data.n, {
  connection: 'redis://127.0.0.1:6379',
});
export const used = [queue, worker, createDashboard];
`;
    writeFileSync(join(app, 'use.mts'), code);
    writeFileSync(join(app, 'use.cts'), code);
    const tsc = join(repo, 'node_modules/typescript/bin/tsc');
    const types = ['--typeRoots', join(repo, 'node_modules/@types'), '--types', 'node'];
    const check = (file: string, module: string, resolution: string, skipLibCheck = true) =>
      sh(
        process.execPath,
        [
          tsc,
          '--noEmit',
          '--strict',
          '--target',
          'es2022',
          '--module',
          module,
          '--moduleResolution',
          resolution,
          ...(skipLibCheck ? ['--skipLibCheck'] : []),
          ...types,
          file,
        ],
        app,
      ).then(
        () => `${file} ${module}/${resolution}: ok`,
        (e: { stdout: string }) => `${file} ${module}/${resolution}: ${e.stdout}`,
      );
    expect(
      await Promise.all([
        check('use.mts', 'node16', 'node16', false), // and the declarations themselves, with Node's types
        check('use.mts', 'preserve', 'bundler'),
        check('use.cts', 'nodenext', 'nodenext'),
        check('use.cts', 'commonjs', 'node10'),
      ]),
    ).toEqual([
      'use.mts node16/node16: ok',
      'use.mts preserve/bundler: ok',
      'use.cts nodenext/nodenext: ok',
      'use.cts commonjs/node10: ok',
    ]);
  });
});
