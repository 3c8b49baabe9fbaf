/**
 * A private PostgreSQL per test file for pgStep's tests (helpers/postgres-server.ts): a Pool, the
 * steps table migrated, and `effects`, the table processors write their effects to, one row per write
 * (tagged with queue, job and attempt), so a test counts effects instead of trusting counters.
 */
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { migrateSteps } from '../../src/postgres/index.js';
import { type PostgresServer, startPostgres } from './postgres-server.js';

export interface PgStepDb {
  server: PostgresServer;
  pool: pg.Pool;
  url: string;
}

/** A pool that survives its server's restarts: an idle client's lost connection is not a crash. */
export function newPool(url: string): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max: 20 });
  pool.on('error', () => {});
  return pool;
}

export const EFFECTS_TABLE = `CREATE TABLE IF NOT EXISTS effects (
  queue text NOT NULL, job_id text NOT NULL, attempt integer NOT NULL, what text NOT NULL)`;

export function usePgStepDb(): PgStepDb {
  const db = {} as PgStepDb;
  beforeAll(async () => {
    db.server = await startPostgres();
    db.url = db.server.url;
    db.pool = newPool(db.url);
    await migrateSteps(db.pool);
    await db.pool.query(EFFECTS_TABLE);
  });
  afterAll(async () => {
    await db.pool?.end();
    await db.server?.stop();
  });
  return db;
}

/** One effect of a processor: a row of `effects`, written through the step's client. */
export async function addEffect(
  client: pg.ClientBase,
  job: { queueName: string; id: string; attempt: number },
  what: string,
): Promise<void> {
  await client.query('INSERT INTO effects (queue, job_id, attempt, what) VALUES ($1, $2, $3, $4)', [
    job.queueName,
    job.id,
    job.attempt,
    what,
  ]);
}

/** The effects committed for a queue's jobs, oldest job id first. */
export async function effectsOf(
  pool: pg.Pool,
  queue: string,
): Promise<{ job_id: string; attempt: number; what: string }[]> {
  const r = await pool.query(
    'SELECT job_id, attempt, what FROM effects WHERE queue = $1 ORDER BY job_id, attempt',
    [queue],
  );
  return r.rows;
}

/** The step records of a queue's jobs. */
export async function stepRowsOf(
  pool: pg.Pool,
  queue: string,
  table = 'surety_steps',
): Promise<{ job_id: string; step: string; attempt: number; result: string | null }[]> {
  const r = await pool.query(
    `SELECT job_id, step, attempt, result FROM ${table} WHERE queue = $1 ORDER BY job_id, step`,
    [queue],
  );
  return r.rows;
}
