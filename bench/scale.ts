/**
 * The scale stage of `npm run bench` (`--only scale`; issue #17, goal 4): what a job costs as the
 * backlog grows. For each library and backlog size B of the ladder (default 20 000, 100 000,
 * 1 000 000), on an emptied Redis, the backlog of scale-backlog.ts: B waiting jobs, B/10 delayed ones
 * (due in two hours) and a held set of min(10 000, B/2) jobs active under a worker child that never
 * finishes them. Then, at that backlog, three rounds (ROUNDS) of:
 *  - enqueue: SERIAL_ADDS awaited single adds, and N jobs in awaited bulk calls of 1 000;
 *  - drain: a worker child at concurrency 50 with a no-op processor, timed from its start message to
 *    its M-th completion (M = min(N, smallest B), so every size drains the same number of jobs off
 *    the top of its backlog; the rest stays); Redis CPU µs per job over the same window (INFO
 *    used_cpu_* deltas; it includes the held set's lease renewals, part of the backlog's cost);
 * and once per fill, memory: Redis bytes per waiting job (the delta over the waiting fill / B) and per
 * delayed job.
 * Then the same backlog settled: DEBUG RELOAD (save and load it again, as a restart would) rebuilds
 * every hash and set at its final size, so no rehash that the fill started is still under way, and the
 * rounds run again (`settled`). The rows above are the state just after growth, when Redis may still
 * be moving a hash that crossed a power of two to its doubled table, a bucket per access (docs/scaling.md,
 * "Cost as the backlog grows"); the settled rows are a backlog that has stopped growing. The memory the
 * reload frees is what is left of such a move's old table once the first rounds are done.
 * After each set of rounds the library's counters must still show the whole held set active and every
 * delayed job delayed: otherwise the backlog was not what it claims and the stage fails.
 *
 * The goal is to stay within 15 % of the smallest backlog's figures, so the table shows every figure
 * also as a ratio to the same library's first row. A row is the median of its rounds; one fill per
 * library and size (--runs k: k fills, medians of those); libraries take turns going first.
 */
import type { Redis } from 'ioredis';
import { loadAdapter } from './adapters/index.js';
import type { Adapter, LibName, Producer, ServerAddress } from './adapters/types.js';
import { monoMs, withTimeout } from './clock.js';
import { cpuUs, flushAll, usedMemory } from './redis-stats.js';
import { type BacklogShape, backlogShape, buildBacklog, deadlineMs, waitForCounts } from './scale-backlog.js';
import { addSerial, fillBulk, perSecond } from './scenarios/helpers.js';
import { median } from './stats.js';
import { WorkerProcess } from './worker-process.js';

export const SERIAL_ADDS = 2_000;
/**
 * Rounds of (single adds, bulk adds, drain) per fill; the row takes their medians. A round adds about
 * as many jobs as it drains, so every round runs at the same backlog, and a burst of load from
 * elsewhere on the machine spoils one round rather than the row.
 */
export const ROUNDS = 3;
const DRAIN_CONCURRENCY = 50;
/**
 * A closing Bee-Queue worker leaves the jobs it popped while closing in `active`, for stall recovery
 * to return later (bee-queue lib/queue.js, "picked up later as a stalled job"): up to one per slot
 * of each round's drain worker.
 */
const LEAVES_POPPED_JOBS_ACTIVE: readonly LibName[] = ['beequeue'];

/** What one round at the backlog measures. */
export interface RoundFigures {
  enqueueSerialPerSec: number;
  enqueueBulkPerSec: number;
  drainPerSec: number;
  redisCpuUsPerJob: number;
}

/** The rounds run again once the backlog is settled (DEBUG RELOAD): their medians, and each round. */
export interface SettledFigures extends RoundFigures {
  rounds: RoundFigures[];
  /** Seconds the reload took (Redis answers other clients LOADING meanwhile). */
  reloadS: number;
  /** Memory the reload freed, per queued (waiting + delayed) job: a move's old table, if one is left. */
  freedBytesPerQueuedJob: number;
}

/** A fill's figures: the medians of its rounds (each round also kept), and the backlog's memory. */
export interface ScaleRow extends BacklogShape, RoundFigures {
  lib: LibName;
  run: number;
  /** Jobs drained (M). */
  drained: number;
  fillPerSec: number;
  rounds: RoundFigures[];
  bytesPerWaitingJob: number;
  bytesPerDelayedJob: number;
  bytesPerHeldJob: number;
  usedMiB: number;
  /** The same backlog settled (absent in results written before it was measured). */
  settled?: SettledFigures;
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
  /** The held set is min(maxHeld, B/2) jobs. */
  maxHeld: number;
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

/** The medians of a set of rounds. */
function medianRound(rounds: readonly RoundFigures[]): RoundFigures {
  return {
    enqueueSerialPerSec: Math.round(median(rounds.map((r) => r.enqueueSerialPerSec))),
    enqueueBulkPerSec: Math.round(median(rounds.map((r) => r.enqueueBulkPerSec))),
    drainPerSec: Math.round(median(rounds.map((r) => r.drainPerSec))),
    redisCpuUsPerJob: round1(median(rounds.map((r) => r.redisCpuUsPerJob))),
  };
}

/** One round at the backlog: single adds, bulk adds, then a drain of `m` (net: the backlog stays). */
async function measureRound(
  adapter: Adapter,
  env: ScaleEnv,
  producer: Producer,
  queue: string,
  m: number,
): Promise<RoundFigures> {
  const t0 = monoMs();
  await withTimeout(addSerial(producer, SERIAL_ADDS), deadlineMs(SERIAL_ADDS), `${adapter.lib} single adds`);
  const t1 = monoMs();
  await withTimeout(fillBulk(producer, env.n), deadlineMs(env.n), `${adapter.lib} bulk adds`);
  const t2 = monoMs();
  const d = await drain(adapter, env, queue, m);
  return {
    enqueueSerialPerSec: Math.round(perSecond(SERIAL_ADDS, t1 - t0)),
    enqueueBulkPerSec: Math.round(perSecond(env.n, t2 - t1)),
    drainPerSec: Math.round(d.perSec),
    redisCpuUsPerJob: round1(d.cpuUsPerJob),
  };
}

/**
 * Settles the backlog (DEBUG RELOAD: Redis saves it and loads it again, every hash and set built at its
 * final size, as after a restart; clients stay connected) and runs the rounds again on it.
 */
async function settle(
  env: ScaleEnv,
  shape: BacklogShape,
  runRounds: () => Promise<RoundFigures[]>,
): Promise<SettledFigures> {
  const before = await usedMemory(env.admin);
  const t0 = monoMs();
  await env.admin.call('DEBUG', 'RELOAD');
  const reloadS = round1((monoMs() - t0) / 1000);
  const freed = before - (await usedMemory(env.admin));
  const rounds = await runRounds();
  return {
    ...medianRound(rounds),
    rounds,
    reloadS,
    freedBytesPerQueuedJob: round1(freed / (shape.waiting + shape.delayed)),
  };
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
    const shape = backlogShape(backlog, env.maxHeld);
    const b = await buildBacklog(adapter, env.server, env.admin, producer, queue, shape, (h) => {
      holder = h;
    });
    const t1 = monoMs();
    const runRounds = async (): Promise<RoundFigures[]> => {
      const rounds: RoundFigures[] = [];
      for (let k = 0; k < ROUNDS; k++) rounds.push(await measureRound(adapter, env, producer, queue, m));
      return rounds;
    };
    // The drains took jobs off the top of the waiting list only: the held set is still held (its leases
    // renewed throughout), and no delayed job has become due.
    const stray = LEAVES_POPPED_JOBS_ACTIVE.includes(adapter.lib) ? ROUNDS * DRAIN_CONCURRENCY : 0;
    const intact = async (sets: number, when: string) => {
      const strayMax = stray * sets;
      await waitForCounts(
        producer,
        (c) =>
          c.delayed === b.shape.delayed && c.active >= b.shape.held && c.active <= b.shape.held + strayMax,
        `${b.shape.delayed} delayed, ${b.shape.held}${strayMax ? ` to ${b.shape.held + strayMax}` : ''} active`,
        15_000,
        `${adapter.lib} ${when}`,
      );
      if (holder?.failedWith) throw holder.failedWith;
    };
    const rounds = await runRounds();
    await intact(1, 'after the drain');
    const t2 = monoMs();
    const settled = await settle(env, b.shape, runRounds);
    await intact(2, 'after the settled drain');
    const t3 = monoMs();
    return {
      lib: adapter.lib,
      run,
      ...b.shape,
      drained: m,
      fillPerSec: Math.round(b.fillPerSec),
      ...medianRound(rounds),
      rounds,
      bytesPerWaitingJob: Math.round(b.bytesPerWaitingJob),
      bytesPerDelayedJob: Math.round(b.bytesPerDelayedJob),
      bytesPerHeldJob: Math.round(b.bytesPerHeldJob),
      usedMiB: Math.round(b.usedMiB),
      settled,
      stepS: {
        flush: round1(flushS),
        held: round1(b.stepS.held),
        waiting: round1(b.stepS.waiting),
        delayed: round1(b.stepS.delayed),
        rounds: round1((t2 - t1) / 1000),
        settled: round1((t3 - t2) / 1000),
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
