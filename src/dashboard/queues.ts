/**
 * The dashboard's view of Redis: one shared connection, one Queue per name (created on first use,
 * the most recently used ones kept), and queue discovery. Everything goes through the Queue admin
 * API; no Redis key is read here.
 */

import { ValidationError } from '../errors.js';
import type { BulkOutcome } from '../queue/bulk.js';
import { discoverQueues } from '../queue/discover.js';
import { Queue } from '../queue/queue.js';
import type { ConnectionOption } from '../redis/client.js';
import { type Connection, closeConnection, connect } from '../redis/connection.js';
import { type ServerInfo, serverInfo } from '../redis/server-info.js';
import type { JobCounts } from '../types.js';

export interface QueueOverview {
  name: string;
  counts: JobCounts;
  paused: boolean;
  workers: number;
}

/** Most jobs one clean call removes. */
export const CLEAN_MAX = 10_000;
/** Most dead jobs one retry-dead call retries (`more: true` when some are left). */
export const RETRY_DEAD_MAX = 10_000;
/**
 * Most Queue objects kept at once. Queue names come from request URLs, so without a bound every new
 * name would add one for good; the least recently used are dropped (and closed once no request uses
 * them). A Queue costs no connection of its own here: all share the registry's.
 */
export const MAX_QUEUES = 1_000;

interface Entry {
  queue: Queue;
  /** Requests using it now: an evicted Queue is closed only once this is 0. */
  users: number;
  evicted: boolean;
  /** Whether the dashboard's metricsRetentionMs was applied to this queue (once per Queue object). */
  retention: Promise<void> | null;
}

export class QueueRegistry {
  private readonly conn: Connection;
  /** In use order: the first entry is the least recently used. */
  private readonly queues = new Map<string, Entry>();
  private discovered: { at: number; names: Promise<string[]> } | null = null;

  constructor(
    connection: ConnectionOption | undefined,
    readonly prefix: string | undefined,
    private readonly discoverTtlMs = 2_000,
    private readonly maxQueues = MAX_QUEUES,
  ) {
    if (!Number.isInteger(maxQueues) || maxQueues < 1)
      throw new ValidationError(`maxQueues must be an integer >= 1, got ${String(maxQueues)}`);
    this.conn = connect(connection, 'queue');
  }

  /** Queue objects held now (at most `maxQueues`, plus evicted ones still in use). */
  get size(): number {
    return this.queues.size;
  }

  /**
   * Runs `fn` with the Queue named `name` (a bad name throws a ValidationError), created on first use
   * and kept among the `maxQueues` most recently used.
   */
  async use<T>(name: string, fn: (queue: Queue) => Promise<T>): Promise<T> {
    const entry = this.entry(name);
    entry.users++;
    try {
      return await fn(entry.queue);
    } finally {
      entry.users--;
      if (entry.evicted && entry.users === 0) void entry.queue.close().catch(() => {});
    }
  }

  private entry(name: string): Entry {
    const found = this.queues.get(name);
    if (found) {
      this.queues.delete(name);
      this.queues.set(name, found);
      return found;
    }
    const entry: Entry = {
      queue: new Queue(name, {
        connection: this.conn.client,
        // The dashboard shows queues as they are: with the partition count recorded in Redis.
        partitions: 'auto',
        ...(this.prefix === undefined ? {} : { prefix: this.prefix }),
      }),
      users: 0,
      evicted: false,
      retention: null,
    };
    this.queues.set(name, entry);
    for (const [oldest, old] of this.queues) {
      if (this.queues.size <= this.maxQueues) break;
      this.queues.delete(oldest);
      old.evicted = true;
      if (old.users === 0) void old.queue.close().catch(() => {});
    }
    return entry;
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

  /** Set by createDashboard's metricsRetentionMs: applied to each queue when it is first listed. */
  metricsRetentionMs: number | undefined;

  overview(name: string): Promise<QueueOverview> {
    const entry = this.entry(name);
    if (this.metricsRetentionMs !== undefined && entry.retention === null) {
      entry.retention = entry.queue.setMetricsRetention(this.metricsRetentionMs);
      // A failure (Redis away) is tried again at the next listing.
      entry.retention.catch(() => {
        entry.retention = null;
      });
    }
    return this.use(name, async (queue) => {
      const [counts, paused, workers] = await Promise.all([
        queue.counts(),
        queue.isPaused(),
        queue.workers(),
      ]);
      return { name, counts, paused, workers: workers.length };
    });
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

  /**
   * Retries the jobs dead at the time of the call, oldest first, at most `max` (a snapshot: jobs dying
   * again are not looped on); `more` says dead jobs were left (call again).
   */
  retryDead(name: string, max = RETRY_DEAD_MAX): Promise<BulkOutcome> {
    return this.use(name, (queue) => queue.retryJobs({ state: 'dead', max }));
  }

  /** Removes jobs of `state` that finished more than `olderThanMs` ago: queue.clean (atomic per batch). */
  async clean(
    name: string,
    state: 'completed' | 'dead',
    olderThanMs: number,
    max = CLEAN_MAX,
  ): Promise<{ removed: number; more: boolean }> {
    return this.use(name, (queue) => queue.clean(state, { olderThanMs, limit: max }));
  }

  /** The Redis server's version, memory, clients, persistence and the warnings of serverInfo(). */
  async redisInfo(): Promise<ServerInfo | null> {
    return serverInfo(this.conn.client);
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((e) => e.queue.close()));
    this.queues.clear();
    await closeConnection(this.conn);
  }
}
