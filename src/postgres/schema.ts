/**
 * The outbox's table in Postgres: its name (checked, always quoted; tables.ts), its schema as numbered
 * migrations, recorded in `surety_schema` under the component 'outbox' ('outbox:<table>' for a table
 * of another name), and migrate(). The relays are woken on the channel named like the table.
 */
import type { Pool } from 'pg';
import { PostgresSchemaError } from '../errors.js';
import { withPoolClient } from './checkout.js';
import { isMissingTable, migrateComponent, quote, type TableRef, tableRef } from './tables.js';

export const DEFAULT_TABLE = 'surety_outbox';

/** The SQL names of one outbox: what every statement of the outbox interpolates, and nothing else. */
export interface OutboxNames extends TableRef {
  /** The quoted table (`"schema"."table"` or `"table"`). */
  rows: string;
  /** The notification channel (the table's name without its schema), as pg_notify takes it. */
  channel: string;
  /** The channel quoted, as LISTEN takes it. */
  channelSql: string;
  /** The quoted partial index of pending rows (an index lives in its table's schema). */
  pendingIndex: string;
}

/** The `table` option checked and quoted; undefined gives surety_outbox. */
export function outboxNames(table: unknown): OutboxNames {
  const t = tableRef(table, DEFAULT_TABLE, 'outbox');
  return {
    ...t,
    rows: t.sql,
    channel: t.table,
    channelSql: quote(t.table),
    pendingIndex: quote(`${t.table}_pending`),
  };
}

/**
 * The migrations, in order: version n is migrations(n)[n - 1]. Never edit one that shipped; add the next.
 *
 * 1: the rows. `id` orders them (insert order: relays move them oldest first); `job_id` is the job's
 *    id in Redis, fixed at insert; `data` and `opts` are JSON text as given (type json keeps the text
 *    as is, so key order survives); `state` is pending or failed; `attempts`, `last_error`,
 *    `error_code` and `error_at` say what the last refusal was; the partial index serves the relays'
 *    `ORDER BY id ... FOR UPDATE SKIP LOCKED`.
 */
function migrations(n: OutboxNames): string[][] {
  return [
    [
      `CREATE TABLE IF NOT EXISTS ${n.rows} (
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
      )`,
      `CREATE INDEX IF NOT EXISTS ${n.pendingIndex} ON ${n.rows} (id) WHERE state = 'pending'`,
    ],
  ];
}

/** The schema version of the outbox table this Surety writes and reads. */
export const OUTBOX_SCHEMA_VERSION = migrations(outboxNames(undefined)).length;

export interface MigrateResult {
  /** The schema version now (OUTBOX_SCHEMA_VERSION). */
  version: number;
  /** The migrations this call applied, oldest first; [] when the table was current. */
  applied: number[];
}

/** Applies the migrations the table has not had, in one transaction (see migrateComponent). Idempotent. */
export async function migrate(pool: Pool, n: OutboxNames): Promise<MigrateResult> {
  let broken: Error | undefined;
  return withPoolClient(
    pool,
    async (client) => {
      try {
        await client.query('BEGIN');
        const applied = await migrateComponent(client, n, migrations(n));
        await client.query('COMMIT');
        return { version: OUTBOX_SCHEMA_VERSION, applied };
      } catch (err) {
        await client.query('ROLLBACK').catch((e: Error) => {
          broken = e;
        });
        throw err;
      }
    },
    () => broken,
  );
}

/** The PostgresSchemaError for a statement that failed because the table is missing, else `err` itself. */
export function missingTable(err: unknown, n: OutboxNames): unknown {
  if (!isMissingTable(err)) return err;
  return new PostgresSchemaError(
    `outbox table ${n.name} does not exist: call outbox.migrate() once (at deploy, like your own migrations; surety relay --migrate does it too)`,
    { cause: err },
  );
}
