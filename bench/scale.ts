/**
 * The scale stage of `npm run bench` (`--only scale`; issue #17, goal 4): what a job costs as the
 * backlog grows. For each library and backlog size B of the ladder (default 20 000, 100 000,
 * 1 000 000), on an emptied Redis, the backlog of scale-backlog.ts: B waiting jobs, B/10 delayed ones
 * (due in two hours) and a held set of min(10 000, B/2) jobs active under a worker child that never
 * finishes them. Then, at that backlog:
 *  - enqueue: SERIAL_ADDS awaited single adds, and N jobs in awaited bulk calls of 1 000;
 *  - drain: a worker child at concurrency 50 with a no-op processor, timed from its start message to
 *    its M-th completion (M = min(N, smallest B), so every size drains the same number of jobs off
 *    the top of its backlog; the rest stays); Redis CPU µs per job over the same window (INFO
 *    used_cpu_* deltas; it includes the held set's lease renewals, part of the backlog's cost);
 *  - memory: Redis bytes per waiting job (the delta over the waiting fill / B) and per delayed job.
 * Afterwards the library's counters must still show the whole held set active and every delayed job
 * delayed: otherwise the backlog was not what it claims and the stage fails.
 *
 * The goal is to stay within 15 % of the smallest backlog's figures, so the table shows every figure
 * also as a ratio to the same library's first row. One fill per library and size (--runs k: k fills,
 * medians); libraries take turns going first.
 */
import type { Redis } from 'ioredis';
import { loadAdapter } from './adapters/index.js';
import type { Adapter, LibName, Producer, ServerAddress } from './adapters/types.js';
import { monoMs, withTimeout } from './clock.js';
import { cpuUs, flushAll } from './redis-stats.js';
import { type BacklogShape, buildBacklog, deadlineMs, waitForCounts } from './scale-backlog.js';
import { addSerial, fillBulk, perSecond } from './scenarios/helpers.js';
import { WorkerProcess } from './worker-process.js';

const SERIAL_ADDS = 2_000;
const DRAIN_CONCURRENCY = 50;

export interface ScaleRow extends BacklogShape {
  lib: LibName;
  run: number;
  /** Jobs drained (M). */
  drained: number;
  fillPerSec: number;
  enqueueSerialPerSec: number;
  enqueueBulkPerSec: number;
  drainPerSec: number;
  redisCpuUsPerJob: number;
  bytesPerWaitingJob: number;
  bytesPerDelayedJob: number;
  bytesPerHeldJob: number;
  usedMiB: number;
  /** Seconds taken by each step, and by the whole measurement (flush included). */
  stepS: Record<string, number>;
}

export interface ScaleEnv {
  server: ServerAddress;
  admin: Redis;
  libs: readonly LibName[];
  sizes: readonly number[];
  runs: number;
  /** Jobs per enqueue-bulk measurement and per drain (capped at the smallest backlog). */
  n: number;
}

const round1 = (v: number) => Math.round(v * 10) / 10;

async function openProducer(adapter: Adapter, server: ServerAddress, queue: string): Promise<Producer> {
  return withTimeout(adapter.producer(server, queue), 30_000, `${adapter.lib} producer ready`);
}

async function closeQuietly(producer: Producer): Promise<void> {
  await withTimeout(producer.close(), 10_000, 'producer close').catch(() => {});
}

/** Single adds before each measurement: the add path is JIT-compiled before it is timed. */
const WARM_ADDS = 1_000;

/**
 * Warms up on a queue of its own, flushed afterwards: loads the library's scripts into Redis (they
 * outlive FLUSHALL) so the memory baseline does not count them against the first jobs, and runs the
 * single-add path in this process, so the first backlog's single adds are not timed cold.
 */
async function warmUp(adapter: Adapter, server: ServerAddress): Promise<void> {
  const producer = await openProducer(adapter, server, `bench-scale-warm-${adapter.lib}`);
  try {
    await withTimeout(addSerial(producer, WARM_ADDS), deadlineMs(WARM_ADDS), `${adapter.lib} warm-up`);
    await producer.addBulk([{ data: { i: 1 } }, { data: { i: 2 }, runAt: Date.now() + 60_000 }]);
  } finally {
    await closeQuietly(producer);
  }
}

/** Drains `m` jobs with a worker child; resolves with jobs/s and Redis CPU µs per job. */
async function drain(
  adapter: Adapter,
  env: ScaleEnv,
  queue: string,
  m: number,
): Promise<{ perSec: number; cpuUsPerJob: number }> {
  const child = await WorkerProcess.spawn(
    { lib: adapter.lib, server: env.server, queue, concurrency: DRAIN_CONCURRENCY, mode: 'noop', expect: m },
    { doneTimeoutMs: deadlineMs(m) },
  );
  try {
    const cpu0 = await cpuUs(env.admin);
    const t0 = monoMs();
    await child.start();
    const done = await child.done();
    const cpu1 = await cpuUs(env.admin);
    return { perSec: perSecond(m, done.at - t0), cpuUsPerJob: (cpu1 - cpu0) / m };
  } finally {
    await child.close();
  }
}

async function measure(adapter: Adapter, env: ScaleEnv, backlog: number, run: number): Promise<ScaleRow> {
  const t0 = monoMs();
  await warmUp(adapter, env.server);
  await flushAll(env.admin);
  const flushS = (monoMs() - t0) / 1000;
  const m = Math.min(env.n, Math.min(...env.sizes));
  const queue = `bench-scale-${adapter.lib}-${backlog}-r${run}`;
  const producer = await openProducer(adapter, env.server, queue);
  let holder: WorkerProcess | undefined;
  try {
    const b = await buildBacklog(adapter, env.server, env.admin, producer, queue, backlog, (h) => {
      holder = h;
    });
    const t1 = monoMs();
    await withTimeout(
      addSerial(producer, SERIAL_ADDS),
      deadlineMs(SERIAL_ADDS),
      `${adapter.lib} single adds`,
    );
    const t2 = monoMs();
    await withTimeout(fillBulk(producer, env.n), deadlineMs(env.n), `${adapter.lib} bulk adds`);
    const t3 = monoMs();
    const d = await drain(adapter, env, queue, m);
    const t4 = monoMs();
    // The drain took jobs off the top of the waiting list only: the held set is still held (its leases
    // renewed throughout), and no delayed job has become due.
    await waitForCounts(
      producer,
      { delayed: b.shape.delayed, active: b.shape.held },
      15_000,
      `${adapter.lib} after the drain`,
    );
    if (holder?.failedWith) throw holder.failedWith;
    return {
      lib: adapter.lib,
      run,
      ...b.shape,
      drained: m,
      fillPerSec: Math.round(b.fillPerSec),
      enqueueSerialPerSec: Math.round(perSecond(SERIAL_ADDS, t2 - t1)),
      enqueueBulkPerSec: Math.round(perSecond(env.n, t3 - t2)),
      drainPerSec: Math.round(d.perSec),
      redisCpuUsPerJob: round1(d.cpuUsPerJob),
      bytesPerWaitingJob: Math.round(b.bytesPerWaitingJob),
      bytesPerDelayedJob: Math.round(b.bytesPerDelayedJob),
      bytesPerHeldJob: Math.round(b.bytesPerHeldJob),
      usedMiB: Math.round(b.usedMiB),
      stepS: {
        flush: round1(flushS),
        held: round1(b.stepS.held),
        waiting: round1(b.stepS.waiting),
        delayed: round1(b.stepS.delayed),
        enqueue: round1((t3 - t1) / 1000),
        drain: round1((t4 - t3) / 1000),
        total: round1((monoMs() - t0) / 1000),
      },
    };
  } finally {
    await holder?.close();
    await closeQuietly(producer);
  }
}

/** Runs the stage on the harness's Redis (flushed before each measurement, and left flushed). */
export async function runScaleBench(env: ScaleEnv, log: (line: string) => void): Promise<ScaleRow[]> {
  const adapters = await Promise.all(env.libs.map(loadAdapter));
  const rows: ScaleRow[] = [];
  try {
    for (let run = 1; run <= env.runs; run++) {
      for (const [si, backlog] of env.sizes.entries()) {
        for (let k = 0; k < adapters.length; k++) {
          const adapter = adapters[(run - 1 + si + k) % adapters.length]!;
          const row = await measure(adapter, env, backlog, run);
          rows.push(row);
          log(
            `  ${adapter.label.padEnd(9)} backlog ${String(backlog).padStart(9)} run ${run}: single adds ${row.enqueueSerialPerSec}/s, bulk ${row.enqueueBulkPerSec}/s, drain ${row.drainPerSec}/s, Redis CPU ${row.redisCpuUsPerJob} µs/job, ${row.bytesPerWaitingJob} B/waiting job, ${row.usedMiB} MiB in all; steps ${Object.entries(
              row.stepS,
            )
              .map(([k, v]) => `${k} ${v} s`)
              .join(', ')}`,
          );
        }
      }
    }
  } finally {
    await flushAll(env.admin);
  }
  return rows;
}
