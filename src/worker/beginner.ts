/**
 * Starts reserved jobs. A claim starts only as many jobs as the worker has free slots (their attempt is
 * counted by claim.lua); the prefetched rest are RESERVED: leased, but with no attempt counted, so a
 * worker killed while holding them spends nothing (recover.lua puts them back as they were). Before a
 * reserved job's processor runs, begin.lua counts its attempt. The jobs that reach a free slot in the
 * same event-loop turn go in one call.
 *
 * begin.lua is idempotent, so a call whose reply is lost (ConnectionError) is sent again, until it is
 * answered or the lease is known lost (the renewer or a cancel dropped it). A job the call refuses is
 * not run: its lease is gone. A call that fails while the worker is closing is not retried: its jobs
 * go to the closing worker as `unknown`, and release.lua (fenced, right whether they were begun or not)
 * hands them back.
 */
import { delay, reconnectDelayMs } from '../timers.js';
import type { Job } from './job.js';

/** begun: run it; lost: its lease is gone, never run it; unknown: closing, the call's fate unknown. */
export type BeginOutcome = 'begun' | 'lost' | 'unknown';

export interface BeginnerDeps {
  begin(rows: { id: string; token: string }[]): Promise<string[]>;
  /** This worker still holds the job's lease (as far as it knows). */
  isHeld(job: Job<unknown>): boolean;
  isClosing(): boolean;
  onOutcome(job: Job<unknown>, outcome: BeginOutcome): void;
  onError(err: unknown): void;
}

export class Beginner {
  private pending: Job<unknown>[] = [];
  private scheduled = false;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(private readonly deps: BeginnerDeps) {}

  /** Begins `job` with the others pushed in this event-loop turn. */
  push(job: Job<unknown>): void {
    this.pending.push(job);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const jobs = this.pending.splice(0);
      if (jobs.length === 0) return;
      // close() was called since: nothing starts, so nothing is begun (the jobs are handed back).
      if (this.deps.isClosing()) {
        for (const job of jobs) this.deps.onOutcome(job, 'unknown');
        return;
      }
      const call = this.send(jobs);
      this.inFlight.add(call);
      void call.then(() => this.inFlight.delete(call));
    });
  }

  /** Resolves once every begin call has been answered (or given up on while closing). */
  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all(this.inFlight);
  }

  private async send(jobs: Job<unknown>[]): Promise<void> {
    for (let failures = 1; ; failures++) {
      let lost: string[];
      try {
        lost = await this.deps.begin(jobs.map((j) => ({ id: j.id, token: j.token })));
      } catch (err) {
        this.deps.onError(err);
        if (this.deps.isClosing()) {
          for (const job of jobs) this.deps.onOutcome(job, 'unknown');
          return;
        }
        await delay(reconnectDelayMs(failures));
        const still: Job<unknown>[] = [];
        for (const job of jobs) {
          if (this.deps.isHeld(job)) still.push(job);
          else this.deps.onOutcome(job, 'lost');
        }
        jobs = still;
        if (jobs.length === 0) return;
        continue;
      }
      const gone = new Set(lost);
      for (const job of jobs) this.deps.onOutcome(job, gone.has(job.id) ? 'lost' : 'begun');
      return;
    }
  }
}
