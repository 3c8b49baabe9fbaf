/**
 * Redis's own work per job, counted in instructions by callgrind:
 *   npx tsx bench/redis-instructions.ts [--n N] [--json]
 * (needs valgrind: `apt-get install valgrind`). A/B of two commits, with this file as the instrument
 * on both sides: `npx tsx bench/compare.ts <base> [<head>] --runner bench/redis-instructions.ts`.
 *
 * A private redis-server (no persistence) runs under `valgrind --tool=callgrind` with collection off.
 * Each workload zeroes the counters, switches collection on for its own span and dumps them, so its
 * figure is what redis-server executed for that workload alone (reading, running and answering
 * commands, Lua included), divided by its jobs:
 *  - add-serial: N/4 awaited single adds (queue.add), the interactive path's producer side;
 *  - add-bulk:   N jobs added by addBulk, 1 000 a call;
 *  - drain:      those N jobs run by one no-op Worker at concurrency 50, prefetch 0, in this process:
 *                claims of 50 started jobs and their completes, the same batches every run (three
 *                runs agreed within 0.1 %);
 *  - drain-begin: N more, with prefetch 50: claims of up to 100, the prefetched jobs starting as slots
 *                free, their start marks riding on the completions (named for begin.lua, which
 *                counted them in a call of its own before the start marks). Its batches follow the
 *                timing of replies, so they vary a little from run to run: compare script calls per
 *                job before instructions;
 *  - drain-3-partitions: as drain, on a queue of 3 partitions (issue 17's goal 3: a partitioned
 *                queue's work per job against an unpartitioned one's; here all on one server);
 *  - live:       N/4 awaited single adds with an idle Worker at concurrency 50 running them (handoffs).
 * No 'auto' prefetch: it follows measured job durations, which valgrind's slowness changes.
 *
 * `--backlog B` (issue 17, goal 4: does a job cost more when a million wait?): before measuring, the
 * server under valgrind (counting off) is filled as the bench's scale stage fills it, B waiting jobs
 * and B/10 delayed ones of queue `life`, in bulk calls; then only add-bulk (N more jobs onto that
 * backlog) and drain (N jobs off its head: the backlog's oldest, coldest records) are measured. The
 * fill grows the `jobs` hash through its power-of-two sizes as a live queue grows, so a hash that Redis
 * is still rehashing when the fill ends is measured as it is (stderr shows its state before and after:
 * Redis moves a hash value's entries to the bigger table only a bucket per access to that hash).
 * `--cache-sim`: callgrind also simulates the caches (about twice as slow) and each row gains
 * `redisLlMissesPerJob`, the data reads and writes that missed the last-level cache per job: what a
 * backlog larger than the cache adds, which instructions do not show.
 * `--restart` (with --backlog): after the fill, SAVE and start the server again from that RDB, which
 * builds every hash at its final size: the steady state of a backlog that has stopped growing, with no
 * rehash under way. Without it, the state just after growth.
 * `--only add-serial,live` measures only the workloads named (as printed): a quicker A/B of one script.
 * `--only-backlog` skips the other workloads at B = 0 (the baseline of a --backlog run).
 * Why: CPU time on this shared 2-core machine moves by 10-30 % between runs and hours, which hides a
 * change of a few percent in a Lua script. Instructions of the same workload move only with the
 * batching (how many jobs each script call carries), printed beside them as script calls per job.
 * Under valgrind Redis runs some 50 times slower, so batches are larger than at full speed: compare
 * two commits with this tool, not its figures with the bench's CPU times.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { DEFAULT_PREFIX } from '../src/defaults.js';
import { Queue, Worker } from '../src/index.js';
import { queueKeys } from '../src/store/keys.js';
import { freePort } from '../test/helpers/redis-server.js';
import { resetCommandStats, snapshot } from './redis-stats.js';
import { payload } from './scenarios/helpers.js';

const args = process.argv.slice(2);
const nAt = args.indexOf('--n');
const N = nAt >= 0 ? Number(args[nAt + 1]) : 5_000;
const json = args.includes('--json');
/** --keep: leave the callgrind dumps (one per workload, in order) for callgrind_annotate. */
const keep = args.includes('--keep');
const backlogAt = args.indexOf('--backlog');
const BACKLOG = backlogAt >= 0 ? Number(args[backlogAt + 1]) : 0;
const onlyBacklog = BACKLOG > 0 || args.includes('--only-backlog');
const cacheSim = args.includes('--cache-sim');
const restart = args.includes('--restart');
/** --only a,b: measure only these workloads (by the names printed), for a quick A/B of one script. */
const onlyAt = args.indexOf('--only');
const only = onlyAt >= 0 ? new Set(args[onlyAt + 1]?.split(',')) : null;
const wanted = (variant: string) => only === null || only.has(variant);
/**
 * --events off: no lifecycle event stream (Queue and Worker `events: false`); --keep-completed K: the
 * worker keeps K completed jobs (default 1 000; 0 deletes each at completion, as Bee-Queue's
 * removeOnSuccess): what those defaults cost a job.
 */
const eventsOff = args.includes('--events') && args[args.indexOf('--events') + 1] === 'off';
const keepAt = args.indexOf('--keep-completed');
const keepCompleted = keepAt >= 0 ? Number(args[keepAt + 1]) : undefined;
const eventOpts = eventsOff ? { events: false } : {};
const retentionOpts =
  keepCompleted === undefined ? {} : { retention: { completed: { maxCount: keepCompleted } } };
if (!Number.isInteger(N) || N < 100) throw new Error('--n: an integer of at least 100');
if (!Number.isInteger(BACKLOG) || BACKLOG < 0) throw new Error('--backlog: a whole number of jobs');
if (restart && BACKLOG === 0) throw new Error('--restart needs --backlog');

function has(tool: string): boolean {
  try {
    execFileSync(tool, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
if (!has('valgrind') || !has('callgrind_control')) {
  throw new Error('bench/redis-instructions.ts needs valgrind: apt-get install valgrind');
}

const dir = mkdtempSync(join(tmpdir(), 'surety-callgrind-'));
const port = await freePort();
/** redis-server under callgrind, counting off; it loads `dir`'s dump.rdb when there is one (--restart). */
const startServer = () =>
  spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      ...(cacheSim ? ['--cache-sim=yes'] : []),
      `--callgrind-out-file=${join(dir, 'cg.out')}`,
      'redis-server',
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      // DEBUG HTSTATS-KEY, for the jobs hash's rehash state under --backlog (local connections only).
      '--enable-debug-command',
      'local',
    ],
    { stdio: 'ignore' },
  );
let server = startServer();
const ctl = (...opts: string[]) =>
  execFileSync('callgrind_control', [...opts, String(server.pid)], { stdio: 'ignore' });

const admin = new Redis(port, '127.0.0.1', { lazyConnect: true });
// --restart stops the server on purpose: admin reconnects, and a command that fails still rejects.
admin.on('error', () => {});

function pong(): boolean {
  try {
    const reply = execFileSync('redis-cli', ['-p', String(port), 'ping'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    return reply.trim() === 'PONG';
  } catch {
    return false;
  }
}
const url = `redis://127.0.0.1:${port}`;

/**
 * The newest dump's totals (callgrind writes `cg.out.<n>` per `callgrind_control -d`): instructions
 * and, with --cache-sim, last-level cache misses of data reads and writes (DLmr + DLmw).
 */
function lastDumpTotals(): { ir: number; llMisses: number } {
  const dumps = readdirSync(dir)
    .filter((f) => /^cg\.out\.\d+$/.test(f))
    .sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop()));
  const text = readFileSync(join(dir, dumps.at(-1)!), 'utf8');
  // `totals:` (at the end) is the dump's sum; `summary:` near the top can read 0 with --instr-atstart=no.
  const events = /^events: (.+)$/m.exec(text)?.[1]?.split(' ') ?? [];
  const totals = /^totals: (.+)$/m.exec(text)?.[1]?.split(' ').map(Number) ?? [];
  if (events[0] !== 'Ir' || totals.length === 0)
    throw new Error(`no totals in callgrind dump ${dumps.at(-1)}`);
  const at = (event: string) => totals[events.indexOf(event)] ?? 0; // [-1]: undefined, so 0 when absent
  return { ir: totals[0] ?? 0, llMisses: at('DLmr') + at('DLmw') };
}

/**
 * Commands since the last reset and the script calls among them. Not counted: this read (INFO), the
 * reset (CONFIG) and subcommands (`client|setinfo` of a new connection...): set-up, not the workload.
 */
async function commandCounts(): Promise<{ all: number; scripts: number }> {
  const { byCommand: c } = await snapshot(admin);
  let all = 0;
  for (const [name, calls] of Object.entries(c)) {
    if (name !== 'info' && name !== 'config' && !name.includes('|')) all += calls;
  }
  return { all, scripts: (c.fcall ?? 0) + (c.evalsha ?? 0) + (c.eval ?? 0) };
}

const rows: Record<string, number | string>[] = [];
async function measure(variant: string, jobs: number, work: () => Promise<void>): Promise<void> {
  if (!wanted(variant)) return;
  await resetCommandStats(admin);
  ctl('-z');
  ctl('-i', 'on');
  await work();
  ctl('-i', 'off');
  ctl('-d');
  const counts = await commandCounts();
  const totals = lastDumpTotals();
  rows.push({
    scenario: 'redis instructions',
    variant: BACKLOG > 0 ? `${variant}@${BACKLOG}${restart ? '-restarted' : ''}` : variant,
    lib: 'surety',
    redisInstructionsPerJob: totals.ir / jobs,
    ...(cacheSim ? { redisLlMissesPerJob: totals.llMisses / jobs } : {}),
    scriptCallsPerJob: counts.scripts / jobs,
    redisCommandsPerJob: counts.all / jobs,
  });
}

/** `n` jobs into `queue`, 1 000 per addBulk (`runAt`: delayed, due from then on, 1 ms apart). */
async function addBulk(queue: Queue, n = N, runAt?: number): Promise<void> {
  for (let i = 0; i < n; i += 1000) {
    await queue.addBulk(
      Array.from({ length: Math.min(1000, n - i) }, (_, j) => ({
        data: payload(i + j),
        ...(runAt ? { opts: { runAt: runAt + i + j } } : {}),
      })),
    );
  }
}

/** The rehash state of `queue`'s jobs hash, for stderr (see --backlog above). */
async function jobsHashState(queue: string): Promise<string> {
  const stats = String(await admin.call('DEBUG', 'HTSTATS-KEY', queueKeys(DEFAULT_PREFIX, queue).jobs));
  const sizes = [...stats.matchAll(/table size: (\d+)\s+number of elements: (\d+)/g)];
  const [old, next] = sizes.map((m) => `${m[2]} entries in ${m[1]} buckets`);
  return next ? `rehashing, ${old} of the old table, ${next} of the new` : (old ?? stats);
}

/** --backlog: B waiting jobs and B/10 delayed ones (due in two hours) into `queue`, not counted. */
async function fillBacklog(queue: Queue): Promise<void> {
  const started = Date.now();
  await addBulk(queue, BACKLOG);
  await addBulk(queue, Math.floor(BACKLOG / 10), Date.now() + 2 * 3_600_000);
  process.stderr.write(`backlog of ${BACKLOG} filled in ${((Date.now() - started) / 1000).toFixed(0)} s; `);
  process.stderr.write(`jobs hash: ${await jobsHashState(queue.name)}\n`);
}

/** A no-op Worker at concurrency 50 (see above); `all` resolves at its `n`-th completion. */
async function startWorker(queue: string, n: number, prefetch: number, partitions = 1) {
  let done = 0;
  let finish!: () => void;
  const all = new Promise<void>((r) => {
    finish = r;
  });
  const worker = new Worker(queue, () => undefined, {
    connection: url,
    concurrency: 50,
    prefetch,
    partitions,
    autostart: false,
    ...eventOpts,
    ...retentionOpts,
  });
  worker.on('completed', () => {
    if (++done === n) finish();
  });
  return { worker, all };
}

/** The workloads on queues of their own (skipped by --backlog and --only-backlog). */
async function otherWorkloads(serial: number): Promise<void> {
  if (wanted('drain-3-partitions')) await partitionsDrain();
  if (wanted('live')) await liveAdds(serial);
}

async function partitionsDrain(): Promise<void> {
  const q4 = new Queue('parts', { connection: url, partitions: 3, ...eventOpts });
  await q4.counts();
  await addBulk(q4);
  const parts = await startWorker('parts', N, 0, 3);
  await measure('drain-3-partitions', N, async () => {
    await parts.worker.start();
    await parts.all;
  });
  await parts.worker.close();
  await q4.close();
}

async function liveAdds(serial: number): Promise<void> {
  const q3 = new Queue('live', { connection: url, ...eventOpts });
  await q3.counts();
  const live = await startWorker('live', serial, 0);
  await live.worker.start();
  await measure('live', serial, async () => {
    for (let i = 0; i < serial; i++) await q3.add(payload(i));
    await live.all;
  });
  await live.worker.close();
  await q3.close();
}

/** valgrind takes seconds to start redis-server (and to load an RDB): poll with redis-cli. */
async function answered(): Promise<void> {
  for (const t = Date.now(); !pong(); ) {
    if (Date.now() - t > 120_000) throw new Error('redis-server under valgrind did not answer in 120 s');
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** --restart: the server saves, stops and starts again from its RDB (admin reconnects by itself). */
async function restartServer(queue: string): Promise<void> {
  await admin.save();
  const exited = new Promise((r) => server.once('exit', r));
  server.kill('SIGKILL');
  await exited;
  server = startServer();
  await answered();
  process.stderr.write(`restarted from the RDB; jobs hash: ${await jobsHashState(queue)}\n`);
}

try {
  await answered();
  await admin.connect();
  const serial = N / 4;

  if (!onlyBacklog) {
    const q1 = new Queue('serial', { connection: url, ...eventOpts });
    await q1.counts(); // connected, library loaded: not counted
    await measure('add-serial', serial, async () => {
      for (let i = 0; i < serial; i++) await q1.add(payload(i));
    });
    await q1.close();
  }

  let q2 = new Queue('life', { connection: url, ...eventOpts });
  await q2.counts();
  if (BACKLOG > 0) await fillBacklog(q2);
  if (BACKLOG > 0 && restart) {
    await q2.close();
    await restartServer(q2.name);
    q2 = new Queue('life', { connection: url, ...eventOpts });
    await q2.counts();
  }
  if (wanted('add-bulk')) await measure('add-bulk', N, () => addBulk(q2));
  else if (wanted('drain')) await addBulk(q2);
  for (const [variant, prefetch] of [
    ['drain', 0],
    ['drain-begin', 50],
  ] as const) {
    if ((onlyBacklog && variant !== 'drain') || !wanted(variant)) continue;
    if (variant !== 'drain') await addBulk(q2);
    const drain = await startWorker('life', N, prefetch);
    await measure(variant, N, async () => {
      await drain.worker.start();
      await drain.all;
    });
    await drain.worker.close();
  }
  if (BACKLOG > 0) process.stderr.write(`after the drain, jobs hash: ${await jobsHashState(q2.name)}\n`);
  await q2.close();
  if (!onlyBacklog) await otherWorkloads(serial);

  for (const row of rows) {
    if (json) process.stdout.write(`${JSON.stringify(row)}\n`);
    else {
      const misses = cacheSim ? `  ${Number(row.redisLlMissesPerJob).toFixed(1)} LL misses/job` : '';
      process.stdout.write(
        `${String(row.variant).padEnd(18)} ${(Number(row.redisInstructionsPerJob) / 1e3).toFixed(1).padStart(7)}k instructions/job${misses}  ${Number(row.scriptCallsPerJob).toFixed(4)} script calls/job  ${Number(row.redisCommandsPerJob).toFixed(3)} commands/job\n`,
      );
    }
  }
} finally {
  admin.disconnect();
  server.kill('SIGKILL');
  if (keep)
    process.stderr.write(
      `callgrind dumps kept in ${dir} (cg.out.1 = add-serial ... cg.out.5 = live, in the order printed)\n`,
    );
  else rmSync(dir, { recursive: true, force: true });
}
