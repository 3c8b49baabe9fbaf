/**
 * Buffers attempt outcomes and writes them in batches: everything that finished during one turn of the
 * event loop goes out in one complete call and one fail call (sent together with the next claim, so a
 * busy worker spends one round trip per batch). A call that fails (connection lost) is re-sent later:
 * outcomes are fenced by token and idempotent, so a re-send can never apply twice.
 */
import { reconnectDelayMs, safeTimeout } from '../timers.js';
import type { Job } from './job.js';

/** `id`, `token`, `result` go to complete.lua; `job` and `value` are kept for the `completed` event. */
export interface CompleteRow {
  id: string;
  token: string;
  result: string;
  job: Job<unknown>;
  value: unknown;
}

/** `id`, `token`, `retryDelayMs`, `error` go to fail.lua; `job` and `cause` are kept for the `failed` event. */
export interface FailRow {
  id: string;
  token: string;
  retryDelayMs: number;
  error: string;
  job: Job<unknown>;
  cause: Error;
}

export interface AckerDeps {
  /** Writes a batch of completions (complete.lua) and reports each row's fate; rejects if the call failed. */
  writeCompletions(rows: CompleteRow[]): Promise<void>;
  /** Writes a batch of failures (fail.lua) and reports each row's fate; rejects if the call failed. */
  writeFailures(rows: FailRow[]): Promise<void>;
  onError(err: unknown): void;
}

const MAX_BATCH = 1_000;

export class Acker {
  private completes: CompleteRow[] = [];
  private fails: FailRow[] = [];
  private inFlight = 0;
  private failures = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly deps: AckerDeps) {}

  pushComplete(row: CompleteRow): void {
    this.completes.push(row);
  }

  pushFail(row: FailRow): void {
    this.fails.push(row);
  }

  get pending(): number {
    return this.completes.length + this.fails.length + this.inFlight;
  }

  /** Sends everything buffered (called once per event-loop turn, by the runner's tick through the lane). */
  flush(): void {
    if (this.retryTimer) return; // backing off after a failure: the retry timer flushes
    while (this.completes.length > 0) {
      const rows = this.completes.splice(0, MAX_BATCH);
      this.send(this.deps.writeCompletions(rows), () => this.completes.unshift(...rows));
    }
    while (this.fails.length > 0) {
      const rows = this.fails.splice(0, MAX_BATCH);
      this.send(this.deps.writeFailures(rows), () => this.fails.unshift(...rows));
    }
  }

  private send(call: Promise<void>, requeue: () => void): void {
    this.inFlight++;
    call.then(
      () => {
        this.inFlight--;
        this.failures = 0;
        this.notifyIdle();
      },
      (err) => {
        this.inFlight--;
        requeue();
        this.deps.onError(err);
        this.failures++;
        if (!this.retryTimer) {
          this.retryTimer = safeTimeout(() => {
            this.retryTimer = undefined;
            this.flush();
          }, reconnectDelayMs(this.failures));
        }
      },
    );
  }

  private notifyIdle(): void {
    if (this.pending > 0) return;
    for (const w of this.idleWaiters.splice(0)) w();
  }

  /** Resolves when every buffered outcome has been written (or `timeoutMs` passed). */
  drain(timeoutMs: number): Promise<boolean> {
    this.flush();
    if (this.pending === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = safeTimeout(() => resolve(false), timeoutMs);
      this.idleWaiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  stop(): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
  }
}
