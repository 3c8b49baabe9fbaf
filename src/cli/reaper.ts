/**
 * Reaper: a Worker-like loop that only recovers expired leases (jobs of crashed or stalled workers go
 * back to waiting, or to dead when their attempts are spent). Every Worker already does this; the
 * reaper covers queues whose workers are all gone. It runs the same recovery pass (src/recovery.ts) as
 * every Worker, so it needs no locking: the scripts are atomic.
 */
import { EventEmitter } from 'node:events';
import { DEFAULT_PREFIX, DEFAULT_RETENTION, SCRIPT_BATCH_LIMIT } from '../defaults.js';
import { ConnectionError, SuretyError } from '../errors.js';
import { queueKeys } from '../keys.js';
import { recoverExpired } from '../recovery.js';
import type { RedisClient } from '../scripts.js';
import { Interval, jittered } from '../worker/interval.js';

export interface RecoveredJobs {
  queue: string;
  requeued: string[];
  dead: string[];
}

export interface ReaperOptions {
  /** The queues to watch, asked again before every pass (so newly discovered queues are picked up). */
  queues: () => Promise<string[]> | string[];
  /** Key prefix. Default 'surety'. */
  prefix?: string;
  /** Time between passes. Default 5 000 ms. */
  intervalMs?: number;
  /** Dead jobs kept (retention applied as jobs die). Default: the library's dead retention. */
  deadRetention?: { maxCount: number; maxAgeMs: number };
}

export interface ReaperEvents {
  recovered: [result: RecoveredJobs];
  error: [error: SuretyError];
}

export class Reaper extends EventEmitter<ReaperEvents> {
  private readonly interval: Interval;
  private readonly intervalMs: number;
  private backlog = false;
  private stopped = false;

  constructor(
    private readonly client: RedisClient,
    private readonly opts: ReaperOptions,
  ) {
    super();
    this.intervalMs = opts.intervalMs ?? 5_000;
    this.interval = new Interval(
      () => this.pass(),
      () => (this.backlog ? 0 : jittered(this.intervalMs)),
      (err) => this.report(err),
    );
  }

  start(): void {
    this.stopped = false;
    this.interval.start(0);
  }

  /** Stops the loop; a pass in progress finishes, and its errors are no longer reported. */
  stop(): void {
    this.stopped = true;
    this.interval.stop();
  }

  /** One pass over every queue; resolves with what was recovered. */
  async pass(): Promise<RecoveredJobs[]> {
    const found: RecoveredJobs[] = [];
    this.backlog = false;
    for (const queue of await this.opts.queues()) {
      try {
        const r = await this.recover(queue);
        if (r.requeued.length + r.dead.length >= SCRIPT_BATCH_LIMIT) this.backlog = true;
        if (r.requeued.length + r.dead.length > 0) {
          found.push(r);
          this.emit('recovered', r);
        }
      } catch (err) {
        this.report(err);
      }
    }
    return found;
  }

  private async recover(queue: string): Promise<RecoveredJobs> {
    const keys = queueKeys(this.opts.prefix ?? DEFAULT_PREFIX, queue);
    const r = await recoverExpired(this.client, keys, this.opts.deadRetention ?? DEFAULT_RETENTION.dead);
    return { queue, requeued: r.requeued, dead: r.dead };
  }

  private report(err: unknown): void {
    const error =
      err instanceof SuretyError
        ? err
        : new ConnectionError(`reaper: ${err instanceof Error ? err.message : String(err)}`, err);
    if (!this.stopped && this.listenerCount('error') > 0) this.emit('error', error);
  }
}
