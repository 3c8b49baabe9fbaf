/**
 * The outbox's tables in Postgres: the table name (checked, always quoted), the schema as numbered
 * migrations, and migrate(), which applies the ones a database has not had yet and records each in a
 * small version table, so a later Surety can add migration 2 without guessing what is there.
 *
 *   <table>          one row per job not yet in Redis (pending) or refused by Redis for good (failed)
 *   <table>_version  one row per migration applied: (version, applied_at)
 *
 * The relays are woken on the channel named like the table (pg_notify, delivered on commit).
 */
import type { ClientBase, Pool } from 'pg';
import { OutboxSchemaError, ValidationError } from '../errors.js';
import { show } from '../validate.js';

/** Longest table name: its derived names (`_version`, `_pending`) must fit Postgres's 63 bytes. */
const MAX_TABLE_CHARS = 48;
const TABLE_RE = new RegExp(`^[A-Za-z_][A-Za-z0-9_]{0,${MAX_TABLE_CHARS - 1}}$`);

export const DEFAULT_TABLE = 'surety_outbox';

export function checkTable(value: unknown): string {
  if (typeof value !== 'string' || !TABLE_RE.test(value)) {
    throw new ValidationError(
      `table must be 1-${MAX_TABLE_CHARS} letters, digits or '_' (starting with a letter or '_'), got ${show(value)}`,
    );
  }
  return value;
}

/** A checked name as a quoted identifier (it holds no quote, so doubling quotes is not needed). */
function quote(name: string): string {
  return `"${name}"`;
}

/** The SQL names of one outbox: what every statement of src/postgres/ interpolates, and nothing else. */
export interface OutboxNames {
  /** The table, unquoted: also the notification channel's name. */
  table: string;
  /** The quoted table. */
  rows: string;
  /** The quoted version table. */
  versions: string;
  /** The quoted partial index of pending rows. */
  pendingIndex: string;
}

export function outboxNames(table: string): OutboxNames {
  return {
    table,
    rows: quote(table),
    versions: quote(`${table}_version`),
    pendingIndex: quote(`${table}_pending`),
  };
}

/**
 * The migrations, in order: migration i + 1 is MIGRATIONS[i]. Never edit one that shipped; add the next.
 *
 * 1: the rows. `id` orders them (insert order: relays move them oldest first); `job_id` is the job's
 *    id in Redis, fixed at insert; `data` and `opts` are JSON text as given (type json keeps the text
 *    as is, so key order survives); `state` is pending or failed; `attempts`, `last_error`,
 *    `error_code` and `error_at` say what the last refusal was; the partial index serves the relays'
 *    `ORDER BY id ... FOR UPDATE SKIP LOCKED`.
 */
const MIGRATIONS: readonly ((n: OutboxNames) => string)[] = [
  (n) => `
    CREATE TABLE ${n.rows} (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      queue text NOT NULL,
      job_id text NOT NULL,
      data json NOT NULL,
      opts json NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'failed')),
      attempts integer NOT NULL DEFAULT 0,
      last_error text,
      error_code text,
      error_at timestamptz
    );
    CREATE INDEX ${n.pendingIndex} ON ${n.rows} (id) WHERE state = 'pending';`,
];

/** The schema version this Surety writes and reads. */
export const SCHEMA_VERSION = MIGRATIONS.length;

export interface MigrateResult {
  /** The schema version now (SCHEMA_VERSION). */
  version: number;
  /** The migrations this call applied, oldest first; [] when the database was up to date. */
  applied: number[];
}

/**
 * Applies the migrations the database has not had, in one transaction, under an advisory lock named
 * for the table, so migrate() may run from several processes at once. Idempotent.
 */
export async function migrate(pool: Pool, n: OutboxNames): Promise<MigrateResult> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`surety_outbox_migrate:${n.table}`]);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${n.versions} (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const current = await schemaVersion(client, n);
    if (current > SCHEMA_VERSION) {
      throw new OutboxSchemaError(
        `outbox table ${n.table} is at schema version ${current}, newer than this Surety's ${SCHEMA_VERSION}: upgrade Surety`,
      );
    }
    const applied: number[] = [];
    for (let v = current + 1; v <= SCHEMA_VERSION; v++) {
      await client.query(MIGRATIONS[v - 1]!(n));
      await client.query(`INSERT INTO ${n.versions} (version) VALUES ($1)`, [v]);
      applied.push(v);
    }
    await client.query('COMMIT');
    return { version: SCHEMA_VERSION, applied };
  } catch (err) {
    await client.query('ROLLBACK').catch((e: Error) => {
      broken = e;
    });
    throw err;
  } finally {
    client.release(broken);
  }
}

async function schemaVersion(client: ClientBase, n: OutboxNames): Promise<number> {
  const { rows } = await client.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${n.versions}`);
  return rows[0]?.v ?? 0;
}

/** Postgres's "undefined_table": the outbox was never migrated on this database. */
const UNDEFINED_TABLE = '42P01';

/** The OutboxSchemaError for a statement that failed because the table is missing, else `err` itself. */
export function missingTable(err: unknown, n: OutboxNames): unknown {
  if ((err as { code?: unknown } | null)?.code !== UNDEFINED_TABLE) return err;
  return new OutboxSchemaError(
    `outbox table ${n.table} does not exist in this database: call outbox.migrate() once (at deploy, like your own migrations)`,
    { cause: err },
  );
}
