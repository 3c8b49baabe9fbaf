/**
 * The outbox's guarantees across crashes, with real processes and signals: a relay killed with kill -9
 * between its Redis add and its Postgres commit, redis-server killed and restarted from its AOF, and
 * PostgreSQL killed and restarted, each while a relay works. After each, every committed job is in
 * Redis exactly once and the outbox is empty.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { Queue, Worker } from '../../src/index.js';
import { createOutbox, type Outbox, type Relay } from '../../src/postgres/index.js';
import { committed, newPool, uniqueTable, usePostgres } from '../helpers/outbox.js';
import { RedisServer } from '../helpers/redis-server.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const db = usePostgres();
const open = closeAfterEach();
const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
});

const CHILD = new URL('../fixtures/outbox-relay-child.ts', import.meta.url).pathname;
/** The child relay's Postgres application_name, to find its connections in pg_stat_activity. */
const CHILD_NAME = 'outbox-relay-child';

async function newOutbox(): Promise<Outbox> {
  const outbox = createOutbox({ pool: db.pool, table: uniqueTable() });
  await outbox.migrate();
  return outbox;
}

/** Commits `count` jobs to `queue` in transactions of `perTx`; resolves with their ids, in order. */
async function commitJobs(
  outbox: Outbox,
  queue: string,
  count: number,
  perTx: number,
  /** The first job's `n` (its data), counting on from an earlier call. */
  from = 0,
): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += perTx) {
    const n = Math.min(perTx, count - i);
    const added = await committed(db.pool, (client) =>
      outbox.addBulk(
        client,
        queue,
        Array.from({ length: n }, (_, j) => ({ data: { n: from + i + j } })),
      ),
    );
    ids.push(...added.map((a) => a.id));
  }
  return ids;
}

/** Every job of the queue (waiting: nothing works it), checked to be the committed ones, each once. */
async function expectExactlyOnce(q: Queue, ids: string[]): Promise<void> {
  const jobs = await q.getJobs('waiting', { limit: 10_000 });
  expect(jobs).toHaveLength(ids.length);
  expect(new Set(jobs.map((j) => j.id))).toEqual(new Set(ids));
  const byId = new Map(jobs.map((j) => [j.id, j]));
  ids.forEach((id, n) => {
    expect(byId.get(id)?.data).toEqual({ n });
  });
}

/** A relay process of its own (test/fixtures/outbox-relay-child.ts), its Postgres connections named. */
function startChildRelay(outbox: Outbox, batch: number): ChildProcess {
  const child = fork(
    CHILD,
    [`${db.server.url}?application_name=${CHILD_NAME}`, fx.server.url, outbox.table, String(batch)],
    { execArgv: ['--import', 'tsx'], stdio: 'pipe' },
  );
  children.push(child);
  return child;
}

/**
 * Freezes the child relay (SIGSTOP) once it is caught inside a batch, between its Redis add and its
 * commit: each of its transactions has the lock as its last statement and none has a statement running
 * (so no COMMIT can be on its way; it overlaps full batches, so two may be open), and Redis holds jobs
 * whose rows are still in the outbox (the outbox counts them until that transaction commits).
 */
async function freezeBetweenAddAndCommit(
  child: ChildProcess,
  q: Queue,
  outbox: Outbox,
  committedJobs: number,
) {
  let progressed = false;
  child.on('message', (m: { progress?: object }) => {
    if (m.progress) progressed = true;
  });
  await waitUntil(() => progressed, 'the child relay at work', 20_000);
  const inRedisPhase = async () => {
    const { rows } = await db.pool.query(
      `SELECT count(*) FILTER (WHERE locked)::int AS locked, count(*) FILTER (WHERE NOT locked)::int AS busy
       FROM (SELECT state = 'idle in transaction' AND query LIKE '%FOR UPDATE SKIP LOCKED%' AS locked
             FROM pg_stat_activity WHERE application_name = $1 AND state <> 'idle') AS a`,
      [CHILD_NAME],
    );
    return rows[0].locked >= 1 && rows[0].busy === 0;
  };
  const inRedis = async () => {
    const c = await q.counts();
    return c.waiting + c.active + c.completed + c.dead;
  };
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (Date.now() > deadline) throw new Error('the relay was never caught between its add and its commit');
    child.kill('SIGSTOP');
    const [there, inOutbox, locked] = await Promise.all([inRedis(), outbox.counts(), inRedisPhase()]);
    if (locked && there + inOutbox.pending > committedJobs) return;
    expect(inOutbox.pending).toBeGreaterThan(0); // still work left to catch it in
    child.kill('SIGCONT');
    await new Promise((r) => setImmediate(r));
  }
}

/** kill -9, then until Postgres has seen the connections close (and rolled their transactions back). */
async function killChildRelay(child: ChildProcess): Promise<void> {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
  await waitUntil(
    async () =>
      (
        await db.pool.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [
          CHILD_NAME,
        ])
      ).rows[0].n === 0,
    "the dead relay's connections gone",
  );
}

describe('outbox across crashes', () => {
  it('a relay killed with kill -9 between its Redis add and its commit: a new relay moves every job, each once', async () => {
    const outbox = await newOutbox();
    const name = uniqueName('kill');
    const q = new Queue(name, { connection: fx.url });
    open.push(q);
    const ids = await commitJobs(outbox, name, 4_000, 1_000);
    const child = startChildRelay(outbox, 100);
    await freezeBetweenAddAndCommit(child, q, outbox, ids.length);
    await killChildRelay(child);
    const left = (await outbox.counts()).pending;
    const repeated = (await q.counts()).waiting + left - ids.length;
    expect(repeated).toBeGreaterThan(0);

    const relay = outbox.relay({ connection: fx.url, batch: 500 });
    open.push(relay);
    await waitUntil(() => relay.stats().relayed === left, 'the new relay to move what was left', 20_000);
    expect(await outbox.counts()).toEqual({ pending: 0, failed: 0 });
    await expectExactlyOnce(q, ids);
    // The rows the dead relay had added were added again: Redis said they existed.
    expect(relay.stats().existing).toBe(repeated);
  });

  it('a relay killed between its add and its commit, its jobs run and deleted meanwhile: none runs twice', async () => {
    const outbox = await newOutbox();
    const name = uniqueName('gone');
    const q = new Queue(name, { connection: fx.url });
    open.push(q);
    // Deleted as they complete: when the next relay adds them again, Redis has no job of their id.
    const ids: string[] = [];
    for (let t = 0; t < 4; t++) {
      const added = await committed(db.pool, (client) =>
        outbox.addBulk(
          client,
          name,
          Array.from({ length: 500 }, (_, i) => ({
            data: { n: t * 500 + i },
            opts: { keep: { completed: false } },
          })),
        ),
      );
      ids.push(...added.map((a) => a.id));
    }
    const child = startChildRelay(outbox, 100);
    await freezeBetweenAddAndCommit(child, q, outbox, ids.length);
    const runs = new Map<string, number>();
    const worker = new Worker(
      name,
      async (job) => {
        runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
      },
      { connection: fx.url, concurrency: 20 },
    );
    open.push(worker);
    const idle = async () => {
      const c = await q.counts();
      return c.waiting + c.active + c.delayed === 0;
    };
    await waitUntil(idle, "the frozen relay's jobs run and deleted", 20_000);
    const ranBefore = runs.size;
    expect(ranBefore).toBeGreaterThan(0);
    await killChildRelay(child);
    const left = (await outbox.counts()).pending;
    // Rows whose jobs ran already are pending again: the dead relay never committed their delete.
    expect(ranBefore + left).toBeGreaterThan(ids.length);

    const relay = outbox.relay({ connection: fx.url, batch: 500 });
    open.push(relay);
    await waitUntil(() => relay.stats().relayed === left, 'the new relay to move what was left', 20_000);
    await waitUntil(async () => (await idle()) && runs.size === ids.length, 'every job run', 20_000);
    expect(await outbox.counts()).toEqual({ pending: 0, failed: 0 });
    const twice = [...runs].filter(([, n]) => n > 1).map(([id]) => id);
    expect(twice).toEqual([]);
    expect(new Set(runs.keys())).toEqual(new Set(ids));
    expect(relay.stats().existing).toBe(ranBefore + left - ids.length);
  });

  it('redis-server killed with kill -9 and restarted (AOF) while a relay works: nothing is lost', async () => {
    const redis = await new RedisServer({ aof: true }).start();
    try {
      const outbox = await newOutbox();
      const name = uniqueName('redis');
      const q = new Queue(name, { connection: redis.url });
      open.push(q);
      const relay = outbox.relay({ connection: redis.url, batch: 100, pollMs: 20 });
      open.push(relay);
      const errors: string[] = [];
      relay.on('error', (e) => errors.push(e.code));
      const first = await commitJobs(outbox, name, 2_000, 200);
      await waitUntil(() => relay.stats().relayed > 0, 'the relay at work');
      await redis.kill();
      const second = await commitJobs(outbox, name, 1_000, 200, 2_000);
      // Redis down: the relay reports it, keeps the rows pending with the error, and backs off.
      const [pending] = await waitUntil(async () => {
        const rows = await outbox.pending({ limit: 1 });
        return rows[0]?.error ? rows : null;
      }, 'a row with its error');
      expect(pending!.error!.code).toBe('ERR_CONNECTION');
      expect(errors).toContain('ERR_CONNECTION');
      await redis.start();
      await waitUntil(async () => (await outbox.counts()).pending === 0, 'the outbox to empty', 20_000);
      expect((await outbox.counts()).failed).toBe(0);
      await expectExactlyOnce(q, [...first, ...second]);
    } finally {
      await Promise.all(open.splice(0).map((c) => c.close()));
      await redis.stop();
    }
  });

  it('PostgreSQL killed with kill -9 and restarted while a relay works: nothing is lost', async () => {
    const outbox = await newOutbox();
    const name = uniqueName('pg');
    const q = new Queue(name, { connection: fx.url });
    open.push(q);
    // The relay on a pool of its own: when Postgres dies, its connections die with it.
    const pool = newPool(db.server.url, 4);
    const relay: Relay = createOutbox({ pool, table: outbox.table }).relay({
      connection: fx.url,
      batch: 100,
      // Only its LISTEN (reconnected) and its retries can find the rows added after the restart.
      pollMs: 60_000,
    });
    const errors: string[] = [];
    relay.on('error', (e) => errors.push(e.code));
    try {
      const first = await commitJobs(outbox, name, 3_000, 500);
      await waitUntil(() => relay.stats().relayed > 0, 'the relay at work');
      await db.server.kill();
      // A batch's error and the LISTEN connection's end come from two connections, in either order.
      await waitUntil(
        () => errors.includes('ERR_POSTGRES') && !relay.stats().listening,
        'the relay to notice, its LISTEN connection down too',
      );
      await db.server.start();
      // The test's own pool may hand out a dead connection first: try until one works.
      await waitUntil(
        () =>
          db.pool.query('SELECT 1').then(
            () => true,
            () => false,
          ),
        'Postgres back',
      );
      await waitUntil(() => relay.stats().listening, 'the LISTEN connection back');
      const second = await commitJobs(outbox, name, 500, 100, 3_000);
      await waitUntil(async () => (await outbox.counts()).pending === 0, 'the outbox to empty', 20_000);
      expect((await outbox.counts()).failed).toBe(0);
      await expectExactlyOnce(q, [...first, ...second]);
    } finally {
      await relay.close();
      await pool.end();
    }
  });
});
