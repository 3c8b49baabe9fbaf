/**
 * The PostgreSQL table of pgStep's records (docs/postgres.md): its name, its versioned migration and
 * its retention. One row per step an attempt committed, keyed by the job (queue, id, creation time)
 * and the step's name. Only types come from `pg`: the caller's Pool or PoolClient does the talking.
 */
import type { Pool, PoolClient } from 'pg';
import { PostgresSchemaError, ValidationError } from '../errors.js';
import { checkCallOptions, checkInt } from '../validate.js';
import { withPoolClient } from './checkout.js';
import { isMissingTable, migrateComponent, quote, type TableRef, tableRef } from './tables.js';

/** The table pgStep, migrateSteps and pruneSteps use unless given `table`. */
export const DEFAULT_STEPS_TABLE = 'surety_steps';

/** Rows one DELETE of pruneSteps removes at most: a prune of millions of rows holds no long lock. */
const PRUNE_CHUNK = 10_000;

/** A checked table name, quoted for SQL, with the quoted version table beside it (tables.ts). */
export interface StepsTable extends TableRef {
  /** The index on created_at (unqualified: an index lives in its table's schema). */
  readonly indexSql: string;
}

/** The `table` option checked and quoted; undefined gives surety_steps (component 'steps'). */
export function stepsTable(table: unknown): StepsTable {
  const t = tableRef(table, DEFAULT_STEPS_TABLE, 'steps');
  return { ...t, indexSql: quote(`${t.table}_created_at`) };
}

/** A Pool or a PoolClient, as the caller gave it: a PoolClient is released by its owner, never here. */
export type Db = Pool | PoolClient;

function isPoolClient(db: Db): db is PoolClient {
  return typeof (db as Partial<PoolClient>).release === 'function';
}

/** Clients whose connection failed during a rollback: destroyed on release, not put back in the pool. */
const broken = new WeakSet<PoolClient>();

/**
 * Runs `use` with a client: the PoolClient given, or one taken from the Pool and released after (or
 * destroyed, when its rollback failed: its connection is gone or in an unknown state).
 */
export async function withClient<R>(db: Db, use: (client: PoolClient) => Promise<R>): Promise<R> {
  if (isPoolClient(db)) return use(db);
  return withPoolClient(db, use, (client) => broken.has(client));
}

/**
 * Runs `body` in a transaction of `client` (READ COMMITTED, PostgreSQL's default): COMMIT when it
 * resolves, ROLLBACK when it throws (what it threw is rethrown).
 */
export async function inTransaction<R>(client: PoolClient, body: () => Promise<R>): Promise<R> {
  await client.query('BEGIN');
  try {
    const result = await body();
    await client.query('COMMIT');
    return result;
  } catch (err) {
    try {
      // After a failed COMMIT the transaction has ended already: this ROLLBACK only warns.
      await client.query('ROLLBACK');
    } catch {
      broken.add(client);
    }
    throw err;
  }
}

/**
 * `err` as PostgresSchemaError when it is PostgreSQL's "relation does not exist" (42P01) or "schema
 * does not exist" (3F000) for a statement on the steps table, else `err` itself.
 */
export function missingTable(err: unknown, t: StepsTable): unknown {
  if (!isMissingTable(err)) return err;
  return new PostgresSchemaError(
    `table ${t.name} does not exist: create it with migrateSteps(pool${t.name === DEFAULT_STEPS_TABLE ? '' : `, { table: '${t.name}' }`}) (surety/postgres)`,
    { cause: err },
  );
}

/** Each version's statements, in order: version n is MIGRATIONS[n - 1]. Never edit a shipped one. */
function migrations(t: StepsTable): string[][] {
  return [
    [
      `CREATE TABLE IF NOT EXISTS ${t.sql} (
        queue text NOT NULL,
        job_id text NOT NULL,
        job_created_at bigint NOT NULL,
        step text NOT NULL,
        attempt integer NOT NULL,
        result text,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (queue, job_id, job_created_at, step)
      )`,
      `CREATE INDEX IF NOT EXISTS ${t.indexSql} ON ${t.sql} (created_at)`,
    ],
  ];
}

/** The newest version of the steps table this Surety knows. */
export const STEPS_SCHEMA_VERSION = 1;

/**
 * Creates pgStep's table (`surety_steps`, or `table`) or brings it to this version of Surety; does
 * nothing when it is there already, so it can run at every start. Several processes may run it at
 * once: a transaction-level advisory lock takes them one at a time. The version is kept in
 * `surety_schema` (component 'steps'; 'steps:<table>' for a table of another name), beside the table.
 * A table migrated by a newer Surety is refused with PostgresSchemaError, and nothing is changed.
 */
export async function migrateSteps(db: Db, opts?: { table?: string }): Promise<void> {
  checkCallOptions('migrateSteps options', opts, ['table']);
  const t = stepsTable(opts?.table);
  const steps = migrations(t);
  await withClient(db, (client) => inTransaction(client, () => migrateComponent(client, t, steps)));
}

/**
 * Deletes the records of steps committed more than `olderThanMs` ago (on the database's clock), in
 * chunks of 10 000 rows, each its own transaction; resolves with the number deleted. Records outlive
 * their jobs otherwise. A step whose record is deleted runs again if its job reaches it again, so
 * `olderThanMs` must exceed the longest a job can live from its first pgStep to its end (retries,
 * backoff, sleeps, manual retries).
 */
export async function pruneSteps(db: Db, opts: { olderThanMs: number; table?: string }): Promise<number> {
  checkCallOptions('pruneSteps options', opts, ['olderThanMs', 'table']);
  if (opts === undefined) throw new ValidationError('pruneSteps needs options: { olderThanMs }');
  const olderThanMs = checkInt('olderThanMs', opts.olderThanMs, 0);
  const t = stepsTable(opts.table);
  // The cut-off once, as text (a JS Date would drop its microseconds): the loop ends even while
  // new records keep coming.
  const cut = await db.query<{ cut: string }>(
    `SELECT (now() - $1::bigint * interval '1 millisecond')::text AS cut`,
    [olderThanMs],
  );
  const before = cut.rows[0]!.cut;
  let deleted = 0;
  for (;;) {
    const r = await db
      .query(
        `DELETE FROM ${t.sql} WHERE ctid IN
           (SELECT ctid FROM ${t.sql} WHERE created_at < $1::timestamptz LIMIT ${PRUNE_CHUNK})`,
        [before],
      )
      .catch((err: unknown) => {
        throw missingTable(err, t);
      });
    deleted += r.rowCount ?? 0;
    if ((r.rowCount ?? 0) < PRUNE_CHUNK) return deleted;
  }
}
