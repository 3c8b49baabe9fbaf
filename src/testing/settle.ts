/**
 * When is a test env "settled"? Read from the workers' own bookkeeping (Worker.diagnostics: leases
 * held, processors running, claims and outcomes in flight, claims sent) and from Redis (waiting jobs,
 * paused), never guessed from elapsed time.
 *
 * - quiet: no claim or outcome in flight, no schedule occurrence being created (the call that creates
 *   the next one as an occurrence starts reads the time), no claimed job waiting for a slot, and no
 *   waiting job a worker with room could claim. Processors may still be running (advance moves the
 *   clock then: a running job may be the one whose lease the test wants to expire).
 * - idle: quiet, and no processor running (but those exempted: attempts running before an advance).
 *
 * Waiting jobs a worker cannot claim (a RateLimitError pause, a rate-limit window, group or
 * concurrency limits) must not keep the env unsettled, and only the claim script knows the rules. So
 * the workers are asked the production way: a `w` wake-up on the queue's channel, published after
 * Redis showed the waiting jobs. Once every worker with room has sent a claim since, and each came
 * back short (its fetcher "drained") while the count is unchanged, those jobs are not claimable now.
 */
import { Layout } from '../queue/partitions.js';
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

function claimsSent(w: AnyWorker): number {
  return w.diagnostics().lanes.reduce((n, l) => n + l.claimsSent, 0);
}

/** Wakes the queue's workers (every partition's wake channel), as an add or a retry does. */
async function nudge(q: WatchedQueue): Promise<void> {
  const layout = new Layout(q.prefix, q.name, Math.max(1, q.queue.partitions));
  for (const k of layout.parts) await q.queue.client.spublish(k.wakeChannel, 'w');
}

/** One settle call's view across its rounds (the wake-ups it sent). */
export class Settler {
  /** Per queue: the waiting count a wake-up was sent for, and each worker's claims sent then. */
  private readonly nudged = new Map<WatchedQueue, { count: number; sent: Map<AnyWorker, number> }>();

  constructor(
    private readonly level: SettleLevel,
    /** At 'idle': attempts (fencing tokens) left running, not waited for (see runningAttempts). */
    private readonly exempt: ReadonlySet<string> = new Set(),
  ) {}

  /** What keeps `workers` and `queues` from being settled; empty when they are. */
  async pending(workers: readonly AnyWorker[], queues: readonly WatchedQueue[]): Promise<string[]> {
    // Redis first, then the workers: a claim that took a job after this read is in flight, or its
    // job held, when the workers are read next. (The other order could miss a job in between: read
    // as waiting-free after the claim, and as claim-free before it.)
    const claimable = (w: AnyWorker, q: WatchedQueue) =>
      w.name === q.name &&
      w.options.prefix === q.prefix &&
      w.diagnostics().state === 'running' &&
      !w.isPaused;
    const waitingIn = new Map<WatchedQueue, number>();
    await Promise.all(
      queues
        .filter((q) => workers.some((w) => claimable(w, q)))
        .map(async (q) => {
          const [counts, paused] = await Promise.all([q.queue.counts(), q.queue.isPaused()]);
          if (!paused && counts.waiting > 0) waitingIn.set(q, counts.waiting);
        }),
    );
    const pending = this.workersPending(workers);
    for (const q of queues) {
      const n = waitingIn.get(q);
      if (n === undefined) {
        this.nudged.delete(q);
        continue;
      }
      // Only a worker with a free slot can take a waiting job now; a full one takes it as a slot
      // frees (and its running processor keeps the env from being idle meanwhile, unless exempt).
      const room = workers.filter((w) => claimable(w, q) && w.activeCount < w.concurrency);
      if (room.length === 0) continue;
      const asked = this.nudged.get(q);
      const answered =
        asked !== undefined &&
        asked.count === n &&
        room.every((w) => {
          const lanes = w.diagnostics().lanes;
          const idleFetchers = lanes.every((l) => l.drained && l.claimsRequested === 0);
          return idleFetchers && claimsSent(w) > (asked.sent.get(w) ?? Number.POSITIVE_INFINITY);
        });
      if (answered) continue; // claimed for since the wake-up, and nothing came: not claimable now
      pending.push(`queue ${q.name}: ${n} jobs waiting`);
      // A wake-up per count seen: the claims it causes are the answer (the next rounds look for them).
      if (asked === undefined || asked.count !== n) {
        this.nudged.set(q, { count: n, sent: new Map(room.map((w) => [w, claimsSent(w)])) });
        await nudge(q);
      }
    }
    return pending;
  }

  private workersPending(workers: readonly AnyWorker[]): string[] {
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
      // The call creating a schedule's next occurrence reads the time: the clock must not move before.
      if (d.scheduleAdvances > 0)
        pending.push(`worker ${w.name}: ${d.scheduleAdvances} schedule occurrences being created`);
      // Held but not running: claimed ahead (prefetch) and about to start, or an outcome not yet written.
      if (held > d.running)
        pending.push(`worker ${w.name}: ${held - d.running} claimed jobs not started yet`);
      const running = d.lanes.flatMap((l) => l.runningJobs).filter((j) => !this.exempt.has(j.token));
      if (this.level === 'idle' && running.length > 0) {
        const ids = running.slice(0, 5).map((j) => j.id);
        pending.push(`worker ${w.name}: ${running.length} processors still running (jobs ${ids.join(', ')})`);
      }
    }
    return pending;
  }
}
