/**
 * Start marks: the one place an attempt is counted. When a processor starts, its job's mark is queued
 * here and the processor runs at once; the worker never waits for Redis between holding a job and
 * starting it. Marks ride on the lane's next completion call (complete.lua's `starts`: at concurrency 1
 * a job's completion and the next job's start are one call), and whatever no completion took goes in
 * one start.lua call per event-loop turn.
 *
 * A mark is only bookkeeping for recovery (recover.lua charges a lost lease whose start was marked and
 * returns an unmarked one free): an outcome implies its start (complete.lua and fail.lua count it if
 * the mark has not arrived), so a mark whose job has already settled is dropped. A mark refused because
 * the lease is gone stops the attempt. Marks are idempotent, so a call that failed is sent again.
 *
 * One kind of job is marked before its processor runs instead (confirm): one that came back unmarked
 * FREE_RETURNS times, whose processor the runner calls only once Redis answered. Those marks go in one
 * start.lua call per turn of the event loop too, and are sent again until answered while wanted.
 */
import { delay, reconnectDelayMs, safeTimeout } from '../timers.js';
import type { Job } from './job.js';

export interface StarterDeps {
  /** start.lua: marks these starts; resolves with the ids whose lease is no longer held. */
  start(rows: { id: string; token: string }[]): Promise<string[]>;
  /** The job's mark is still wanted: its attempt is not decided and this worker holds its lease. */
  wanted(job: Job<unknown>): boolean;
  /** Marks refused: the lease of these jobs is gone. */
  onLost(jobs: Job<unknown>[]): void;
  onError(err: unknown): void;
}

/** Marks encoded as complete.lua's `starts` argument: `id \n token \n id \n token ...`. */
export function encodeMarks(jobs: readonly Job<unknown>[]): string {
  let out = '';
  for (const job of jobs) out += out === '' ? `${job.id}\n${job.token}` : `\n${job.id}\n${job.token}`;
  return out;
}

export class Starter {
  private pending: Job<unknown>[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private failures = 0;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  /** Marks to confirm (confirm), sent together at the end of this turn. */
  private confirms: { job: Job<unknown>; answer: (held: boolean) => void }[] = [];
  private stopped = false;

  constructor(private readonly deps: StarterDeps) {}

  /** The processor of `job` has just been called: mark its start with the next call. */
  push(job: Job<unknown>): void {
    this.pending.push(job);
  }

  get pendingCount(): number {
    return this.pending.length;
  }

  /** Takes the pending marks to ride on another call; marks of settled attempts are dropped. */
  take(): Job<unknown>[] {
    if (this.pending.length === 0) return this.pending;
    const out = this.pending.filter((job) => this.deps.wanted(job));
    this.pending = [];
    return out;
  }

  /** The call that carried `jobs`' marks failed: they go again with the next call. */
  putBack(jobs: readonly Job<unknown>[]): void {
    if (jobs.length > 0) this.pending.unshift(...jobs);
  }

  /** Reads the reply of a call that carried marks: the ids refused (lease gone) stop their attempts. */
  refused(jobs: readonly Job<unknown>[], lostIds: readonly string[]): void {
    if (lostIds.length === 0) return;
    const lost = new Set(lostIds);
    this.deps.onLost(jobs.filter((job) => lost.has(job.id)));
  }

  /** Sends the pending marks in one start.lua call (none: nothing sent). */
  flush(): void {
    if (this.retryTimer) return; // backing off after a failure: the retry timer flushes
    const jobs = this.take();
    if (jobs.length === 0) return;
    const call = this.deps.start(jobs.map((j) => ({ id: j.id, token: j.token }))).then(
      (lost) => {
        this.failures = 0;
        this.refused(jobs, lost);
      },
      (err: unknown) => {
        this.deps.onError(err);
        this.putBack(jobs);
        this.failures++;
        this.retryTimer = safeTimeout(() => {
          this.retryTimer = undefined;
          this.flush();
        }, reconnectDelayMs(this.failures));
      },
    );
    this.inFlight.add(call);
    void call.then(() => this.inFlight.delete(call));
  }

  /**
   * Marks the start of `job` before its processor runs, and resolves once Redis answered: true when the
   * start is counted under its lease (already marked under it: true too), false when the lease is gone
   * (then onLost, as for a refused mark) or the mark is no longer wanted, or this starter stopped.
   */
  confirm(job: Job<unknown>): Promise<boolean> {
    return new Promise((answer) => {
      this.confirms.push({ job, answer });
      if (this.confirms.length === 1) queueMicrotask(() => void this.sendConfirms());
    });
  }

  private async sendConfirms(): Promise<void> {
    let waiting = this.confirms;
    this.confirms = [];
    for (let failures = 0; ; ) {
      waiting = waiting.filter((c) => {
        const wanted = !this.stopped && this.deps.wanted(c.job);
        if (!wanted) c.answer(false);
        return wanted;
      });
      if (waiting.length === 0) return;
      try {
        const lost = await this.deps.start(waiting.map((c) => ({ id: c.job.id, token: c.job.token })));
        this.refused(
          waiting.map((c) => c.job),
          lost,
        );
        const gone = new Set(lost);
        for (const c of waiting) c.answer(!gone.has(c.job.id));
        return;
      } catch (err) {
        this.deps.onError(err);
        await delay(reconnectDelayMs(++failures));
      }
    }
  }

  /** Resolves once every start call sent so far has been answered (or failed). */
  async settled(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all(this.inFlight);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }
}
