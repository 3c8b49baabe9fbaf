/** The job as a processor sees it. */
import { FREE_RETURNS } from '../defaults.js';
import { LeaseExpiredError, PayloadTooLargeError, ValidationError } from '../errors.js';
import type { WaitChildrenAnswer, WaitSignalAnswer } from '../scripts/replies.js';
import { type ClaimedRecord, decodeSteps } from '../store/job-record.js';
import type { ChildJob, ChildRef } from '../types.js';
import { toJson } from '../validate.js';
import { addChildren, type ChildQueues, type ChildrenParent, waitForChildren } from './children.js';
import { checkStepName, runStep, sleepStep } from './durable-steps.js';
import { waitForSignal } from './signal-wait.js';

/** Writes progress and log lines of a running attempt (fenced by its token); false if the lease is lost. */
export type AnnexWriter = (job: Job<unknown>, progress: unknown, lines: string[]) => Promise<boolean>;

/** Durable state of a running attempt, in Redis (the worker's script calls; writes fenced by the token). */
export interface JobStore {
  readSteps(job: Job<unknown>): Promise<string | null>;
  /** 1 stored, 0 the lease is lost, -1 over MAX_STEPS_BYTES. */
  writeStep(job: Job<unknown>, name: string, valueJson: string): Promise<number>;
  setData(job: Job<unknown>, dataJson: string): Promise<boolean>;
  /** Takes a pending signal, times the wait out, or parks the job (wait-signal.lua). */
  waitSignal(job: Job<unknown>, name: string, n: number, timeoutMs: number): Promise<WaitSignalAnswer>;
  /** The hash tag of the job's partition. */
  readonly tag: string;
  /** Plans children (add-children.lua): 1, or 0 lease lost, -1 steps too large, -2 too many. */
  planChildren(job: Job<unknown>, step: string, valueJson: string, children: string): Promise<number>;
  /** Answers the children's ends, or parks the job until they come (wait-children.lua). */
  waitChildren(job: Job<unknown>): Promise<WaitChildrenAnswer>;
  /** The children's ends the job recorded (annex `\x01k`, '' when none), for a replayed addChildren. */
  childEnds(job: Job<unknown>): Promise<string>;
}

/**
 * Most steps one job stores. Each write rewrites the job's steps field in Redis (at most 1 MiB), so
 * the count bounds the work a job's steps can cost Redis, not only their size.
 */
const MAX_STEPS = 1_000;
/** Largest data job.updateData stores (as for add: the queue's maxPayloadBytes default). */
const MAX_DATA_BYTES = 512 * 1024;

/**
 * What the worker keeps with a Job for its attempt, out of the public class: how the attempt reaches
 * Redis, whether its outcome is decided, its abort state. Set by the lane and the runner
 * (attemptOf); a job built by hand has an empty one.
 */
export interface Attempt {
  /** The producer's trace context, as stored ('' = none): src/telemetry/trace-field.ts. */
  readonly trace: string;
  /** The outcome is decided (settled, timed out, cancelled or lost): later ones are ignored. */
  decided: boolean;
  /** Writes progress and log lines (fenced). */
  writer: AnnexWriter | undefined;
  /** Steps and data in Redis (fenced). */
  store: JobStore | undefined;
  /** Reads the parents' results. */
  parentReader: ((job: Job<unknown>) => Promise<Record<string, unknown>>) | undefined;
  /** A test clock's now, when the worker runs on one (clock.ts). */
  clockNow: (() => number) | undefined;
  /**
   * Marks the attempt's start (counts it in Redis). Called when the processor starts: at once for a
   * function, when its sandbox acknowledges the job for a module (a job given to a sandbox that dies
   * first did not start).
   */
  onStart: (() => void) | undefined;
  /**
   * The job came back unmarked FREE_RETURNS times or more (recover.lua): its start is marked, and
   * Redis's answer awaited, before its processor is called (Runner), so a processor that kills its
   * worker at once is charged for it, and recovery never has to charge a start it did not see.
   */
  readonly confirmStart: boolean;
  /** That start mark was answered: the attempt is counted, so no other mark is sent for it. */
  startMarked: boolean;
  /** The job was parked (job.waitForSignal): it no longer runs here; `err` is what the wait throws. */
  onParked: ((err: Error) => void) | undefined;
  /** The worker's Queues for job.addChildren. */
  childQueues: ChildQueues | undefined;
  controller: AbortController | undefined;
  abortReason: Error | undefined;
}

const attempts = new WeakMap<Job<unknown>, Attempt>();

/** The worker's side of a job's attempt. */
export function attemptOf(job: Job<unknown>): Attempt {
  return attempts.get(job)!;
}

/** Stops the attempt: its `job.signal` aborts with `reason` (the first reason stands). */
export function abortAttempt(job: Job<unknown>, reason: Error): void {
  const a = attemptOf(job);
  if (a.abortReason) return;
  a.abortReason = reason;
  a.controller?.abort(reason);
}

export class Job<Data = unknown> {
  /** Attempt number (the job's starts, this one included), from 1. Keeps counting after a snooze or a manual retry. */
  readonly attempt: number;
  /** Fencing token of this attempt's lease (unique in the queue's history). */
  readonly token: string;
  /**
   * Starts not charged to the budget: those before the last manual retry, and those that snoozed, slept
   * or hit a rate limit (their budget was given back); `attempt - base` is this budget's count.
   */
  readonly base: number;
  readonly maxAttempts: number;
  readonly priority: number;
  readonly leaseMs: number;
  readonly createdAt: number;
  readonly runAt: number;
  /** Raw backoff field of the record (decoded only when the attempt fails). */
  readonly backoff: string;
  readonly timeoutMs: number;
  /** The job's name ('' when it has none). */
  readonly name: string;
  /** The job's batch id ('' when it is not in a batch). */
  readonly batch: string;
  /** Times the job was snoozed so far. */
  readonly snoozes: number;
  /** Epoch ms after which the job must not start (its expireAt or ttlMs); 0 = never. */
  readonly expireAt: number;
  /** When the processor was called for this attempt (epoch ms, this worker's clock). */
  startedAt = 0;
  /** Steps stored by earlier attempts (and this one), read once per attempt on first use. */
  private steps: Promise<Map<string, unknown>> | undefined;
  /** job.sleep calls made so far in this attempt: the n-th call is step `~sleep:n`. */
  private sleeps = 0;
  /** job.waitForSignal calls made so far in this attempt: the n-th is steps `~wait:n`, `~signal:n`. */
  private signalWaits = 0;
  /** job.addChildren calls made so far in this attempt: the n-th is step `~children:n`. */
  private childCalls = 0;

  constructor(
    readonly queueName: string,
    readonly id: string,
    record: ClaimedRecord,
    readonly data: Data,
    /** The partition the job lives in (0 in a queue that is not partitioned). */
    readonly partition = 0,
  ) {
    // A claimed job has not started: its start mark counts this attempt when the processor runs.
    this.attempt = record.attempts + 1;
    this.expireAt = record.expireAt;
    this.token = record.token;
    this.base = record.base;
    this.maxAttempts = record.maxAttempts;
    this.priority = record.priority;
    this.leaseMs = record.leaseMs;
    this.createdAt = record.createdAt;
    this.runAt = record.runAt;
    this.backoff = record.backoff;
    this.timeoutMs = record.timeoutMs;
    this.name = record.name;
    this.batch = record.batch;
    this.snoozes = record.snoozes;
    attempts.set(this as Job<unknown>, {
      trace: record.trace,
      decided: false,
      writer: undefined,
      store: undefined,
      parentReader: undefined,
      clockNow: undefined,
      onStart: undefined,
      confirmStart: record.refunds >= FREE_RETURNS,
      startMarked: false,
      onParked: undefined,
      childQueues: undefined,
      controller: undefined,
      abortReason: undefined,
    });
  }

  /** True when this is the last attempt of the current budget. */
  get isLastAttempt(): boolean {
    return this.attempt - this.base >= this.maxAttempts;
  }

  /**
   * Fires when this attempt should stop: its lease was lost (the job may already run elsewhere) or the
   * worker is closing past its grace period, the attempt timed out (timeoutMs), or the job was cancelled. Created on first use, so unused signals cost nothing.
   */
  get signal(): AbortSignal {
    const a = attemptOf(this as Job<unknown>);
    if (!a.controller) {
      a.controller = new AbortController();
      if (a.abortReason) a.controller.abort(a.abortReason);
    }
    return a.controller.signal;
  }

  /**
   * Stores a progress value (any JSON, e.g. a percentage or { done, total }) on the job, readable with
   * queue.getJob(id).progress. Resolves false if this attempt no longer holds the job.
   */
  progress(value: unknown): Promise<boolean> {
    const { writer } = attemptOf(this as Job<unknown>);
    return writer ? writer(this as Job<unknown>, value, []) : Promise.resolve(false);
  }

  /** Appends a line to the job's log (the last 100 lines are kept; each is cut at 2 000 characters). */
  log(line: string): Promise<boolean> {
    const { writer } = attemptOf(this as Job<unknown>);
    return writer ? writer(this as Job<unknown>, undefined, [String(line)]) : Promise.resolve(false);
  }

  /**
   * Results of the jobs this one depends on (dependsOn), by parent id. A parent trimmed by retention
   * before this job ran, or one that ended dead (with ignoreDependencyFailure), maps to undefined.
   */
  parentResults<R = unknown>(): Promise<Record<string, R | undefined>> {
    const { parentReader } = attemptOf(this as Job<unknown>);
    return parentReader
      ? (parentReader(this as Job<unknown>) as Promise<Record<string, R | undefined>>)
      : Promise.resolve({});
  }

  /**
   * A durable step: on the first attempt that reaches it, runs `fn` and stores its result with the job
   * (fenced: only while this attempt holds the job's lease); on a later attempt, returns the stored
   * result without running `fn` again. The result must be JSON-serialisable (undefined is kept as
   * undefined). A job's steps hold at most 1 MiB (MAX_STEPS_BYTES) in all. If the lease was lost, the
   * result is not stored and this throws LeaseExpiredError (the job may be running elsewhere).
   */
  step<T>(name: string, fn: () => Promise<T> | T): Promise<T> {
    return runStep(this, name, fn);
  }

  /**
   * The stored result of step `name`, if an attempt stored one. Fenced: an attempt whose lease is gone
   * gets LeaseExpiredError here, before a step body runs again (its job may have ended elsewhere).
   */
  async readStep(name: string): Promise<{ found: boolean; value?: unknown }> {
    const { store } = attemptOf(this as Job<unknown>);
    if (!store) return { found: false };
    this.steps ??= store.readSteps(this as Job<unknown>).then((field) => {
      if (field === null)
        throw new LeaseExpiredError(
          `job ${this.id}: the lease of attempt ${this.attempt} was lost before its steps were read`,
        );
      return field ? decodeSteps(field) : new Map();
    });
    const steps = await this.steps;
    return steps.has(name) ? { found: true, value: steps.get(name) } : { found: false };
  }

  /**
   * Resolves while this attempt holds its job's lease; throws LeaseExpiredError once it does not (the
   * lease expired and the job was recovered, or it was cancelled, removed or completed elsewhere). A
   * fresh fenced read of Redis on each call (the read job.step makes first), for work outside Redis
   * that must not start without the lease, such as pgStep's transaction (surety/postgres). A job
   * built by hand, with no worker behind it, has no lease to lose: this resolves.
   */
  async checkLease(): Promise<void> {
    const { store } = attemptOf(this as Job<unknown>);
    if (store && (await store.readSteps(this as Job<unknown>)) === null)
      throw new LeaseExpiredError(`job ${this.id}: the lease of attempt ${this.attempt} was lost`);
  }

  /**
   * Stores the result of step `name` (fenced); false when there is no store (a job built by hand). The
   * name is checked here too: a sandbox's job.step reaches this over its channel.
   */
  async writeStep(name: string, value: unknown): Promise<boolean> {
    checkStepName(name, true);
    const { store } = attemptOf(this as Job<unknown>);
    if (!store) return false;
    const stored = await this.steps;
    if (stored && !stored.has(name) && stored.size >= MAX_STEPS)
      throw new ValidationError(
        `job ${this.id}: at most ${MAX_STEPS} steps per job; step ${name} not stored`,
      );
    const json =
      value === undefined ? '' : toJson(`result of step ${name} of job ${this.id}`, value, MAX_DATA_BYTES);
    const r = await store.writeStep(this as Job<unknown>, name, json);
    if (r === 0)
      throw new LeaseExpiredError(
        `job ${this.id}: the lease of attempt ${this.attempt} was lost; step ${name} not stored`,
      );
    if (r < 0) throw new PayloadTooLargeError(`job ${this.id}: step ${name} would take its steps past 1 MiB`);
    (await this.steps)?.set(name, value);
    return true;
  }

  /**
   * A durable sleep: the job goes back to delayed for `ms` without spending an attempt (it is a snooze),
   * and its next attempt passes this call at once, after re-running (or replaying, with job.step) what
   * came before it. Call it as `await job.sleep(ms)` and let what it throws propagate (a SnoozeError).
   */
  sleep(ms: number): Promise<void> {
    return sleepStep(this, this.sleeps++, ms, attemptOf(this as Job<unknown>).clockNow);
  }

  /**
   * Waits for signal `name` (queue.signal, `surety signal`, the HTTP API) and resolves with its payload.
   * A signal sent before the wait is kept and taken at once. Otherwise the job is parked: it leaves the
   * worker (no slot, no lease, no attempt spent) and this throws ParkedError, which the processor lets
   * propagate; when the signal comes the job runs again from the top, its steps replay, and this call
   * resolves with the payload. With `timeoutMs`, the wait throws SignalTimeoutError once that long has
   * passed since it was first reached. Each signal is consumed once; the n-th wait of a run replays
   * what it took before. Fenced: an attempt that lost its lease takes nothing (LeaseExpiredError).
   */
  waitForSignal<T = unknown>(name: string, opts?: { timeoutMs?: number }): Promise<T> {
    const attempt = attemptOf(this as Job<unknown>);
    const { store } = attempt;
    const waiter = {
      id: this.id,
      attempt: this.attempt,
      readStep: (step: string) => this.readStep(step),
      takeSignal:
        store && ((s: string, n: number, t: number) => store.waitSignal(this as Job<unknown>, s, n, t)),
      parked: (err: Error) => attempt.onParked?.(err),
    };
    return waitForSignal(waiter, this.signalWaits++, name, opts) as Promise<T>;
  }

  /**
   * Adds jobs (of this queue, or of `queue`) as children of this running job, and resolves with their
   * `{ queue, id }`. Idempotent across runs: the n-th call of a run adds the children the n-th call of
   * the first run planned (same ids), once; keep the calls the same from run to run. A child's end
   * reaches this job (job.waitForChildren), whatever the queue or server slot. Fenced: a run that lost
   * its lease adds nothing (LeaseExpiredError). At most 1 000 children per job.
   */
  addChildren<D = unknown>(children: ChildJob<D>[]): Promise<ChildRef[]> {
    return addChildren(this.childrenParent(), this.childCalls++, children);
  }

  /**
   * Waits for every child this job added (job.addChildren) to end, and resolves with their results by
   * id (`queue:id` for a child of another queue). While some are open the job is parked: it leaves the
   * worker (no slot, no lease, no attempt spent) and this throws ParkedError, which the processor lets
   * propagate; when the last child ends the job runs again from the top (steps replay, addChildren adds
   * nothing twice) and this resolves. A dead child throws DependencyFailedError (which ends this job
   * dead if it propagates), unless it was added with `ignoreDependencyFailure` (its result: undefined).
   */
  waitForChildren<R = unknown>(): Promise<Record<string, R>> {
    return waitForChildren(this.childrenParent()) as Promise<Record<string, R>>;
  }

  private childrenParent(): ChildrenParent {
    const attempt = attemptOf(this as Job<unknown>);
    const { store, childQueues } = attempt;
    const job = this as Job<unknown>;
    return {
      id: this.id,
      queueName: this.queueName,
      createdAt: this.createdAt,
      readStep: (name) => this.readStep(name),
      writeStep: (name, value) => this.writeStep(name, value),
      children:
        store && childQueues
          ? {
              tag: store.tag,
              queues: childQueues,
              plan: (step, value, lines) => store.planChildren(job, step, value, lines),
              wait: () => store.waitChildren(job),
              ends: () => store.childEnds(job),
            }
          : undefined,
      parked: (err) => attempt.onParked?.(err),
    };
  }

  /**
   * Replaces the job's data in Redis (the next attempt sees it) and in this object. Fenced: refused
   * with LeaseExpiredError when this attempt no longer holds the job.
   */
  async updateData(data: Data): Promise<void> {
    const json = toJson(`data of job ${this.id}`, data, MAX_DATA_BYTES);
    const { store } = attemptOf(this as Job<unknown>);
    if (store && !(await store.setData(this as Job<unknown>, json)))
      throw new LeaseExpiredError(
        `job ${this.id}: the lease of attempt ${this.attempt} was lost; data not updated`,
      );
    (this as { data: Data }).data = data;
  }
}
