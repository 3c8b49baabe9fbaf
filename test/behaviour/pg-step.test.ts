/**
 * pgStep (issue 37): a step whose effects are PostgreSQL writes, committed in one transaction with the
 * step's record, so a retried or recovered attempt gets the stored result instead of writing again.
 * Real Redis and real PostgreSQL, one private server of each for the file; effects are rows of
 * `effects`, counted in the database.
 */
import { describe, expect, it } from 'vitest';
import { LeaseExpiredError, PostgresSchemaError, Queue, ValidationError, Worker } from '../../src/index.js';
import { migrateSteps, pgStep, pruneSteps } from '../../src/postgres/index.js';
import { addEffect, effectsOf, newPool, stepRowsOf, usePgStepDb } from '../helpers/pg-steps.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const db = usePgStepDb();
const open = closeAfterEach();

function queue() {
  const q = new Queue(uniqueName(), { connection: fx.url });
  open.push(q);
  return q;
}

function worker(name: string, processor: ConstructorParameters<typeof Worker>[1], opts: object = {}) {
  const w = new Worker(name, processor, { connection: fx.url, ...opts });
  open.push(w);
  return w;
}

const retrySoon = { backoff: { type: 'fixed' as const, delayMs: 10 } };

describe('pgStep', () => {
  it("commits a step's writes once: the retried attempt gets the stored result without running fn", async () => {
    const q = queue();
    let charges = 0;
    let audits = 0;
    worker(q.name, async (job) => {
      const charge = await pgStep(job, 'charge', db.pool, async (client) => {
        charges++;
        await addEffect(client, job, 'charge');
        return { chargeId: `ch_${job.attempt}` };
      });
      const audit = await pgStep(job, 'audit', db.pool, async (client) => {
        audits++;
        await addEffect(client, job, 'audit');
      });
      if (job.attempt === 1) throw new Error('the mail server is down');
      return { charge, audit: audit === undefined ? 'undefined' : audit };
    });
    const { id } = await q.add({}, retrySoon);
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toEqual({
      charge: { chargeId: 'ch_1' },
      audit: 'undefined',
    });
    expect([charges, audits]).toEqual([1, 1]);
    expect((await q.getJob(id))!.attempts).toBe(2);
    expect(await effectsOf(db.pool, q.name)).toEqual([
      { job_id: id, attempt: 1, what: 'charge' },
      { job_id: id, attempt: 1, what: 'audit' },
    ]);
    expect(await stepRowsOf(db.pool, q.name)).toEqual([
      { job_id: id, step: 'audit', attempt: 1, result: null },
      { job_id: id, step: 'charge', attempt: 1, result: '{"chargeId":"ch_1"}' },
    ]);
  });

  it('fn that throws rolls back its writes and records nothing: the next attempt runs it again', async () => {
    const q = queue();
    let runs = 0;
    worker(q.name, (job) =>
      pgStep(job, 'charge', db.pool, async (client) => {
        runs++;
        await addEffect(client, job, 'charge');
        if (job.attempt === 1) throw new Error('card declined');
        return 'charged';
      }),
    );
    const { id } = await q.add({}, retrySoon);
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toBe('charged');
    expect(runs).toBe(2);
    expect((await q.getJob(id))!.errors.map((e) => e.message)).toEqual(['card declined']);
    expect(await effectsOf(db.pool, q.name)).toEqual([{ job_id: id, attempt: 2, what: 'charge' }]);
    expect(await stepRowsOf(db.pool, q.name)).toEqual([
      { job_id: id, step: 'charge', attempt: 2, result: '"charged"' },
    ]);
  });

  it('a result that is not JSON (or too large) fails the attempt with a typed error and rolls back', async () => {
    const q = queue();
    worker(q.name, (job) =>
      pgStep(job, 'charge', db.pool, async (client) => {
        await addEffect(client, job, 'charge');
        return (job.data as { big?: boolean }).big ? 'x'.repeat(600 * 1024) : { at: new Date(0) };
      }),
    );
    const date = await q.add({}, { maxAttempts: 1 });
    const big = await q.add({ big: true }, { maxAttempts: 1 });
    await waitUntil(
      async () => (await q.getJob(date.id))?.state === 'dead' && (await q.getJob(big.id))?.state === 'dead',
      'both dead',
    );
    const [dateError] = (await q.getJob(date.id))!.errors;
    expect(dateError?.code).toBe('ERR_NOT_SERIALIZABLE');
    expect(dateError?.message).toMatch(/result of pgStep charge of job .*\.at/);
    expect((await q.getJob(big.id))!.errors.map((e) => e.code)).toEqual(['ERR_PAYLOAD_TOO_LARGE']);
    expect(await effectsOf(db.pool, q.name)).toEqual([]);
    expect(await stepRowsOf(db.pool, q.name)).toEqual([]);
  });

  it('two attempts at once (a stale worker and a new one): the second waits on the first, one effect', async () => {
    const q = queue();
    let inFn = () => {};
    const staleInFn = new Promise<void>((r) => {
      inFn = r;
    });
    let release = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let staleError: unknown;
    const stale = worker(q.name, async (job) => {
      try {
        return await pgStep(job, 'charge', db.pool, async (client) => {
          await addEffect(client, job, 'stale');
          inFn();
          await gate; // past its lease: the job is cancelled and retried meanwhile
          return 'charged by the stale worker';
        });
      } catch (err) {
        staleError = err;
        throw err;
      }
    });
    const { id } = await q.add({});
    await staleInFn;
    // The stale worker loses its lease (cancel), and the job runs again elsewhere (retry).
    await q.cancel(id);
    await stale.pause();
    await q.retry(id);
    let freshRuns = 0;
    worker(q.name, (job) =>
      pgStep(job, 'charge', db.pool, async (client) => {
        freshRuns++;
        await addEffect(client, job, 'fresh');
        return 'charged by the fresh worker';
      }),
    );
    // The new attempt's insert of the step's record waits on the stale transaction's row.
    await waitUntil(async () => {
      const r = await db.pool.query(
        `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO "surety_steps"%'`,
      );
      return r.rowCount === 1;
    }, 'the fresh attempt waiting on the stale one');
    expect(freshRuns).toBe(0);
    release();
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toBe('charged by the fresh worker');
    // The stale worker saw its lease gone before COMMIT and rolled back.
    expect(staleError).toBeInstanceOf(LeaseExpiredError);
    expect((staleError as Error).message).toMatch(
      /lost while pgStep charge ran; its transaction was rolled back/,
    );
    expect(freshRuns).toBe(1);
    expect(await effectsOf(db.pool, q.name)).toEqual([{ job_id: id, attempt: 2, what: 'fresh' }]);
    expect(await stepRowsOf(db.pool, q.name)).toEqual([
      { job_id: id, step: 'charge', attempt: 2, result: '"charged by the fresh worker"' },
    ]);
  });

  it('an attempt whose lease is lost gets LeaseExpiredError and opens no transaction', async () => {
    const q = queue();
    const pool = newPool(db.url); // fresh: any connection pgStep took would show in totalCount
    let release = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let heldAtStart: unknown;
    let thrown: unknown;
    let ran = false;
    worker(q.name, async (job) => {
      heldAtStart = await job.checkLease().then(() => 'held');
      await gate;
      try {
        await pgStep(job, 'charge', pool, async (client) => {
          ran = true;
          await addEffect(client, job, 'charge');
        });
      } catch (err) {
        thrown = err;
      }
    });
    try {
      const { id } = await q.add({});
      await waitUntil(() => heldAtStart, 'the processor checked its lease');
      await q.cancel(id);
      release();
      await waitUntil(() => thrown, 'pgStep refused');
      expect(heldAtStart).toBe('held');
      expect(thrown).toBeInstanceOf(LeaseExpiredError);
      expect(ran).toBe(false);
      expect(pool.totalCount).toBe(0);
      expect(await effectsOf(db.pool, q.name)).toEqual([]);
      expect(await stepRowsOf(db.pool, q.name)).toEqual([]);
    } finally {
      await pool.end();
    }
  });

  it('works with a PoolClient the processor holds, and leaves it to the processor', async () => {
    const q = queue();
    worker(q.name, async (job) => {
      const client = await db.pool.connect();
      try {
        const first = await pgStep(job, 'charge', client, async (c) => {
          await addEffect(c, job, 'charge');
          return 'charged';
        });
        const again = await pgStep(job, 'charge', client, () => 'not run');
        const { rows } = await client.query('SELECT 1 AS still');
        return { first, again, still: rows[0].still };
      } finally {
        client.release(); // throws if pgStep had released it
      }
    });
    const { id } = await q.add({});
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toEqual({
      first: 'charged',
      again: 'charged',
      still: 1,
    });
    expect(await effectsOf(db.pool, q.name)).toHaveLength(1);
  });

  it('PostgreSQL restarted (kill -9) between attempts: the next attempt still gets the stored result', async () => {
    const q = queue();
    let runs = 0;
    worker(q.name, async (job) => {
      const charge = await pgStep(job, 'charge', db.pool, async (client) => {
        runs++;
        await addEffect(client, job, 'charge');
        return { attempt: job.attempt };
      });
      if (job.attempt === 1) throw new Error('failed after the charge');
      return charge;
    });
    const { id } = await q.add({}, { backoff: { type: 'fixed', delayMs: 60_000 } });
    await waitUntil(async () => (await q.getJob(id))?.state === 'delayed', 'attempt 1 failed');
    await db.server.kill();
    await db.server.start();
    await waitUntil(
      () =>
        db.pool.query('SELECT 1').then(
          () => true,
          () => false,
        ),
      'pool reconnected',
    );
    await q.promote(id);
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toEqual({ attempt: 1 });
    expect(runs).toBe(1);
    expect(await effectsOf(db.pool, q.name)).toEqual([{ job_id: id, attempt: 1, what: 'charge' }]);
  });

  it('in a sandbox too: the stored result comes back on retry, and a lost lease is refused', async () => {
    await db.pool.query('CREATE TABLE IF NOT EXISTS notes (queue text, job_id text, note text)');
    const q = queue();
    const module = new URL('../fixtures/sandbox/pg-step.mjs', import.meta.url).pathname;
    worker(q.name, module);
    const retried = await q.add({ pgUrl: db.url, mode: 'retry' }, retrySoon);
    expect(await q.waitFor(retried.id, { timeoutMs: 15_000 })).toEqual({ attempt: 1 });
    expect(await effectsOf(db.pool, q.name)).toEqual([
      { job_id: retried.id, attempt: 1, what: 'charged in a sandbox' },
    ]);

    const lost = await q.add({ pgUrl: db.url, mode: 'lost' });
    await waitUntil(async () => (await q.getJob(lost.id))?.state === 'active', 'lost running');
    await q.cancel(lost.id);
    const note = await waitUntil(async () => {
      const r = await db.pool.query('SELECT note FROM notes WHERE job_id = $1 AND queue = $2', [
        lost.id,
        q.name,
      ]);
      return r.rows[0]?.note as string | undefined;
    }, 'the sandbox noted what pgStep threw');
    expect(note).toBe('true ERR_LEASE_EXPIRED');
    expect((await effectsOf(db.pool, q.name)).filter((e) => e.job_id === lost.id)).toEqual([]);
  });

  it('refuses a bad step name, table or option before anything runs', async () => {
    const q = queue();
    const refused: unknown[] = [];
    const fn = () => 'never';
    worker(q.name, async (job) => {
      for (const call of [
        () => pgStep(job, '', db.pool, fn),
        () => pgStep(job, '~sleep:0', db.pool, fn),
        () => pgStep(job, 'a\u0000b', db.pool, fn),
        () => pgStep(job, 'a\uD800', db.pool, fn),
        () => pgStep(job, 'ok', db.pool, fn, { table: 'steps; DROP TABLE effects' }),
        () => pgStep(job, 'ok', db.pool, fn, { tabel: 'x' } as never),
        () => pgStep(job, 'ok', db.pool, 'fn' as never),
      ]) {
        refused.push(await call().catch((err: unknown) => err));
      }
    });
    const { id } = await q.add({});
    await q.waitFor(id, { timeoutMs: 10_000 });
    expect(refused).toHaveLength(7);
    for (const err of refused) expect(err).toBeInstanceOf(ValidationError);
    expect(String(refused[4])).toMatch(/table must be a name of letters.*got "steps; DROP TABLE effects"/);
    expect(String(refused[5])).toMatch(/unknown option "tabel"; allowed: table/);
    await expect(pruneSteps(db.pool, { olderThanMs: -1 })).rejects.toThrow(
      /olderThanMs must be an integer >= 0, got -1/,
    );
    for (const table of ['1steps', 'surety_schema', 'a.b.c', 'x'.repeat(51)])
      await expect(migrateSteps(db.pool, { table })).rejects.toBeInstanceOf(ValidationError);
  });
});

describe('the steps table', () => {
  it('migrateSteps is idempotent, safe to run at once from several places, and versioned', async () => {
    const table = 'billing_steps';
    await Promise.all([1, 2, 3].map(() => migrateSteps(db.pool, { table })));
    await migrateSteps(db.pool, { table });
    const versions = await db.pool.query('SELECT component, version FROM surety_schema ORDER BY component');
    expect(versions.rows).toEqual([
      { component: 'steps', version: 1 },
      { component: 'steps:billing_steps', version: 1 },
    ]);
    const columns = await db.pool.query(
      `SELECT column_name FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position`,
      [table],
    );
    expect(columns.rows.map((r) => r.column_name)).toEqual([
      'queue',
      'job_id',
      'job_created_at',
      'step',
      'attempt',
      'result',
      'created_at',
    ]);

    await db.pool.query(`UPDATE surety_schema SET version = 99 WHERE component = 'steps:billing_steps'`);
    const newer = await migrateSteps(db.pool, { table }).catch((err: unknown) => err);
    expect(newer).toBeInstanceOf(PostgresSchemaError);
    expect((newer as PostgresSchemaError).code).toBe('ERR_POSTGRES_SCHEMA');
    expect(String(newer)).toMatch(/schema version 99, made by a newer Surety; this one knows up to 1/);
  });

  it('a step on a table that was never migrated fails with PostgresSchemaError, and fn does not run', async () => {
    const q = queue();
    let ran = false;
    worker(q.name, (job) =>
      pgStep(
        job,
        'charge',
        db.pool,
        () => {
          ran = true;
        },
        { table: 'never_migrated' },
      ),
    );
    const { id } = await q.add({}, { maxAttempts: 1 });
    await waitUntil(async () => (await q.getJob(id))?.state === 'dead', 'dead');
    const [error] = (await q.getJob(id))!.errors;
    expect(error?.code).toBe('ERR_POSTGRES_SCHEMA');
    expect(error?.message).toMatch(
      /table never_migrated does not exist: create it with migrateSteps\(pool, \{ table: 'never_migrated' \}\)/,
    );
    expect(ran).toBe(false);
  });

  it('pruneSteps deletes the records older than olderThanMs, in chunks, and keeps the newer ones', async () => {
    const table = 'prune_steps';
    await migrateSteps(db.pool, { table });
    const q = queue();
    worker(q.name, (job) => pgStep(job, 'charge', db.pool, () => `charged ${job.id}`, { table }));
    const [old, recent] = await q.addBulk([{ data: {} }, { data: {} }]);
    await q.waitFor(old!.id, { timeoutMs: 10_000 });
    await q.waitFor(recent!.id, { timeoutMs: 10_000 });
    await db.pool.query(`UPDATE ${table} SET created_at = now() - interval '2 days' WHERE job_id = $1`, [
      old!.id,
    ]);
    // 25 000 more old records: three chunks of at most 10 000.
    await db.pool.query(
      `INSERT INTO ${table} (queue, job_id, job_created_at, step, attempt, created_at)
       SELECT 'bulk', g::text, 0, 'charge', 1, now() - interval '2 days' FROM generate_series(1, 25000) g`,
    );
    expect(await pruneSteps(db.pool, { olderThanMs: 86_400_000, table })).toBe(25_001);
    const left = await db.pool.query(`SELECT queue, job_id FROM ${table}`);
    expect(left.rows).toEqual([{ queue: q.name, job_id: recent!.id }]);
    expect(await pruneSteps(db.pool, { olderThanMs: 86_400_000, table })).toBe(0);
    expect(await pruneSteps(db.pool, { olderThanMs: 0, table })).toBe(1);
  });
});
