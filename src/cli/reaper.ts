/**
 * Reaper: a Worker-like loop that only recovers expired leases (jobs of crashed or stalled workers go
 * back to waiting, or to dead when their attempts are spent). Every Worker already does this; the
 * reaper covers queues whose workers are all gone. Each pass calls the Queue admin API
 * (`queue.recoverExpired()`, the same recovery pass every Worker runs, over every partition of the
 * queue), so it builds no key of its own and needs no locking: the scripts are atomic.
 */
import { EventEmitter } from 'node:events';
import { SCRIPT_BATCH_LIMIT } from '../defaults.js';
import { ConnectionError, SuretyError } from '../errors.js';
import { Queue } from '../queue/queue.js';
import type { RedisClient } from '../scripts/specs.js';
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

  /**
   * One recovery pass over every partition of `name`. A Queue per pass (no Redis connection of its
   * own: it shares the reaper's client) reads the partition count afresh, so a queue partitioned or
   * repartitioned while the reaper runs is covered from its next pass.
   */
  private async recover(name: string): Promise<RecoveredJobs> {
    const queue = new Queue(name, {
      connection: this.client,
      partitions: 'auto',
      ...(this.opts.prefix === undefined ? {} : { prefix: this.opts.prefix }),
    });
    try {
      const r = await queue.recoverExpired(
        this.opts.deadRetention === undefined ? {} : { deadRetention: this.opts.deadRetention },
      );
      return { queue: name, requeued: r.requeued, dead: r.dead };
    } finally {
      await queue.close();
    }
  }

  private report(err: unknown): void {
    const error =
      err instanceof SuretyError
        ? err
        : new ConnectionError(`reaper: ${err instanceof Error ? err.message : String(err)}`, err);
    if (!this.stopped && this.listenerCount('error') > 0) this.emit('error', error);
  }
}
