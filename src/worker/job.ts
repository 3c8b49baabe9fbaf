/** The job as a processor sees it. */
import type { ClaimedRecord } from '../job-record.js';

/** Writes progress and log lines of a running attempt (fenced by its token); false if the lease is lost. */
export type AnnexWriter = (job: Job<unknown>, progress: unknown, lines: string[]) => Promise<boolean>;

export class Job<Data = unknown> {
  /** Attempt number, from 1. Keeps counting after a manual retry. */
  readonly attempt: number;
  /** Fencing token of this attempt's lease (unique in the queue's history). */
  readonly token: string;
  /** Attempts made before the last manual retry (0 if never retried); `attempt - base` is this budget's count. */
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
  /** @internal Claimed as prefetch: begin.lua counts its attempt before the processor runs. */
  readonly reserved: boolean;
  /** When the processor was called for this attempt (epoch ms, this worker's clock). */
  startedAt = 0;
  /** @internal The attempt's outcome is decided (settled, timed out, cancelled or lost): ignore later ones. */
  decided = false;
  private controller: AbortController | undefined;
  /** @internal Set by the worker. */
  writer: AnnexWriter | undefined;
  /** @internal Set by the worker. */
  parentReader: ((job: Job<unknown>) => Promise<Record<string, unknown>>) | undefined;
  private abortReason: Error | undefined;

  constructor(
    readonly queueName: string,
    readonly id: string,
    record: ClaimedRecord,
    readonly data: Data,
    /** The partition the job lives in (0 in a queue that is not partitioned). */
    readonly partition = 0,
  ) {
    // A reserved job's attempt is counted when it begins: the processor sees the number it runs as.
    this.reserved = record.reserved;
    this.attempt = record.reserved ? record.attempts + 1 : record.attempts;
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
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortReason) this.controller.abort(this.abortReason);
    }
    return this.controller.signal;
  }

  /**
   * Stores a progress value (any JSON, e.g. a percentage or { done, total }) on the job, readable with
   * queue.getJob(id).progress. Resolves false if this attempt no longer holds the job.
   */
  progress(value: unknown): Promise<boolean> {
    return this.writer ? this.writer(this as Job<unknown>, value, []) : Promise.resolve(false);
  }

  /** Appends a line to the job's log (the last 100 lines are kept; each is cut at 2 000 characters). */
  log(line: string): Promise<boolean> {
    return this.writer
      ? this.writer(this as Job<unknown>, undefined, [String(line)])
      : Promise.resolve(false);
  }

  /**
   * Results of the jobs this one depends on (dependsOn), by parent id. A parent trimmed by retention
   * before this job ran, or one that ended dead (with ignoreDependencyFailure), maps to undefined.
   */
  parentResults<R = unknown>(): Promise<Record<string, R | undefined>> {
    return this.parentReader
      ? (this.parentReader(this as Job<unknown>) as Promise<Record<string, R | undefined>>)
      : Promise.resolve({});
  }

  /** @internal */
  abort(reason: Error): void {
    if (this.abortReason) return;
    this.abortReason = reason;
    this.controller?.abort(reason);
  }
}
