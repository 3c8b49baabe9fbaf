/**
 * Where the CLI's Postgres comes from: `--postgres <url>`. The library never loads `pg` (callers pass
 * their own Pool); the CLI has no caller, so it loads node-postgres here, when a command asks for it,
 * and says how to install it when it is missing (it is an optional peer dependency).
 */
import type { Pool, PoolConfig } from 'pg';
import { PostgresNotInstalledError } from '../errors.js';
import { CliError, UsageError } from './errors.js';
import { addCleanup } from './lifecycle.js';

interface PgModule {
  Pool: new (config: PoolConfig) => Pool;
}

/** node-postgres, loaded now; PostgresNotInstalledError when it is not installed. */
export async function loadPg(specifier = 'pg'): Promise<PgModule> {
  let mod: { Pool?: unknown; default?: { Pool?: unknown } };
  try {
    mod = (await import(specifier)) as typeof mod;
  } catch (err) {
    // Node's code for a package that is not there (not a Surety code): ERR_MODULE_NOT_FOUND.
    if (/MODULE_NOT_FOUND$/.test(String((err as { code?: unknown }).code)))
      throw new PostgresNotInstalledError(err);
    throw err;
  }
  const Pool = mod.Pool ?? mod.default?.Pool;
  if (typeof Pool !== 'function') throw new PostgresNotInstalledError();
  return { Pool: Pool as PgModule['Pool'] };
}

/** The URL with its password hidden, for messages. */
export function redactPostgres(url: string): string {
  return url.replace(/^(postgres(?:ql)?:\/\/[^:@/]*:)[^@/]*@/, '$1***@');
}

/**
 * A Pool for `url`, checked with one query (so a wrong URL fails now, with exit code 1), ended by the
 * exit cleanups. Its `error` events (idle connections lost when Postgres restarts) go to `onError`.
 */
export async function openPostgres(url: string, onError: (err: Error) => void): Promise<Pool> {
  if (!/^postgres(ql)?:\/\/\S+$/.test(url)) {
    throw new UsageError(`--postgres must be a postgres:// or postgresql:// URL, got ${JSON.stringify(url)}`);
  }
  const { Pool } = await loadPg();
  // The relay holds one connection for LISTEN and one per batch; a few more serve the startup checks.
  const pool = new Pool({ connectionString: url, max: 4, connectionTimeoutMillis: 10_000 });
  pool.on('error', onError);
  addCleanup(() => pool.end());
  try {
    await pool.query('SELECT 1');
  } catch (err) {
    // A refused connection to a name with several addresses is an AggregateError with no message.
    const e = err as { message?: string; code?: string };
    const reason = e.message || e.code || String(err);
    throw new CliError(`cannot connect to Postgres at ${redactPostgres(url)} (${reason})`);
  }
  return pool;
}
