/**
 * The dashboard's view of Redis: one shared connection, one Queue per name (created on first use),
 * and queue discovery. Everything goes through the Queue admin API; no Redis key is read here.
 */
import { discoverQueues } from '../admin/discover.js';
import { type Connection, closeConnection, connect } from '../connection.js';
import { SuretyError } from '../errors.js';
import type { ConnectionOption } from '../options.js';
import { Queue } from '../queue.js';
import type { JobCounts } from '../types.js';

export interface QueueOverview {
  name: string;
  counts: JobCounts;
  paused: boolean;
  workers: number;
}

/** Most jobs one clean call removes. */
export const CLEAN_MAX = 10_000;

export interface BulkOutcome {
  done: string[];
  failed: { id: string; code?: string; message: string }[];
}

export class QueueRegistry {
  private readonly conn: Connection;
  private readonly queues = new Map<string, Queue>();
  private discovered: { at: number; names: Promise<string[]> } | null = null;

  constructor(
    connection: ConnectionOption | undefined,
    readonly prefix: string | undefined,
    private readonly discoverTtlMs = 2_000,
  ) {
    this.conn = connect(connection, 'queue');
  }

  /** The Queue named `name` (validates the name: a bad one throws a ValidationError). */
  get(name: string): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, {
        connection: this.conn.client,
        // The dashboard shows queues as they are: with the partition count recorded in Redis.
        partitions: 'auto',
        ...(this.prefix === undefined ? {} : { prefix: this.prefix }),
      });
      this.queues.set(name, queue);
    }
    return queue;
  }

  /** Names of every queue under the prefix, rediscovered at most every `discoverTtlMs`. */
  names(): Promise<string[]> {
    const now = Date.now();
    if (!this.discovered || now - this.discovered.at > this.discoverTtlMs) {
      const names = discoverQueues(this.conn.client, this.prefix);
      names.catch(() => {
        this.discovered = null;
      });
      this.discovered = { at: now, names };
    }
    return this.discovered.names;
  }

  async overview(name: string): Promise<QueueOverview> {
    const queue = this.get(name);
    const [counts, paused, workers] = await Promise.all([queue.counts(), queue.isPaused(), queue.workers()]);
    return { name, counts, paused, workers: workers.length };
  }

  async overviews(): Promise<QueueOverview[]> {
    return Promise.all((await this.names()).map((n) => this.overview(n)));
  }

  private shared: { at: number; overviews: Promise<QueueOverview[]> } | null = null;

  /** overviews(), shared by every caller within `maxAgeMs` (all open event streams make one pass). */
  recentOverviews(maxAgeMs: number): Promise<QueueOverview[]> {
    const now = Date.now();
    if (!this.shared || now - this.shared.at > maxAgeMs) {
      const overviews = this.overviews();
      overviews.catch(() => {
        this.shared = null;
      });
      this.shared = { at: now, overviews };
    }
    return this.shared.overviews;
  }

  /** Retries every job dead at the time of the call (a snapshot: jobs dying again are not looped on). */
  async retryDead(name: string): Promise<BulkOutcome> {
    const queue = this.get(name);
    const ids: string[] = [];
    for (let offset = 0; ; offset += 1_000) {
      const page = await queue.getJobs('dead', { offset, limit: 1_000 });
      ids.push(...page.map((j) => j.id));
      if (page.length < 1_000) break;
    }
    const outcome: BulkOutcome = { done: [], failed: [] };
    for (let i = 0; i < ids.length; i += 50) {
      const batch = ids.slice(i, i + 50);
      const settled = await Promise.allSettled(batch.map((id) => queue.retry(id)));
      settled.forEach((s, j) => {
        const id = batch[j]!;
        if (s.status === 'fulfilled') outcome.done.push(id);
        else {
          const e = s.reason as Error;
          outcome.failed.push({
            id,
            ...(e instanceof SuretyError ? { code: e.code } : {}),
            message: e.message,
          });
        }
      });
    }
    return outcome;
  }

  /** Removes jobs of `state` that finished more than `olderThanMs` ago: queue.clean (atomic per batch). */
  async clean(
    name: string,
    state: 'completed' | 'dead',
    olderThanMs: number,
    max = CLEAN_MAX,
  ): Promise<{ removed: number; more: boolean }> {
    return this.get(name).clean(state, { olderThanMs, limit: max });
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    this.queues.clear();
    await closeConnection(this.conn);
  }
}
