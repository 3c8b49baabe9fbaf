/**
 * What every table Surety keeps in PostgreSQL shares (the outbox's, pgStep's): how a `table` option is
 * checked and quoted, and the one version table, `surety_schema` (`component`, `version`), with a row
 * per component, where each component's numbered migrations record how far they went. A later Surety
 * adds migration n + 1 and knows exactly what is there.
 */
import type { ClientBase } from 'pg';
import { PostgresSchemaError, ValidationError } from '../errors.js';
import { show } from '../validate.js';

/** The table of schema versions, in the schema of the component's table. */
export const SCHEMA_TABLE = 'surety_schema';

/**
 * A table name: an identifier, optionally schema-qualified (`billing.steps`). 1-50 characters for the
 * table, so that the names derived from it (`<table>_created_at`, `<table>_pending`) fit PostgreSQL's
 * 63; quoted where used, so the case given is the case created.
 */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const MAX_TABLE_CHARS = 50;

export const quote = (id: string): string => `"${id}"`;

/** A checked `table` option, quoted for SQL, with the quoted version table beside it. */
export interface TableRef {
  /** As given (or the default): what messages name. */
  readonly name: string;
  /** The table without its schema. */
  readonly table: string;
  /** `"schema"."table"` or `"table"`. */
  readonly sql: string;
  /** The version table in the same schema. */
  readonly schemaSql: string;
  /** This table's row in the version table: `kind`, or `kind:<name>` for a table of another name. */
  readonly component: string;
}

/** The `table` option checked and quoted; undefined gives `fallback`. */
export function tableRef(value: unknown, fallback: string, kind: string): TableRef {
  const name = value === undefined ? fallback : value;
  const parts = typeof name === 'string' ? name.split('.') : [];
  const table = parts[parts.length - 1] ?? '';
  const schema = parts.length === 2 ? parts[0]! : undefined;
  const ok =
    parts.length >= 1 &&
    parts.length <= 2 &&
    parts.every((p) => IDENTIFIER.test(p)) &&
    table.length <= MAX_TABLE_CHARS &&
    table !== SCHEMA_TABLE &&
    (schema === undefined || schema.length <= 63);
  if (!ok)
    throw new ValidationError(
      `table must be a name of letters, digits and '_' (1-${MAX_TABLE_CHARS} characters, not starting with a digit, not ${SCHEMA_TABLE}), optionally schema-qualified as schema.table, got ${show(value)}`,
    );
  const inSchema = (id: string) => (schema === undefined ? quote(id) : `${quote(schema)}.${quote(id)}`);
  return {
    name: name as string,
    table,
    sql: inSchema(table),
    schemaSql: inSchema(SCHEMA_TABLE),
    component: name === fallback ? kind : `${kind}:${name as string}`,
  };
}

/**
 * Brings `t`'s component to the last of `migrations` (version n is migrations[n - 1]: never edit one
 * that shipped, add the next), inside the caller's transaction on `client`. A transaction-level
 * advisory lock takes concurrent callers one at a time. Resolves with the versions it applied ([] when
 * the table was current); a table at a version newer than this Surety knows is refused with
 * PostgresSchemaError, and nothing is changed.
 */
export async function migrateComponent(
  client: ClientBase,
  t: TableRef,
  migrations: readonly (readonly string[])[],
): Promise<number[]> {
  await client.query(`SELECT pg_advisory_xact_lock(hashtext('${SCHEMA_TABLE}'))`);
  await client.query(
    `CREATE TABLE IF NOT EXISTS ${t.schemaSql} (component text PRIMARY KEY, version integer NOT NULL)`,
  );
  const found = await client.query<{ version: number }>(
    `SELECT version FROM ${t.schemaSql} WHERE component = $1`,
    [t.component],
  );
  const at = found.rows[0]?.version ?? 0;
  if (at > migrations.length)
    throw new PostgresSchemaError(
      `table ${t.name} is at schema version ${at}, made by a newer Surety; this one knows up to ${migrations.length}: upgrade Surety`,
    );
  const applied: number[] = [];
  for (let v = at + 1; v <= migrations.length; v++) {
    for (const sql of migrations[v - 1]!) await client.query(sql);
    applied.push(v);
  }
  if (applied.length > 0)
    await client.query(
      `INSERT INTO ${t.schemaSql} (component, version) VALUES ($1, $2)
       ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version`,
      [t.component, migrations.length],
    );
  return applied;
}

/** PostgreSQL's "relation does not exist" (42P01) or "schema does not exist" (3F000). */
export function isMissingTable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '42P01' || code === '3F000';
}
