/**
 * The PostgreSQL table of pgStep's records (docs/postgres.md): its name, its versioned migration and
 * its retention. One row per step an attempt committed, keyed by the job (queue, id, creation time)
 * and the step's name. Only types come from `pg`: the caller's Pool or PoolClient does the talking.
 */
import type { Pool, PoolClient } from 'pg';
import { PostgresSchemaError, ValidationError } from '../errors.js';
import { checkCallOptions, checkInt, show } from '../validate.js';

/** The table pgStep, migrateSteps and pruneSteps use unless given `table`. */
export const DEFAULT_STEPS_TABLE = 'surety_steps';

/**
 * The table of schema versions, one row per component Surety keeps in this database ('steps' here,
 * 'outbox' for the outbox), in the schema of the component's table.
 */
const SCHEMA_TABLE = 'surety_schema';

/** Rows one DELETE of pruneSteps removes at most: a prune of millions of rows holds no long lock. */
const PRUNE_CHUNK = 10_000;

/**
 * A table name: an identifier, optionally schema-qualified (`billing.steps`). 1-50 characters for the
 * table, so that its index name (`<table>_created_at`) fits PostgreSQL's 63; quoted where used, so
 * the case given is the case created.
 */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A checked table name, quoted for SQL, with the quoted version table beside it. */
export interface StepsTable {
  /** As given (or the default): what messages name. */
  readonly name: string;
  /** `"schema"."table"` or `"table"`. */
  readonly sql: string;
  /** The version table in the same schema. */
  readonly schemaSql: string;
  /** The index on created_at (unqualified: an index lives in its table's schema). */
  readonly indexSql: string;
  /** This table's row in the version table: 'steps', or 'steps:<name>' for a table of another name. */
  readonly component: string;
}

const quote = (id: string) => `"${id}"`;

/** The `table` option checked and quoted; undefined gives surety_steps. */
export function stepsTable(table: unknown): StepsTable {
  const name = table === undefined ? DEFAULT_STEPS_TABLE : table;
  const parts = typeof name === 'string' ? name.split('.') : [];
  const table_ = parts[parts.length - 1] ?? '';
  const schema = parts.length === 2 ? parts[0]! : undefined;
  const ok =
    parts.length >= 1 &&
    parts.length <= 2 &&
    parts.every((p) => IDENTIFIER.test(p)) &&
    table_.length <= 50 &&
    table_ !== SCHEMA_TABLE &&
    (schema === undefined || schema.length <= 63);
  if (!ok)
    throw new ValidationError(
      `table must be a name of letters, digits and '_' (1-50 characters, not starting with a digit, not ${SCHEMA_TABLE}), optionally schema-qualified as schema.table, got ${show(table)}`,
    );
  const inSchema = (id: string) => (schema === undefined ? quote(id) : `${quote(schema)}.${quote(id)}`);
  return {
    name: name as string,
    sql: inSchema(table_),
    schemaSql: inSchema(SCHEMA_TABLE),
    indexSql: quote(`${table_}_created_at`),
    component: name === DEFAULT_STEPS_TABLE ? 'steps' : `steps:${name as string}`,
  };
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
  const client = await db.connect();
  try {
    return await use(client);
  } finally {
    client.release(broken.has(client));
  }
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
  const code = (err as { code?: unknown } | null)?.code;
  if (code !== '42P01' && code !== '3F000') return err;
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
  await withClient(db, (client) =>
    inTransaction(client, async () => {
      await client.query(`SELECT pg_advisory_xact_lock(hashtext('${SCHEMA_TABLE}'))`);
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${t.schemaSql} (component text PRIMARY KEY, version integer NOT NULL)`,
      );
      const found = await client.query<{ version: number }>(
        `SELECT version FROM ${t.schemaSql} WHERE component = $1`,
        [t.component],
      );
      const at = found.rows[0]?.version ?? 0;
      if (at > steps.length)
        throw new PostgresSchemaError(
          `table ${t.name} is at schema version ${at}, made by a newer Surety; this one knows up to ${steps.length}: upgrade Surety`,
        );
      for (let v = at + 1; v <= steps.length; v++) {
        for (const sql of steps[v - 1]!) await client.query(sql);
      }
      if (at < steps.length)
        await client.query(
          `INSERT INTO ${t.schemaSql} (component, version) VALUES ($1, $2)
           ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version`,
          [t.component, steps.length],
        );
    }),
  );
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
