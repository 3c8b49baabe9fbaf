/** The job as a processor sees it. */
import type { ClaimedRecord } from '../job-record.js';

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
  /** @internal The attempt's outcome is decided (settled, timed out, cancelled or lost): ignore later ones. */
  decided = false;
  private controller: AbortController | undefined;
  private abortReason: Error | undefined;

  constructor(
    readonly queueName: string,
    readonly id: string,
    record: ClaimedRecord,
    readonly data: Data,
  ) {
    this.attempt = record.attempts;
    this.token = record.token;
    this.base = record.base;
    this.maxAttempts = record.maxAttempts;
    this.priority = record.priority;
    this.leaseMs = record.leaseMs;
    this.createdAt = record.createdAt;
    this.runAt = record.runAt;
    this.backoff = record.backoff;
    this.timeoutMs = record.timeoutMs;
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

  /** @internal */
  abort(reason: Error): void {
    if (this.abortReason) return;
    this.abortReason = reason;
    this.controller?.abort(reason);
  }
}
