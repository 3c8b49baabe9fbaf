/**
 * Where Redis spends its time per script (`npx tsx bench/script-costs.ts [--n N]`): a private
 * redis-server with SLOWLOG capturing every command (or those slower than `--slower-than US`), then workloads,
 * each reported as time inside each script (SLOWLOG's duration: the command's execution, without
 * reading or parsing it) and the server's whole CPU (INFO used_cpu_*), per job:
 *  - serial: N awaited single adds (the interactive path's producer side);
 *  - lifecycle: N jobs added in bulk, drained by one Worker at concurrency 50 in this process;
 *  - live: N awaited single adds while one idle Worker at concurrency 50 runs them (the e2e-live
 *    serial path: handoffs, completions, and whatever claims the worker makes between them).
 * A profiling aid for #17, not a benchmark against other libraries: SLOWLOG itself costs Redis time,
 * and its durations are wall time: with three processes on two cores, a script descheduled midway
 * reads longer than it ran.
 */
import { Redis } from 'ioredis';
import { Queue, Worker } from '../src/index.js';
import { scripts } from '../src/scripts/specs.js';
import { startRedis } from '../test/helpers/redis-server.js';
import { parseInfo } from './redis-stats.js';

const nArg = process.argv.indexOf('--n');
const N = nArg > 0 ? Number(process.argv[nArg + 1]) : 20_000;
/**
 * --slower-than US: log only commands slower than this (default 0: all). At 0 every command a script
 * runs is logged too, which inflates the script's own duration by its commands' log entries; 8 keeps the
 * scripts (tens of µs) and drops their inner commands (a few µs), so script times read true.
 */
const slowAt = process.argv.indexOf('--slower-than');
const slowerThan = slowAt > 0 ? Number(process.argv[slowAt + 1]) : 0;
const names = new Map<string, string>(Object.values(scripts).map((s) => [s.sha, s.name]));

async function cpu(admin: Redis): Promise<number> {
  const info = parseInfo(await admin.info('cpu'));
  return (Number(info.used_cpu_user) + Number(info.used_cpu_sys)) * 1e6;
}

async function measure(admin: Redis, label: string, jobs: number, work: () => Promise<void>) {
  await admin.slowlog('RESET');
  const before = await cpu(admin);
  await work();
  const used = (await cpu(admin)) - before;
  const entries = (await admin.slowlog('GET', -1)) as [number, number, number, string[]][];
  const by = new Map<string, { calls: number; us: number }>();
  for (const [, , us, args] of entries) {
    const cmd = args[0]!.toLowerCase();
    const name =
      cmd === 'evalsha' || cmd === 'fcall'
        ? (names.get(args[1]!) ?? args[1]!.replace(/^surety_[0-9a-f]+_/, ''))
        : cmd;
    const row = by.get(name) ?? { calls: 0, us: 0 };
    row.calls++;
    row.us += us;
    by.set(name, row);
  }
  const total = [...by.values()].reduce((a, r) => a + r.us, 0);
  console.log(
    `\n${label}: ${jobs} jobs; Redis CPU ${(used / jobs).toFixed(1)} µs/job, inside commands ${(total / jobs).toFixed(1)} µs/job`,
  );
  for (const [name, r] of [...by].sort((a, b) => b[1].us - a[1].us)) {
    console.log(
      `  ${name.padEnd(16)} calls ${String(r.calls).padStart(6)}  ${(r.us / r.calls).toFixed(1).padStart(7)} µs/call  ${(r.us / jobs).toFixed(2).padStart(6)} µs/job`,
    );
  }
}

/** A no-op Worker at concurrency 50, started; `all` resolves at its N-th completion. */
async function startWorker(queue: string) {
  let done = 0;
  let finish!: () => void;
  const all = new Promise<void>((r) => {
    finish = r;
  });
  const worker = new Worker(queue, () => undefined, { connection: url, concurrency: 50 });
  worker.on('completed', () => {
    if (++done === N) finish();
  });
  await worker.start();
  return { worker, all };
}

const server = await startRedis();
const admin = new Redis(server.port, '127.0.0.1');
await admin.config('SET', 'slowlog-log-slower-than', String(slowerThan));
await admin.config('SET', 'slowlog-max-len', String(10 * N + 10_000));
const url = `redis://127.0.0.1:${server.port}`;
try {
  const q1 = new Queue('serial', { connection: url });
  await q1.counts();
  await measure(admin, 'serial adds', N, async () => {
    for (let i = 0; i < N; i++) await q1.add({ i, s: 'x'.repeat(100) });
  });
  await q1.close();

  const q2 = new Queue('life', { connection: url });
  await q2.counts();
  await measure(admin, 'lifecycle (bulk add, worker c=50)', N, async () => {
    for (let i = 0; i < N; i += 1000) {
      await q2.addBulk(
        Array.from({ length: Math.min(1000, N - i) }, (_, j) => ({ data: { i: i + j, s: 'x'.repeat(100) } })),
      );
    }
    const w = await startWorker('life');
    await w.all;
    await w.worker.close();
  });
  await q2.close();

  const q3 = new Queue('live', { connection: url });
  await q3.counts();
  const live = await startWorker('live');
  await measure(admin, 'live (serial adds, idle worker c=50)', N, async () => {
    for (let i = 0; i < N; i++) await q3.add({ i, s: 'x'.repeat(100) });
    await live.all;
  });
  await live.worker.close();
  await q3.close();
} finally {
  admin.disconnect();
  await server.stop();
}
