/**
 * Builds the backlog the scale stage measures at (bench/scale.ts), on an empty Redis:
 *  1. the held set: H jobs added (none with --scale-held 0), then claimed by a worker child at concurrency H whose processor
 *     never returns until the child is closed (mode `hold`), so they stay active under leases the
 *     worker keeps renewing; polled until the library's counters show all H active;
 *  2. B waiting jobs, in bulk calls of 1 000 with FILL_LANES calls in flight;
 *  3. B/10 delayed jobs due two hours from now or later (so none becomes due while measuring).
 * Redis memory (total.allocated minus client buffers) is read between the steps, so each kind of job
 * gets its own bytes per job, and every step is timed.
 */
import type { Redis } from 'ioredis';
import type { Adapter, JobSpec, Producer, ServerAddress, StateCounts } from './adapters/types.js';
import { monoMs, sleep, withTimeout } from './clock.js';
import { usedMemory } from './redis-stats.js';
import { BULK_CHUNK, payload } from './scenarios/helpers.js';
import { WorkerProcess } from './worker-process.js';

/** Bulk calls in flight while filling: a fill of 1 000 000 jobs stays well under a minute. */
const FILL_LANES = 4;
/** Delayed jobs are due this far ahead (plus 1 ms per job), far beyond the end of a measurement. */
const DELAY_LEAD_MS = 2 * 3_600_000;
/** How often the counters are read while waiting for a state (each wait has its own deadline). */
const POLL_MS = 20;

export interface BacklogShape {
  waiting: number;
  delayed: number;
  held: number;
}

/** B waiting, B/10 delayed, min(maxHeld, B/2) held (issue #17: 10 000 held by workers). */
export function backlogShape(backlog: number, maxHeld: number): BacklogShape {
  return {
    waiting: backlog,
    delayed: Math.floor(backlog / 10),
    held: Math.min(maxHeld, Math.floor(backlog / 2)),
  };
}

export interface Backlog {
  shape: BacklogShape;
  /** Waiting jobs per second while filling (bulk calls of 1 000, FILL_LANES in flight). */
  fillPerSec: number;
  bytesPerWaitingJob: number;
  bytesPerDelayedJob: number;
  /** Includes the holder's own keys (registration, heartbeat): a few hundred bytes in all. */
  bytesPerHeldJob: number;
  /** Redis memory in use once the backlog is complete (jobs and queue structures), MiB. */
  usedMiB: number;
  /** Seconds taken by each step. */
  stepS: { held: number; waiting: number; delayed: number };
}

/** A generous floor of 1 000 jobs/s for any bulk step, and a minute for everything else. */
export function deadlineMs(jobs: number): number {
  return 60_000 + jobs;
}

/** Adds `count` jobs in bulk calls of BULK_CHUNK, FILL_LANES calls in flight. */
async function fillFast(producer: Producer, count: number, make: (i: number) => JobSpec): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const start = next;
      next = Math.min(count, start + BULK_CHUNK);
      const chunk: JobSpec[] = [];
      for (let i = start; i < next; i++) chunk.push(make(i));
      await producer.addBulk(chunk);
    }
  };
  await Promise.all(Array.from({ length: FILL_LANES }, lane));
}

/**
 * Polls the library's own counters until `ok` holds (`want` says what it asks, for the error);
 * throws with the last counts at the deadline.
 */
export async function waitForCounts(
  producer: Producer,
  ok: (counts: StateCounts) => boolean,
  want: string,
  timeoutMs: number,
  what: string,
): Promise<StateCounts> {
  const deadline = monoMs() + timeoutMs;
  for (;;) {
    const counts = await producer.counts();
    if (ok(counts)) return counts;
    if (monoMs() > deadline) {
      throw new Error(`${what}: wanted ${want} within ${timeoutMs} ms, counts ${JSON.stringify(counts)}`);
    }
    await sleep(POLL_MS);
  }
}

/** Builds the backlog on queue `queue` (Redis empty); the caller closes `holder`, also on error. */
export async function buildBacklog(
  adapter: Adapter,
  server: ServerAddress,
  admin: Redis,
  producer: Producer,
  queue: string,
  shape: BacklogShape,
  onHolder: (holder: WorkerProcess) => void,
): Promise<Backlog> {
  const m0 = await usedMemory(admin);
  const t0 = monoMs();
  await withTimeout(
    fillFast(producer, shape.held, (i) => ({ data: payload(i) })),
    deadlineMs(shape.held),
    `${adapter.lib}: held set fill`,
  );
  if (shape.held > 0) {
    const holder = await WorkerProcess.spawn(
      { lib: adapter.lib, server, queue, concurrency: shape.held, mode: 'hold', expect: 0 },
      // The holder never reports `done`: its jobs end only when it is closed.
      { doneTimeoutMs: 60_000 },
    );
    onHolder(holder);
    await holder.start();
    // Held means both: a processor running in each of the holder's slots, and the library's own
    // counters showing every one of those jobs active (nothing left waiting).
    await holder.holding(deadlineMs(shape.held));
    await waitForCounts(
      producer,
      (c) => c.waiting === 0 && c.active === shape.held,
      `0 waiting, ${shape.held} active`,
      deadlineMs(shape.held),
      `${adapter.lib}: held set claimed`,
    );
  }
  const m1 = await usedMemory(admin);
  const t1 = monoMs();
  await withTimeout(
    fillFast(producer, shape.waiting, (i) => ({ data: payload(i) })),
    deadlineMs(shape.waiting),
    `${adapter.lib}: waiting fill`,
  );
  const t2 = monoMs();
  const m2 = await usedMemory(admin);
  const dueFrom = Date.now() + DELAY_LEAD_MS;
  await withTimeout(
    fillFast(producer, shape.delayed, (i) => ({ data: payload(i), runAt: dueFrom + i })),
    deadlineMs(shape.delayed),
    `${adapter.lib}: delayed fill`,
  );
  const t3 = monoMs();
  const m3 = await usedMemory(admin);
  // Nothing may have moved: the holder is at full concurrency and nothing delayed is due.
  await waitForCounts(
    producer,
    (c) => c.waiting === shape.waiting && c.delayed === shape.delayed && c.active === shape.held,
    `${shape.waiting} waiting, ${shape.delayed} delayed, ${shape.held} active`,
    10_000,
    `${adapter.lib}: backlog complete`,
  );
  return {
    shape,
    fillPerSec: (shape.waiting / (t2 - t1)) * 1000,
    bytesPerWaitingJob: (m2 - m1) / shape.waiting,
    bytesPerDelayedJob: shape.delayed > 0 ? (m3 - m2) / shape.delayed : Number.NaN,
    bytesPerHeldJob: shape.held > 0 ? (m1 - m0) / shape.held : Number.NaN,
    usedMiB: m3 / 2 ** 20,
    stepS: { held: (t1 - t0) / 1000, waiting: (t2 - t1) / 1000, delayed: (t3 - t2) / 1000 },
  };
}
