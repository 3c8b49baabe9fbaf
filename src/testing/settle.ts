/**
 * When is a test env "settled"? Read from the workers' own bookkeeping (Worker.diagnostics: leases
 * held, processors running, claims and outcomes in flight) and from Redis (waiting jobs, paused),
 * never guessed from elapsed time.
 *
 * - quiet: no claim, begin or outcome in flight, no claimed job waiting for a slot, and no waiting job
 *   a worker has room for. Processors may still be running (advance moves the clock then: a running
 *   job may be the one whose lease the test wants to expire).
 * - idle: quiet, and no processor running nor lease held.
 */
import type { Queue } from '../queue/queue.js';
import type { Worker } from '../worker/worker.js';

export type SettleLevel = 'quiet' | 'idle';

/** A queue as the env sees it: its address and a Queue on the env's connection and clock. */
export interface WatchedQueue {
  prefix: string;
  name: string;
  queue: Queue;
}

type AnyWorker = Worker<unknown, unknown>;

/** The attempts running now, as fencing tokens (unique per claim). */
export function runningAttempts(workers: readonly AnyWorker[]): Set<string> {
  return new Set(
    workers.flatMap((w) => w.diagnostics().lanes.flatMap((l) => l.runningJobs.map((j) => j.token))),
  );
}

function isRunning(w: AnyWorker): boolean {
  return w.diagnostics().state === 'running';
}

/** What keeps `workers` and `queues` from being settled at `level`; empty when they are. */
export async function unsettled(
  workers: readonly AnyWorker[],
  queues: readonly WatchedQueue[],
  level: SettleLevel,
  /** At 'idle': attempts (fencing tokens) left running, not waited for (see runningAttempts). */
  exempt: ReadonlySet<string> = new Set(),
): Promise<string[]> {
  // Redis first, then the workers: a claim that took a job after this read is in flight, or its job
  // held, when the workers are read next. (The other order could miss a job in between: read as
  // waiting-free after the claim, and as claim-free before it.)
  const claimable = (w: AnyWorker, q: WatchedQueue) =>
    w.name === q.name && w.options.prefix === q.prefix && isRunning(w) && !w.isPaused;
  const waitingIn = new Map<WatchedQueue, number>();
  await Promise.all(
    queues
      .filter((q) => workers.some((w) => claimable(w, q)))
      .map(async (q) => {
        const [counts, paused] = await Promise.all([q.queue.counts(), q.queue.isPaused()]);
        if (!paused && counts.waiting > 0) waitingIn.set(q, counts.waiting);
      }),
  );
  const waiting: string[] = [];
  for (const [q, n] of waitingIn) {
    // Only a worker with a free slot can take a waiting job now; a full one takes it as a slot frees
    // (and its running processor keeps the env from being idle meanwhile, unless exempt).
    const room = workers.some((w) => claimable(w, q) && w.activeCount < w.concurrency);
    if (room) waiting.push(`queue ${q.name}: ${n} jobs waiting`);
  }
  const pending: string[] = [];
  for (const w of workers) {
    const d = w.diagnostics();
    if (d.state !== 'running') continue;
    let held = 0;
    for (const lane of d.lanes) {
      held += lane.heldCount;
      if (lane.claimsRequested > 0) pending.push(`worker ${w.name}: a claim in flight`);
      if (lane.outcomesPending > 0)
        pending.push(`worker ${w.name}: ${lane.outcomesPending} outcomes being written`);
    }
    // Held but not running: claimed ahead (prefetch) and about to start, or an outcome not yet written.
    if (held > d.running) pending.push(`worker ${w.name}: ${held - d.running} claimed jobs not started yet`);
    const running = d.lanes.flatMap((l) => l.runningJobs).filter((j) => !exempt.has(j.token));
    if (level === 'idle' && running.length > 0) {
      const ids = running.slice(0, 5).map((j) => j.id);
      pending.push(`worker ${w.name}: ${running.length} processors still running (jobs ${ids.join(', ')})`);
    }
  }
  pending.push(...waiting);
  return pending;
}
