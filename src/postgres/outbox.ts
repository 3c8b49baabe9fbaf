/**
 * The transactional outbox (docs/postgres.md): jobs written to a Postgres table in the caller's own
 * transaction, so they exist if and only if it commits; relays (relay.ts) move committed rows into
 * Redis through Queue.addBulk. This file is the producer and admin side: createOutbox, migrate, add,
 * addBulk (each with a pg_notify that wakes the relays on commit), and the reads and fixes of failed
 * rows. It never imports `pg`: the caller's Pool and clients do the talking.
 */
import type { ClientBase, Pool } from 'pg';
import { DEFAULT_MAX_PAYLOAD_BYTES, MAX_BULK } from '../defaults.js';
import { ValidationError } from '../errors.js';
import type { JobOptions } from '../types.js';
import { checkInt, checkJobId, checkKnownKeys, checkObject, checkQueueName, show } from '../validate.js';
import { type StoredJob, storedJob, storedJobs } from './outbox-job.js';
import { Relay, type RelayOptions } from './relay.js';
import { type MigrateResult, migrate, missingTable, type OutboxNames, outboxNames } from './schema.js';

export interface OutboxOptions {
  /** Your node-postgres Pool: migrate, the relays and the admin reads take connections from it. */
  pool: Pool;
  /**
   * The outbox table (created by migrate()): 1-50 letters, digits or '_', optionally schema-qualified
   * (`billing.surety_outbox`). Default 'surety_outbox'.
   */
  table?: string;
  /** Largest accepted job payload, as UTF-8 JSON, as a Queue's option of that name. Default 512 KiB. */
  maxPayloadBytes?: number;
}

/** One row of the outbox, as outbox.pending() and outbox.failed() list it. */
export interface OutboxEntry {
  /** The job's id: the one it has (or will have) in Redis. */
  id: string;
  queue: string;
  data: unknown;
  /** The job options as stored (Dates as epoch ms, the id included). */
  opts: JobOptions;
  /** When the row was inserted, epoch ms (Postgres's clock). */
  addedAt: number;
  /** How many relay attempts were refused so far. */
  attempts: number;
  /** The last refusal (always there on a failed row): the SuretyError code, its message, when. */
  error?: { code?: string; message: string; at: number };
}

export interface OutboxCounts {
  /** Rows waiting for a relay (committed, not in Redis yet). */
  pending: number;
  /** Rows Redis refused for good (outbox.failed()). */
  failed: number;
  /** When the oldest pending row was inserted (epoch ms), if any: the relays' lag. */
  oldestPendingAt?: number;
}

export interface Outbox {
  /** The table's name, as given (or the default). */
  readonly table: string;
  /** Creates or upgrades the outbox's tables (idempotent; safe from several processes at once). */
  migrate(): Promise<MigrateResult>;
  /**
   * Inserts a job into the outbox in `client`'s transaction (your `BEGIN ... COMMIT`; this call opens
   * none): it reaches Redis after the commit, never if the transaction rolls back. Checked as
   * queue.add checks it (a bad job throws the same ValidationError, and nothing is inserted). Resolves
   * with the job's id: `opts.id`, else a new UUID.
   */
  add(client: ClientBase, queue: string, data: unknown, opts?: JobOptions): Promise<{ id: string }>;
  /** As add, for up to 10 000 jobs of one queue (queue.addBulk's limit), in order, in one statement. */
  addBulk(
    client: ClientBase,
    queue: string,
    items: readonly { data: unknown; opts?: JobOptions }[],
  ): Promise<{ id: string }[]>;
  /** Starts a relay that moves committed rows into Redis until relay.close(). */
  relay(opts?: RelayOptions): Relay;
  /** Rows waiting for a relay, oldest first (`limit` default 100, at most 10 000). */
  pending(opts?: { limit?: number }): Promise<OutboxEntry[]>;
  /** Rows Redis refused for good, each with its error, oldest first (`limit` default 100, at most 10 000). */
  failed(opts?: { limit?: number }): Promise<OutboxEntry[]>;
  /** Makes failed rows (those of `ids`, or all) pending again, once the cause is fixed; returns how many. */
  retryFailed(ids?: readonly string[]): Promise<number>;
  /** Deletes the failed rows of these job ids for good; returns how many. */
  removeFailed(ids: readonly string[]): Promise<number>;
  counts(): Promise<OutboxCounts>;
}

export function createOutbox(options: OutboxOptions): Outbox {
  const o = checkObject('createOutbox options', options);
  checkKnownKeys('createOutbox options', o, ['pool', 'table', 'maxPayloadBytes']);
  const pool = o.pool as Pool | undefined;
  if (typeof pool?.query !== 'function' || typeof pool.connect !== 'function') {
    throw new ValidationError(`pool must be a node-postgres Pool, got ${show(pool)}`);
  }
  const names = outboxNames(o.table);
  const maxBytes =
    o.maxPayloadBytes === undefined
      ? DEFAULT_MAX_PAYLOAD_BYTES
      : checkInt('maxPayloadBytes', o.maxPayloadBytes, 1, 512 * 1024 * 1024);
  return Object.freeze(new PgOutbox(pool, names, maxBytes));
}

class PgOutbox implements Outbox {
  readonly table: string;

  constructor(
    private readonly pool: Pool,
    private readonly names: OutboxNames,
    private readonly maxBytes: number,
  ) {
    this.table = names.name;
  }

  migrate(): Promise<MigrateResult> {
    return migrate(this.pool, this.names);
  }

  async add(client: ClientBase, queue: string, data: unknown, opts?: JobOptions): Promise<{ id: string }> {
    checkClient(client);
    checkQueueName(queue);
    const job = storedJob(data, opts, 'job data', this.maxBytes);
    await this.insert(client, queue, [job]);
    return { id: job.id };
  }

  async addBulk(
    client: ClientBase,
    queue: string,
    items: readonly { data: unknown; opts?: JobOptions }[],
  ): Promise<{ id: string }[]> {
    checkClient(client);
    const jobs = storedJobs(queue, items, this.maxBytes);
    if (jobs.length > 0) await this.insert(client, queue, jobs);
    return jobs.map((j) => ({ id: j.id }));
  }

  /**
   * One statement: the rows in the given order (their ids grow in that order), and a notification on
   * the table's channel, which Postgres delivers only if the transaction commits (and once per
   * transaction, however many adds it made).
   */
  private async insert(client: ClientBase, queue: string, jobs: StoredJob[]): Promise<void> {
    const n = this.names;
    try {
      await client.query(
        `WITH added AS (
           INSERT INTO ${n.rows} (queue, job_id, data, opts)
           SELECT $1, j.id, j.data, j.opts
           FROM unnest($2::text[], $3::json[], $4::json[]) WITH ORDINALITY AS j(id, data, opts, n)
           ORDER BY j.n
           RETURNING 1
         )
         SELECT pg_notify($5, '')`,
        [queue, jobs.map((j) => j.id), jobs.map((j) => j.data), jobs.map((j) => j.opts), n.channel],
      );
    } catch (err) {
      throw missingTable(err, n);
    }
  }

  relay(opts: RelayOptions = {}): Relay {
    return new Relay(this.pool, this.names, this.maxBytes, opts);
  }

  pending(opts?: { limit?: number }): Promise<OutboxEntry[]> {
    return this.list('pending', opts);
  }

  failed(opts?: { limit?: number }): Promise<OutboxEntry[]> {
    return this.list('failed', opts);
  }

  private async list(state: 'pending' | 'failed', opts: { limit?: number } = {}): Promise<OutboxEntry[]> {
    checkKnownKeys(`${state} options`, checkObject(`${state} options`, opts), ['limit']);
    const limit = checkInt('limit', opts.limit ?? 100, 1, MAX_BULK);
    const { rows } = await this.query<ListedRow>(
      `SELECT job_id, queue, data::text AS data, opts::text AS opts, attempts, last_error, error_code,
              (extract(epoch FROM created_at) * 1000)::float8 AS added_ms,
              (extract(epoch FROM error_at) * 1000)::float8 AS error_ms
       FROM ${this.names.rows} WHERE state = $1 ORDER BY id LIMIT $2`,
      [state, limit],
    );
    return rows.map(entryOf);
  }

  async retryFailed(ids?: readonly string[]): Promise<number> {
    const some = ids === undefined ? null : checkIds(ids);
    const n = this.names;
    const { rows } = await this.query<{ count: number }>(
      `WITH retried AS (
         UPDATE ${n.rows} SET state = 'pending', attempts = 0
         WHERE state = 'failed' AND ($1::text[] IS NULL OR job_id = ANY($1::text[]))
         RETURNING 1
       )
       SELECT count(*)::int AS count, pg_notify($2, '') FROM retried`,
      [some, n.channel],
    );
    return rows[0]?.count ?? 0;
  }

  async removeFailed(ids: readonly string[]): Promise<number> {
    const { rowCount } = await this.query(
      `DELETE FROM ${this.names.rows} WHERE state = 'failed' AND job_id = ANY($1::text[])`,
      [checkIds(ids)],
    );
    return rowCount ?? 0;
  }

  async counts(): Promise<OutboxCounts> {
    const { rows } = await this.query<{ pending: number; failed: number; oldest: number | null }>(
      `SELECT count(*) FILTER (WHERE state = 'pending')::int AS pending,
              count(*) FILTER (WHERE state = 'failed')::int AS failed,
              (extract(epoch FROM min(created_at) FILTER (WHERE state = 'pending')) * 1000)::float8 AS oldest
       FROM ${this.names.rows}`,
    );
    const r = rows[0]!;
    return {
      pending: r.pending,
      failed: r.failed,
      ...(r.oldest === null ? {} : { oldestPendingAt: Math.round(r.oldest) }),
    };
  }

  private async query<R extends object = object>(sql: string, params?: unknown[]) {
    try {
      return await this.pool.query<R & Record<string, unknown>>(sql, params);
    } catch (err) {
      throw missingTable(err, this.names);
    }
  }
}

interface ListedRow {
  job_id: string;
  queue: string;
  data: string;
  opts: string;
  attempts: number;
  last_error: string | null;
  error_code: string | null;
  added_ms: number;
  error_ms: number | null;
}

function entryOf(r: ListedRow): OutboxEntry {
  const entry: OutboxEntry = {
    id: r.job_id,
    queue: r.queue,
    data: JSON.parse(r.data) as unknown,
    opts: JSON.parse(r.opts) as JobOptions,
    addedAt: Math.round(r.added_ms),
    attempts: r.attempts,
  };
  if (r.last_error !== null) {
    entry.error = {
      ...(r.error_code === null ? {} : { code: r.error_code }),
      message: r.last_error,
      at: Math.round(r.error_ms ?? 0),
    };
  }
  return entry;
}

function checkIds(ids: unknown): string[] {
  if (!Array.isArray(ids) || ids.length === 0 || ids.length > MAX_BULK) {
    throw new ValidationError(`ids must be an array of 1-${MAX_BULK} job ids, got ${show(ids)}`);
  }
  return ids.map((id) => checkJobId(id));
}

/**
 * The transaction's client, not the Pool: `pool.query` would insert on a connection of its own, outside
 * the caller's transaction, which is the one thing the outbox is for.
 */
function checkClient(client: unknown): void {
  const c = client as Partial<Pool> | null;
  if (typeof c?.query !== 'function') {
    throw new ValidationError(
      `client must be the node-postgres client of your transaction, got ${show(client)}`,
    );
  }
  if (typeof c.idleCount === 'number' && typeof c.totalCount === 'number') {
    throw new ValidationError(
      'client must be the client of your transaction (const client = await pool.connect(); BEGIN ...), not the Pool: pool.query would run outside the transaction',
    );
  }
}
