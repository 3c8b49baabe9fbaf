/**
 * Per-file fixture for the outbox tests (surety/postgres): one private PostgreSQL server for the file
 * (postgres-server.ts), a Pool on it, a unique outbox table per test, and transactions in one call.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import { checkout, giveBack } from '../../src/postgres/checkout.js';
import { type PostgresServer, startPostgres } from './postgres-server.js';

export interface PostgresFixture {
  server: PostgresServer;
  /** A Pool on the server; its `error` events (connections lost on a kill) are ignored. */
  pool: pg.Pool;
}

export function usePostgres(): PostgresFixture {
  const fixture = {} as PostgresFixture;
  beforeAll(async () => {
    fixture.server = await startPostgres();
    fixture.pool = newPool(fixture.server.url);
  });
  afterAll(async () => {
    await fixture.pool?.end();
    await fixture.server?.stop();
  });
  return fixture;
}

export function newPool(url: string, max = 10): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => {});
  return pool;
}

/** An outbox table name no other test uses. */
export function uniqueTable(): string {
  return `outbox_${randomBytes(4).toString('hex')}`;
}

/** Runs `fn` in a transaction: committed when it resolves, rolled back when it throws (then rethrown). */
export async function committed<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await checkout(pool);
  try {
    await client.query('BEGIN');
    const value = await fn(client);
    await client.query('COMMIT');
    return value;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    giveBack(client);
  }
}

/** Runs `fn` in a transaction that is then rolled back; resolves with what `fn` returned. */
export async function rolledBack<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await checkout(pool);
  try {
    await client.query('BEGIN');
    return await fn(client);
  } finally {
    await client.query('ROLLBACK').catch(() => {});
    giveBack(client);
  }
}
