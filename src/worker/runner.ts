/**
 * The runner: runs the processor for the jobs the lanes claim, `concurrency` at a time over all lanes.
 *
 * It owns the slots (how many jobs run, in batches of batch.size with the `batch` option), the buffer
 * of jobs claimed but not started, the automatic prefetch estimate, the timeouts, and settling:
 * whatever the processor returns or throws becomes one outcome row (outcome-rows.ts) for the job's
 * lane to write. Cancels and lost leases abort attempts; at close, buffered jobs are handed back and
 * attempts still running past the timeout are failed.
 *
 * It knows no lane: jobs come in (accept), and what it decides goes out as values through its deps, which
 * the worker routes to the job's lane: a start to mark, an outcome row to write, jobs to hand back, a
 * freed slot. It reads one thing of the lanes, how long a job's lease surely stands. A job's processor
 * runs as soon as it has a slot: its start is marked with the lane's next call (starter.ts), never awaited,
 * except for a job that came back unmarked FREE_RETURNS times (attempt.confirmStart): its mark is sent
 * alone and answered before its processor is called (confirm below).
 */

import { type Clock, REAL_TIMERS } from '../clock.js';
import { type AttemptError, normaliseThrown } from '../error-normaliser.js';
import { BatchResultError, CancelledError, ClosedError, LeaseExpiredError, TimeoutError } from '../errors.js';
import { safeTimeout } from '../timers.js';
import type { CompleteRow, FailRow } from './acker.js';
import { abortAttempt, attemptOf, type Job } from './job.js';
import type { ResolvedWorkerOptions } from './options.js';
import { outcomeRow, readBatchOutcomes } from './outcome-rows.js';
import { RunningJobs, type RunningView } from './running-jobs.js';
import type { SlotCounters } from './slot-share.js';
import { expiredUnstarted, isUnstarted } from './unstarted.js';

/** See WorkerOptions.prefetch: a prefetched job waits locally for about this long at most. */
const PREFETCH_HORIZON_MS = 20;

/** The job's start must be marked, and answered, before its processor runs (Runner.confirm). */
function mustConfirm(job: Job<unknown>): boolean {
  const a = attemptOf(job);
  return a.confirmStart && !a.startMarked;
}

/** The most jobs `prefetch: 'auto'` claims beyond the free slots (very short jobs reach it). */
export function autoPrefetchCap(concurrency: number): number {
  return Math.max(concurrency, 100);
}

export type Processor<Data, Result> = (job: Job<Data>) => Promise<Result> | Result;

/**
 * A batch worker's processor (Worker option `batch`): one outcome per job, in the order given (a
 * result, or an Error for a job that failed), or nothing (every job completes with no result); a
 * throw fails every job of the batch with that error.
 */
export type BatchProcessor<Data, Result> = (
  jobs: Job<Data>[],
  // biome-ignore lint/suspicious/noConfusingVoidType: an async processor that returns nothing is Promise<void>
) => Promise<readonly (Result | Error)[] | undefined | void> | readonly (Result | Error)[] | undefined | void;

/** A batch running: its slot is free once the processor returned or every job of it stopped running. */
interface RunningBatch {
  open: number;
  released: boolean;
}

export interface RunnerDeps<Data, Result> {
  /** The queue's name, for the ClosedError of attempts failed at close. */
  name: string;
  options: ResolvedWorkerOptions;
  processor: Processor<Data, Result>;
  /** With the `batch` option: the processor, called with up to batch.size jobs (`processor` unused). */
  batchProcessor?: BatchProcessor<Data, Result>;
  /** Opens the attempt's `process` span (tracing.ts) for a job run in a batch. */
  traceBatchJob?(job: Job<Data>): void;
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
  /** Marks a start before its processor runs (confirm): true once counted, false if the lease is gone. */
  confirmStart(job: Job<unknown>): Promise<boolean>;
  /** An attempt settled: its lane writes this completion (and holds the lease until it is written). */
  completed(row: CompleteRow): void;
  /** An attempt settled: its lane writes this failure, snooze or rate limit (as `completed`). */
  failed(row: FailRow): void;
  /** The job parked itself (job.waitForSignal): its lane forgets the lease. */
  parked(job: Job<unknown>): void;
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
  /** Jobs whose start mark is out, awaited before their processor runs (confirm): each holds a slot. */
  private readonly confirming = new Set<Job<Data>>();

  /** Slots: the concurrency option, changed at run time by worker.concurrency = n. */
  private concurrencyNow: number;
  /** worker.pause(): no claims and no starts until resume(); claimed jobs are handed back. */
  private paused = false;
  /** Batches whose processor runs (`batch` option): at most `concurrency` of them. */
  private batchesRunning = 0;
  /** The running batch of each job run in one. */
  private readonly batchOf = new WeakMap<Job<unknown>, RunningBatch>();
  /** A batch short of batch.minSize waits for more jobs until this timer fires. */
  private batchWait: unknown;
  private batchWaitOver = false;

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

  /** Jobs claimed and not started yet. */
  get bufferedCount(): number {
    return this.buffer.length;
  }

  /** Batches whose processor runs now (the `batch` option). */
  get batchCount(): number {
    return this.batchesRunning;
  }

  /** Number of jobs whose processor is running now. */
  get activeCount(): number {
    return this.runningCount;
  }

  /** Jobs whose start is being confirmed: they run once Redis answers (close waits for them too). */
  get confirmingCount(): number {
    return this.confirming.size;
  }

  // ---- slots (read by the lanes' sharing: slot-share.ts) ---------------------------------

  /** Jobs run at once: concurrency, or with the `batch` option concurrency x batch.size. */
  private get jobSlots(): number {
    return this.concurrencyNow * (this.deps.options.batch?.size ?? 1);
  }

  /** Slots plus the prefetch limit: how many jobs may be held (running or buffered). */
  get capacity(): number {
    return this.jobSlots + this.prefetchLimit();
  }

  /**
   * Job slots taken: jobs running or buffered (claimed, not started). A running batch takes its whole
   * batch.size until its processor returns, however few jobs it carries or still runs: a worker claims
   * for free batch slots, never for jobs that would wait in the buffer behind a running batch.
   */
  get held(): number {
    const batch = this.deps.options.batch;
    const running = batch ? this.batchesRunning * batch.size : this.runningCount;
    return running + this.confirming.size + this.buffer.length;
  }

  /** Job slots neither running nor holding a buffered job. */
  get free(): number {
    return this.jobSlots - this.held;
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
    const c = this.jobSlots;
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
    if (this.deps.options.batch) {
      this.runBatches(this.deps.options.batch);
      return;
    }
    // A closing worker starts nothing: close() hands its buffered jobs back instead.
    while (this.mayStart() && this.runningCount + this.confirming.size < this.concurrencyNow) {
      const job = this.takeStartable();
      if (job === undefined) return;
      if (mustConfirm(job)) this.confirm(job);
      else {
        this.runningCount++;
        this.run(job);
      }
    }
  }

  private mayStart(): boolean {
    return this.deps.isRunning() && !this.paused && this.buffer.length > 0;
  }

  /**
   * The next buffered job that may start, or undefined. A job whose lease this worker no longer holds
   * is dropped. Never started, and past its expiry before a slot freed, a job must not start: handed
   * back, the next claim (or the expiry sweep) ends it dead with its ExpiredError on Redis's clock.
   * Nor may a job whose lease may run out before its start mark lands: renewals failed for two thirds
   * of it, so it may already be back in line, or done, elsewhere. Handed back (forgotten if its lease
   * is gone), it runs where a lease stands.
   */
  private takeStartable(): Job<Data> | undefined {
    while (this.buffer.length > 0) {
      const job = this.buffer.shift()!;
      const leaseLeft = this.deps.leaseLeft(job as Job<unknown>);
      if (leaseLeft === Number.NEGATIVE_INFINITY) continue;
      if (expiredUnstarted(job) || leaseLeft < job.leaseMs / 3) {
        this.handBack([job]);
        continue;
      }
      return job;
    }
    return undefined;
  }

  /**
   * Batch mode: starts batches of up to batch.size buffered jobs while fewer than `concurrency` run.
   * A batch short of batch.minSize waits (for claims and handoffs to bring more) until batch.waitMs
   * after it first came up short, then starts with what it has.
   */
  private runBatches(batch: { size: number; minSize: number; waitMs: number }): void {
    while (this.mayStart() && this.batchesRunning < this.concurrencyNow) {
      const jobs: Job<Data>[] = [];
      while (jobs.length < batch.size) {
        const job = this.takeStartable();
        if (job === undefined) break;
        if (mustConfirm(job)) this.confirm(job);
        else jobs.push(job);
      }
      if (jobs.length === 0) return;
      if (jobs.length < batch.minSize && !this.batchWaitOver && batch.waitMs > 0) {
        this.buffer.unshift(...jobs);
        this.batchWait ??= this.timers.setTimeout(() => {
          this.batchWait = undefined;
          this.batchWaitOver = true;
          this.runBuffered();
        }, batch.waitMs);
        return;
      }
      this.endBatchWait();
      this.runBatch(jobs);
    }
  }

  private endBatchWait(): void {
    if (this.batchWait !== undefined) this.timers.clearTimeout(this.batchWait);
    this.batchWait = undefined;
    this.batchWaitOver = false;
  }

  /**
   * A job that came back unmarked FREE_RETURNS times (recovery returns every unmarked loss free) may be
   * a processor that kills its worker before its mark leaves: its start is marked first, and its
   * processor called in the turn Redis's answer arrives, so such a death is charged. Its slot stays
   * taken meanwhile. Confirmed, it runs at once, even if the worker began pausing or closing (its
   * attempt is counted: it must not go back unrun), alone in batch mode; lost, it is dropped.
   */
  private confirm(job: Job<Data>): void {
    this.confirming.add(job);
    const attempt = attemptOf(job as Job<unknown>);
    const answered = (held: boolean) => {
      if (!this.confirming.delete(job)) return; // given up at close (failStillRunning)
      if (held && !attempt.decided) {
        attempt.startMarked = true;
        if (this.deps.options.batch) this.runBatch([job]);
        else {
          this.runningCount++;
          this.run(job);
        }
      } else this.afterSlotFreed();
    };
    this.deps.confirmStart(job as Job<unknown>).then(answered, (err: unknown) => {
      this.deps.onError(err);
      answered(false);
    });
  }

  // ---- running -------------------------------------------------------------------------------

  private run(job: Job<Data>): void {
    this.begin(job, !this.deps.processorMarksStart);
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

  /**
   * Batch mode: one call of the processor for `jobs`, each job started, timed out, settled and fenced
   * on its own. Its outcomes are read once, defensively: one per job in order (an Error fails that
   * job), or nothing; anything else fails every job with BatchResultError, as a throw fails them all.
   */
  private runBatch(jobs: Job<Data>[]): void {
    const batch: RunningBatch = { open: jobs.length, released: false };
    this.batchesRunning++;
    this.runningCount += jobs.length;
    for (const job of jobs) {
      this.batchOf.set(job as Job<unknown>, batch);
      this.deps.traceBatchJob?.(job);
      this.begin(job, true);
    }
    let promise: Promise<unknown>;
    try {
      promise = Promise.resolve(this.deps.batchProcessor!(jobs));
    } catch (err) {
      promise = Promise.reject(err);
    }
    promise.then(
      (outcomes) => {
        this.releaseBatch(batch);
        const list = readBatchOutcomes(outcomes, jobs.length);
        if (typeof list === 'string') {
          const f = normaliseThrown(new BatchResultError(list));
          for (const job of jobs) this.settle(job, undefined, f);
          return;
        }
        jobs.forEach((job, i) => {
          const o = list[i];
          if (o instanceof Error) this.settle(job, undefined, normaliseThrown(o));
          else this.settle(job, o as Result, undefined);
        });
      },
      (err: unknown) => {
        this.releaseBatch(batch);
        const f = normaliseThrown(err);
        for (const job of jobs) this.settle(job, undefined, f);
      },
    );
  }

  /** A batch's slot is free: its processor returned, or every job of it stopped running (timed out, cancelled). */
  private releaseBatch(batch: RunningBatch): void {
    if (batch.released) return;
    batch.released = true;
    this.batchesRunning--;
  }

  /** The job's processor is about to be called: it runs, and starts (now, or when its sandbox takes it). */
  private begin(job: Job<Data>, startNow: boolean): void {
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
    attempt.onParked = (err) => this.parked(job, err);
    if (startNow) attempt.onStart();
    job.startedAt = Date.now();
    this.deps.onStart(job);
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
    const runs = this.runsOf(partition);
    const job = runs.get(id);
    const ranMs = runs.stop(id);
    if (ranMs === undefined) return undefined;
    this.runningCount--;
    const batch = job && this.batchOf.get(job);
    if (batch && --batch.open === 0) this.releaseBatch(batch);
    return ranMs;
  }

  /** The attempt ended: its outcome row goes to its lane's acker, and its slot is freed. */
  private settle(job: Job<Data>, result: Result | undefined, failure: AttemptError | undefined): void {
    const attempt = attemptOf(job as Job<unknown>);
    if (attempt.decided) return; // timed out or cancelled earlier: this late outcome is not the attempt's
    attempt.decided = true;
    const ranMs = this.stopRunning(job.partition, job.id);
    if (ranMs !== undefined) this.avgDurationMs = this.avgDurationMs * 0.8 + ranMs * 0.2;
    const row = outcomeRow(job as Job<unknown>, result, failure, this.deps.options, this.deps.onError);
    if (row.kind === 'complete') this.deps.completed(row.row);
    else this.deps.failed(row.row);
    this.afterSlotFreed();
  }

  private afterSlotFreed(): void {
    this.runBuffered();
    this.deps.slotFreed();
    if (this.idle) for (const w of this.idleWaiters.splice(0)) w();
  }

  /** Nothing runs, nothing is buffered, no start is being confirmed. */
  private get idle(): boolean {
    return this.runningCount === 0 && this.confirming.size === 0 && this.buffer.length === 0;
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

  /**
   * The job parked itself (job.waitForSignal moved it out of active): it no longer runs here. Its slot
   * is freed and its lease forgotten, with no outcome; its signal aborts with the wait's ParkedError.
   */
  private parked(job: Job<Data>, err: Error): void {
    const attempt = attemptOf(job as Job<unknown>);
    if (attempt.decided) return;
    attempt.decided = true;
    this.deps.options.tracing.ended(job as Job<unknown>, 'parked');
    abortAttempt(job as Job<unknown>, err);
    this.stopRunning(job.partition, job.id);
    this.deps.parked(job as Job<unknown>);
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

  /** Resolves when nothing runs, nothing is buffered and no start is being confirmed, or after `timeoutMs`. */
  whenIdle(timeoutMs: number): Promise<void> {
    if (this.idle) return Promise.resolve();
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
    // Not started yet: handed back (release.lua takes them back free if their mark never landed).
    const unconfirmed = [...this.confirming];
    this.confirming.clear();
    for (const job of unconfirmed) attemptOf(job as Job<unknown>).decided = true;
    this.handBack(unconfirmed);
    for (const runs of this.running.values()) {
      for (const job of runs.jobs()) {
        const err = new ClosedError(`Worker ${this.deps.name} (close timeout)`);
        abortAttempt(job, err);
        this.settle(job as Job<Data>, undefined, normaliseThrown(err));
      }
    }
  }
}
