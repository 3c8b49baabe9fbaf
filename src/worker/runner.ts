/**
 * The runner: runs the processor for the jobs the lanes claim, `concurrency` at a time over all lanes.
 *
 * It owns the slots (how many jobs run, how many each lane may claim, how many a claim starts at
 * once), the buffer of jobs claimed but not started, the automatic prefetch estimate, the timeouts, and
 * settling: whatever the processor returns or throws becomes one outcome row (complete, or fail with
 * its retry delay) for the job's lane to write. Cancels and lost leases abort attempts; at close,
 * buffered jobs are handed back and attempts still running past the timeout are failed.
 *
 * It knows no lane: jobs come in (accept), and what it decides goes out as values through its deps, which
 * the worker routes to the job's lane: a start to mark, an outcome row to write, jobs to hand back, a
 * freed slot. It reads one thing of the lanes, how long a job's lease surely stands. A job's processor
 * runs as soon as it has a slot: its start is marked with the lane's next call (starter.ts), never awaited.
 */

import { type Clock, REAL_TIMERS } from '../clock.js';
import {
  type AttemptError,
  isA,
  normaliseThrown,
  resultError,
  serializeAttemptError,
} from '../error-normaliser.js';
import {
  CancelledError,
  ClosedError,
  isPauseMs,
  LeaseExpiredError,
  RateLimitError,
  SnoozeError,
  SnoozeLimitError,
  TimeoutError,
} from '../errors.js';
import { retryDelayMs } from '../options/backoff.js';
import { decodeBackoff } from '../store/job-record.js';
import { safeTimeout } from '../timers.js';
import { toJson } from '../validate.js';
import type { CompleteRow, FailRow } from './acker.js';
import { abortAttempt, attemptOf, type Job } from './job.js';
import type { ResolvedWorkerOptions } from './options.js';
import { RunningJobs, type RunningView } from './running-jobs.js';
import type { SlotCounters } from './slot-share.js';
import { expiredUnstarted, isUnstarted } from './unstarted.js';

/** See WorkerOptions.prefetch: a prefetched job waits locally for about this long at most. */
const PREFETCH_HORIZON_MS = 20;

/** The most jobs `prefetch: 'auto'` claims beyond the free slots (very short jobs reach it). */
export function autoPrefetchCap(concurrency: number): number {
  return Math.max(concurrency, 100);
}

export type Processor<Data, Result> = (job: Job<Data>) => Promise<Result> | Result;

export interface RunnerDeps<Data, Result> {
  /** The queue's name, for the ClosedError of attempts failed at close. */
  name: string;
  options: ResolvedWorkerOptions;
  processor: Processor<Data, Result>;
  /** False before start() and from close() on: then no job starts. */
  isRunning(): boolean;
  /**
   * How long this attempt's lease surely stands yet, as its lane knows it (-Infinity: its lane no
   * longer holds it: lost, or claimed again meanwhile).
   */
  leaseLeft(job: Job<unknown>): number;
  /** A job's processor is about to be called (the worker advances its schedule, if it has one). */
  onStart(job: Job<Data>): void;
  /** The attempt's processor started: its lane marks the start with its next call. */
  started(job: Job<unknown>): void;
  /** An attempt settled: its lane writes this completion (and holds the lease until it is written). */
  completed(row: CompleteRow): void;
  /** An attempt settled: its lane writes this failure, snooze or rate limit (as `completed`). */
  failed(row: FailRow): void;
  /** Jobs claimed and never started go back to waiting (release.lua, through their lanes). */
  handBack(jobs: Job<unknown>[]): Promise<void>;
  /** A slot freed: outcomes are written and claims made at the end of this event-loop turn (turns.ts). */
  slotFreed(): void;
  /**
   * The processor marks its attempt's start itself, by calling attemptOf(job).onStart (a sandbox pool, when a
   * sandbox acknowledges the job); false: the runner marks it as it calls the processor.
   */
  processorMarksStart: boolean;
  onError(err: unknown): void;
}

export class Runner<Data, Result> implements SlotCounters {
  /** Jobs whose processor is running, over all partitions. */
  private runningCount = 0;
  /** The attempts running, per partition: started and stopped here, read by the worker (runningIn). */
  private readonly running = new Map<number, RunningJobs>();
  /** Claimed (leased) jobs waiting for a free slot: prefetched so the next batch is ready when slots free. */
  private readonly buffer: Job<Data>[] = [];
  /** Moving average of attempt durations (ms), for the automatic prefetch; starts at "not short". */
  private avgDurationMs = 100;
  private idleWaiters: (() => void)[] = [];
  /** Release calls in flight: jobs claimed but never started, handed back by a closing worker. */
  private readonly handingBack = new Set<Promise<void>>();

  /** Slots: the concurrency option, changed at run time by worker.concurrency = n. */
  private concurrencyNow: number;
  /** worker.pause(): no claims and no starts until resume(); claimed jobs are handed back. */
  private paused = false;

  /** Node's timers, or the test clock's (clock.ts) when the worker has one: attempts' timeouts. */
  private readonly timers: Clock;

  constructor(private readonly deps: RunnerDeps<Data, Result>) {
    this.concurrencyNow = deps.options.concurrency;
    this.timers = deps.options.clock ?? REAL_TIMERS;
  }

  get concurrency(): number {
    return this.concurrencyNow;
  }

  /** New number of slots: more starts buffered jobs and claims at once; fewer lets running jobs finish. */
  setConcurrency(n: number): void {
    this.concurrencyNow = n;
    this.afterSlotFreed();
  }

  get isPaused(): boolean {
    return this.paused;
  }

  /** Stops claiming and starting jobs here; jobs claimed but not started go back to waiting at once. */
  pause(): void {
    this.paused = true;
    this.handBackBuffered();
  }

  resume(): void {
    this.paused = false;
    this.afterSlotFreed();
  }

  /** Number of jobs whose processor is running now. */
  get activeCount(): number {
    return this.runningCount;
  }

  // ---- slots (read by the lanes' sharing: slot-share.ts) ---------------------------------

  /** Slots plus the prefetch limit: how many jobs may be held (running or buffered). */
  get capacity(): number {
    return this.concurrencyNow + this.prefetchLimit();
  }

  /** Jobs running or buffered (claimed, not started). */
  get held(): number {
    return this.runningCount + this.buffer.length;
  }

  /** Slots neither running nor holding a buffered job. */
  get free(): number {
    return this.concurrencyNow - this.runningCount - this.buffer.length;
  }

  /** Attempts last the prefetch horizon or less on average. */
  get shortJobs(): boolean {
    return this.avgDurationMs <= PREFETCH_HORIZON_MS;
  }

  /**
   * How many jobs to claim beyond free slots. Prefetching overlaps the next claim's round trip with the
   * current batch's work and batches claims, which only pays for short jobs. 'auto' prefetches about
   * as many jobs as this worker finishes in PREFETCH_HORIZON_MS, so a prefetched job waits locally
   * for ~20 ms at most and long jobs are never held back from idle workers.
   */
  private prefetchLimit(): number {
    const p = this.deps.options.prefetch;
    if (p !== 'auto') return p;
    const c = this.concurrencyNow;
    return Math.min(
      Math.floor((c * PREFETCH_HORIZON_MS) / Math.max(this.avgDurationMs, 0.01)),
      autoPrefetchCap(c),
    );
  }

  // ---- claimed jobs --------------------------------------------------------------------------

  accept(jobs: Job<unknown>[]): void {
    this.buffer.push(...(jobs as Job<Data>[]));
    // A claim answered while closing: its jobs must not start; they go back at once.
    if (this.deps.isRunning() && !this.paused) this.runBuffered();
    else this.handBackBuffered();
  }

  /** Hands every buffered (claimed, never started) job back to waiting; close() awaits these calls. */
  handBackBuffered(): void {
    this.handBack(this.buffer.splice(0));
  }

  private handBack(jobs: Job<Data>[]): void {
    if (jobs.length === 0) return;
    const call = this.deps.handBack(jobs as Job<unknown>[]);
    this.handingBack.add(call);
    void call.then(() => this.handingBack.delete(call));
  }

  /** Resolves once every hand-back call made so far has been answered (or failed). */
  async handedBack(): Promise<void> {
    await Promise.all(this.handingBack);
  }

  /** Starts buffered jobs while slots are free (skipping any whose lease was lost meanwhile). */
  private runBuffered(): void {
    // A closing worker starts nothing: close() hands its buffered jobs back instead.
    while (
      this.deps.isRunning() &&
      !this.paused &&
      this.runningCount < this.concurrencyNow &&
      this.buffer.length > 0
    ) {
      const job = this.buffer.shift()!;
      const leaseLeft = this.deps.leaseLeft(job as Job<unknown>);
      if (leaseLeft === Number.NEGATIVE_INFINITY) continue;
      // Never started, and past its expiry before a slot freed: it must not start. Handed back, the
      // next claim (or the expiry sweep) ends it dead with its ExpiredError on Redis's clock.
      // Nor may a job whose lease may run out before its start mark lands: renewals failed for two
      // thirds of it, so it may already be back in line, or done, elsewhere. Handed back (forgotten if
      // its lease is gone), it runs where a lease stands.
      if (expiredUnstarted(job) || leaseLeft < job.leaseMs / 3) {
        this.handBack([job]);
        continue;
      }
      this.runningCount++;
      this.run(job);
    }
  }

  // ---- running -------------------------------------------------------------------------------

  private run(job: Job<Data>): void {
    const runs = this.runsOf(job.partition);
    runs.start(job as Job<unknown>);
    // The attempt starts when its processor does: its start is marked and its timeout runs from then
    // (for a sandboxed module, once its sandbox took the job: a sandbox's start-up is not the job's).
    const attempt = attemptOf(job as Job<unknown>);
    attempt.onStart = () => {
      attempt.onStart = undefined;
      this.deps.started(job as Job<unknown>);
      if (job.timeoutMs <= 0) return;
      const timer = this.timers.setTimeout(() => {
        if (attempt.decided) return;
        const err = new TimeoutError(job.id, job.timeoutMs);
        abortAttempt(job as Job<unknown>, err);
        this.settle(job, undefined, normaliseThrown(err));
      }, job.timeoutMs);
      runs.armTimeout(job as Job<unknown>, timer);
    };
    if (!this.deps.processorMarksStart) attempt.onStart();
    job.startedAt = Date.now();
    this.deps.onStart(job);
    let promise: Promise<Result>;
    try {
      promise = Promise.resolve(this.deps.processor(job));
    } catch (err) {
      promise = Promise.reject(err);
    }
    // Whatever the processor threw or rejected with is read once, defensively (normaliseThrown never
    // throws), so every attempt ends with a recorded outcome and its slot freed.
    promise.then(
      (result) => this.settle(job, result, undefined),
      (err: unknown) =>
        isUnstarted(err) ? this.unstarted(job) : this.settle(job, undefined, normaliseThrown(err)),
    );
  }

  /** The processor never started the job and it must not start (expired meanwhile): hand it back. */
  private unstarted(job: Job<Data>): void {
    const attempt = attemptOf(job as Job<unknown>);
    if (attempt.decided) return;
    attempt.decided = true;
    this.deps.options.tracing.ended(job as Job<unknown>, 'handed-back');
    this.stopRunning(job.partition, job.id);
    this.handBack([job]);
    this.afterSlotFreed();
  }

  /** Frees the slot of a job that stopped running (settled, cancelled); returns how long it ran. */
  private stopRunning(partition: number, id: string): number | undefined {
    const ranMs = this.runsOf(partition).stop(id);
    if (ranMs !== undefined) this.runningCount--;
    return ranMs;
  }

  /** The attempt ended: its outcome row goes to its lane's acker, and its slot is freed. */
  private settle(job: Job<Data>, result: Result | undefined, failure: AttemptError | undefined): void {
    const attempt = attemptOf(job as Job<unknown>);
    if (attempt.decided) return; // timed out or cancelled earlier: this late outcome is not the attempt's
    attempt.decided = true;
    const ranMs = this.stopRunning(job.partition, job.id);
    if (ranMs !== undefined) this.avgDurationMs = this.avgDurationMs * 0.8 + ranMs * 0.2;
    if (failure === undefined) {
      let json: string | undefined;
      try {
        json =
          result === undefined
            ? ''
            : toJson(`result of job ${job.id}`, result, this.deps.options.maxPayloadBytes);
      } catch (err) {
        // Not JSON, too large, or a getter / Proxy trap that throws: a typed error fails the attempt.
        failure = normaliseThrown(resultError(job.id, err));
      }
      if (json !== undefined) {
        this.deps.completed({ id: job.id, token: job.token, result: json, job, value: result });
      }
    }
    const pause = failure === undefined ? undefined : this.pauseOf(job, failure.error);
    if (pause === 'limit') {
      failure = normaliseThrown(new SnoozeLimitError(job.id, this.deps.options.maxSnoozes));
    } else if (pause !== undefined) {
      failure = undefined;
      this.deps.failed({
        id: job.id,
        token: job.token,
        retryDelayMs: pause.delayMs,
        error: pause.kind,
        job,
        cause: pause.cause,
      });
    }
    if (failure !== undefined) {
      let delay = -1;
      if (!failure.unrecoverable && !job.isLastAttempt) {
        try {
          const backoff = decodeBackoff(job.backoff);
          const attempt = job.attempt - job.base;
          delay = retryDelayMs(
            backoff,
            attempt,
            failure.error,
            job as Job,
            this.deps.options.backoffStrategies,
          );
        } catch (err) {
          this.deps.onError(err);
          delay = 0;
        }
      }
      this.deps.failed({
        id: job.id,
        token: job.token,
        retryDelayMs: delay,
        error: serializeAttemptError(failure),
        job,
        cause: failure.error,
      });
    }
    this.afterSlotFreed();
  }

  /**
   * A SnoozeError or RateLimitError is no failure: its row's `error` is `S` or `R`, and fail.lua gives
   * the attempt back (and counts it in the job's snoozes). 'limit': a snooze or rate limit past the
   * Worker's maxSnoozes (both count, so a RateLimitError(0) thrown on every run cannot loop for ever),
   * which fails the attempt instead. undefined: any other error, and one of these classes whose
   * delayMs is not one its constructor accepts (changed after construction, or a sandbox's error
   * rebuilt with a bad one): an ordinary failure.
   */
  private pauseOf(
    job: Job<Data>,
    e: Error,
  ): { kind: 'S' | 'R'; delayMs: number; cause: Error } | 'limit' | undefined {
    const kind = isA(e, RateLimitError) ? 'R' : isA(e, SnoozeError) ? 'S' : undefined;
    if (kind === undefined) return undefined;
    let delayMs: unknown;
    try {
      delayMs = (e as SnoozeError).delayMs;
    } catch {
      return undefined; // a getter that throws: not a pause the library made
    }
    if (!isPauseMs(delayMs)) return undefined;
    if (job.snoozes >= this.deps.options.maxSnoozes) return 'limit';
    return { kind, delayMs, cause: e };
  }

  private afterSlotFreed(): void {
    this.runBuffered();
    this.deps.slotFreed();
    if (this.runningCount === 0 && this.buffer.length === 0) for (const w of this.idleWaiters.splice(0)) w();
  }

  private runsOf(partition: number): RunningJobs {
    let runs = this.running.get(partition);
    if (!runs) {
      runs = new RunningJobs(this.timers);
      this.running.set(partition, runs);
    }
    return runs;
  }

  /** The attempts of `partition` that run now. */
  runningIn(partition: number): RunningView {
    return this.runsOf(partition);
  }

  // ---- attempts stopped from outside ---------------------------------------------------------

  /**
   * queue.cancel already moved the job to dead (its lease is forgotten): if it runs here, abort it and
   * free its slot, sending no outcome.
   */
  cancelled(partition: number, id: string): void {
    const job = this.runsOf(partition).get(id);
    if (!job) return;
    const attempt = attemptOf(job);
    if (attempt.decided) return;
    attempt.decided = true;
    this.deps.options.tracing.ended(job, 'cancelled');
    abortAttempt(job, new CancelledError(job.id));
    this.stopRunning(partition, job.id);
    this.afterSlotFreed();
  }

  /** Buffered jobs are skipped by runBuffered (their lease is forgotten); running ones are told. */
  leaseLost(partition: number, ids: readonly string[]): void {
    for (const id of ids) {
      const job = this.runsOf(partition).get(id);
      if (job)
        abortAttempt(
          job,
          new LeaseExpiredError(`lease of job ${id} attempt ${job.attempt} was lost; it may run elsewhere`),
        );
    }
  }

  // ---- close ---------------------------------------------------------------------------------

  /** Resolves when nothing runs and nothing is buffered, or after `timeoutMs`. */
  whenIdle(timeoutMs: number): Promise<void> {
    if (this.runningCount === 0 && this.buffer.length === 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = safeTimeout(resolve, timeoutMs);
      this.idleWaiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /**
   * close() timed out: each attempt still running ends now, failed with ClosedError (recorded, and
   * retried like any failure), instead of holding its job until the lease expires. Its signal aborts;
   * whatever the processor does later is ignored, like a late result after a timeout.
   */
  failStillRunning(): void {
    for (const runs of this.running.values()) {
      for (const job of runs.jobs()) {
        const err = new ClosedError(`Worker ${this.deps.name} (close timeout)`);
        abortAttempt(job, err);
        this.settle(job as Job<Data>, undefined, normaliseThrown(err));
      }
    }
  }
}
