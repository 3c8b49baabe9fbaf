/**
 * The Postgres promises under random faults, with real processes (docs/postgres.md, Evidence):
 *
 * 1. The outbox: three producers run random transactions side by side (an `orders` row and 1-3 jobs
 *    through outbox.add or addBulk, some with explicit ids; ~30 % rolled back; ~15 % held open a while
 *    before their end, so they commit late with older rows than younger transactions', behind the
 *    relays' batches locked ahead; half add a receipt, a job of another queue deleted as it
 *    completes, which a worker runs all along) while relay processes are killed (kill -9) and
 *    restarted, and redis-server (AOF always) and PostgreSQL are each killed and restarted. A
 *    transaction whose COMMIT failed has an unknown outcome: its `orders` row says what happened. Then
 *    one relay drains the outbox. Verdict: the jobs of every committed transaction are in Redis, once
 *    each, and a worker completes each once; every committed receipt ran, each created once (a relay
 *    killed between its add and its commit must not create again a job that ran and was deleted);
 *    no job of any other transaction is there or ran; the outbox is empty.
 * 2. pgStep: worker processes whose jobs write one `effects` row in a pgStep are killed (kill -9) at
 *    random moments and restarted. Verdict: every job completes, with exactly one `effects` row, and
 *    its result is that row's (the step's stored result).
 *
 * Seeded: the seed is printed; SURETY_PG_CHAOS_SEED=<n> replays the same plan (timing still varies).
 */
import { type ChildProcess, fork } from 'node:child_process';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { Rng } from '../../chaos/rng.js';
import { TcpProxy } from '../../chaos/tcp-proxy.js';
import { Queue, Worker } from '../../src/index.js';
import { checkout } from '../../src/postgres/checkout.js';
import { createOutbox, migrateSteps } from '../../src/postgres/index.js';
import { type PostgresServer, startPostgres } from '../helpers/postgres-server.js';
import { RedisServer } from '../helpers/redis-server.js';
import { waitUntil } from '../helpers/setup.js';

const SEED = Number(process.env.SURETY_PG_CHAOS_SEED) || Math.floor(Math.random() * 2 ** 31);
console.log(`postgres-chaos seed ${SEED} (replay: SURETY_PG_CHAOS_SEED=${SEED})`);

/** The relays' batchTimeoutMs: short, so a black hole of the network outlasts it. */
const BATCH_TIMEOUT_MS = 500;
/** The queue of the receipts: jobs a worker runs during the faults, deleted as they complete. */
const RECEIPTS = 'receipts';
const RELAY_CHILD = new URL('../fixtures/outbox-relay-child.ts', import.meta.url).pathname;
const WORKER_CHILD = new URL('../fixtures/pg-chaos-worker.ts', import.meta.url).pathname;

const ignore = () => {};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function newPool(url: string, max = 4): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => {});
  return pool;
}

/** A query that retries while Postgres is restarting (a pool may hand out a dead connection first). */
async function query<R extends pg.QueryResultRow>(
  pool: pg.Pool,
  sql: string,
  params: unknown[] = [],
): Promise<pg.QueryResult<R>> {
  for (let i = 0; ; i++) {
    try {
      return await pool.query<R>(sql, params);
    } catch (err) {
      if (i >= 50) throw err;
      await sleep(100);
    }
  }
}

/** Child processes of this file: killed (kill -9) after each test, whatever happened. */
const children = new Set<ChildProcess>();
const servers: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  children.clear();
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

function spawnChild(path: string, args: string[]): ChildProcess {
  const child = fork(path, args, {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  child.stderr?.resume();
  child.on('error', () => {});
  children.add(child);
  return child;
}

async function killChild(child: ChildProcess): Promise<void> {
  children.delete(child);
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
}

function ready(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    child.on('message', (m: { ready?: boolean }) => {
      if (m.ready) resolve();
    });
    child.once('exit', () => resolve());
  });
}

/** One logical transaction of the producer, as it ended (retried after a definite failure). */
interface Tx {
  order: string;
  /** The job ids of its last try. */
  ids: string[];
  /** committed / rolledback: as Postgres answered; unknown: its COMMIT failed (judged by the row). */
  outcome: 'committed' | 'rolledback' | 'unknown';
  /** Tries that failed before COMMIT (connection lost): certainly not committed. */
  failedTries: number;
  /** Its job in the receipts queue (id `r-<order>`), if it added one. */
  receipt: boolean;
}

describe('Postgres promises under random faults', () => {
  it('outbox: relays, redis-server and PostgreSQL killed and restarted; committed jobs reach Redis exactly once', async () => {
    const started = Date.now();
    const planRng = new Rng(SEED ^ 0x5bd1e995);
    const pgServer: PostgresServer = await startPostgres();
    servers.push(pgServer);
    const redis = await new RedisServer({ aof: true }).start();
    servers.push(redis);
    // The relays reach Redis through a proxy that can black-hole the network: a batch Redis does not
    // answer must be abandoned after batchTimeoutMs (rolled back, its rows kept) and move once it heals.
    const proxy = await TcpProxy.start({ host: '127.0.0.1', port: redis.port });
    const admin = newPool(pgServer.url, 2);
    const table = 'chaos_outbox';
    await createOutbox({ pool: admin, table }).migrate();
    await admin.query('CREATE TABLE orders (id text PRIMARY KEY)');
    await admin.end();
    const queue = 'orders';

    // Relays: two processes, each killed at a random moment after it is up, and restarted.
    const relays: { child: ChildProcess; up: Promise<void> }[] = [];
    const moved = { relayed: 0, existing: 0 };
    let relayKills = 0;
    /** Batches the relays abandoned because Redis did not answer (the black hole). */
    let batchTimeouts = 0;
    const startRelay = (i: number) => {
      const child = spawnChild(RELAY_CHILD, [
        pgServer.url,
        proxy.url,
        table,
        // Small batches too: full batches lock the next ones ahead, past the rows of open transactions.
        String(planRng.int(5, 200)),
        String(BATCH_TIMEOUT_MS),
      ]);
      child.on('message', (m: { progress?: { relayed: number; existing: number }; message?: string }) => {
        moved.relayed += m.progress?.relayed ?? 0;
        moved.existing += m.progress?.existing ?? 0;
        if (m.message?.includes('did not answer a batch')) batchTimeouts++;
      });
      relays[i] = { child, up: ready(child) };
    };
    startRelay(0);
    startRelay(1);

    // Receipts: jobs deleted as they complete, run by a worker all along. A relay killed between its
    // add and its commit leaves rows whose jobs may have run and gone when the next relay adds them
    // again: each must be created once (one createdAt per id), never again.
    const receiptRuns = new Map<string, Set<number>>();
    const receiptWorker = new Worker(
      RECEIPTS,
      (job) => {
        const seen = receiptRuns.get(job.id) ?? new Set<number>();
        seen.add(job.createdAt);
        receiptRuns.set(job.id, seen);
      },
      { connection: redis.url, concurrency: 20 },
    );
    receiptWorker.on('error', ignore);

    // The producers.
    const CHAOS_MS = 20_000;
    const PRODUCERS = 3;
    let producing = true;
    const txs: Tx[] = [];
    /** UUID job ids of tries that failed before COMMIT: never committed, never to be in Redis. */
    const ghosts: string[] = [];
    const producer = async (p: number) => {
      const rng = new Rng(SEED + p);
      const pool = newPool(pgServer.url, 4);
      for (let n = 0; producing; n++) {
        const order = `o${p}-${n}`;
        const plan = {
          jobs: rng.int(1, 3),
          bulk: rng.chance(0.5),
          explicit: Array.from({ length: 3 }, () => rng.chance(0.4)),
          rollback: rng.chance(0.3),
          holdMs: rng.chance(0.15) ? rng.int(1, 400) : 0,
          receipt: rng.chance(0.5),
        };
        let failedTries = 0;
        for (;;) {
          const ids: string[] = [];
          let phase: 'body' | 'commit' = 'body';
          let client: pg.PoolClient | undefined;
          try {
            // A connection lost while checked out: the query in flight fails, the event is not a crash
            // (checkout listens from the moment the connection is ready, before connect() resolves).
            client = await checkout(pool, ignore);
            await client.query('BEGIN');
            await client.query('INSERT INTO orders (id) VALUES ($1)', [order]);
            const outbox = createOutbox({ pool, table });
            const items = Array.from({ length: plan.jobs }, (_, k) => ({
              data: { order, k },
              ...(plan.explicit[k] ? { opts: { id: `${order}-j${k}` } } : {}),
            }));
            if (plan.bulk) {
              for (const a of await outbox.addBulk(client, queue, items)) ids.push(a.id);
            } else {
              for (const item of items) ids.push((await outbox.add(client, queue, item.data, item.opts)).id);
            }
            if (plan.receipt)
              await outbox.add(client, RECEIPTS, { order }, { id: `r-${order}`, keep: { completed: false } });
            if (plan.holdMs > 0) await sleep(plan.holdMs);
            if (plan.rollback) {
              await client.query('ROLLBACK');
              client.off('error', ignore);
              client.release();
              txs.push({ order, ids, outcome: 'rolledback', failedTries, receipt: plan.receipt });
            } else {
              phase = 'commit';
              await client.query('COMMIT');
              client.off('error', ignore);
              client.release();
              txs.push({ order, ids, outcome: 'committed', failedTries, receipt: plan.receipt });
            }
            break;
          } catch (err) {
            client?.off('error', ignore);
            client?.release(err instanceof Error ? err : true);
            if (phase === 'commit') {
              txs.push({ order, ids, outcome: 'unknown', failedTries, receipt: plan.receipt });
              break;
            }
            // Failed before COMMIT (or its ROLLBACK failed): nothing committed; try it again.
            failedTries++;
            ghosts.push(...ids.filter((id) => !id.startsWith(`${order}-`)));
            if (!producing) {
              txs.push({ order, ids: [], outcome: 'rolledback', failedTries, receipt: false });
              break;
            }
            await sleep(50);
          }
        }
        await sleep(rng.int(0, 8));
      }
      await pool.end();
    };
    const producerDone = Promise.all(Array.from({ length: PRODUCERS }, (_, p) => producer(p)));

    // Faults: relay kills all along; one or two kills of each server, one at a time.
    const relayFaults = (async () => {
      while (Date.now() - started < CHAOS_MS) {
        const i = planRng.int(0, 1);
        await relays[i]!.up;
        await sleep(planRng.int(100, 1_500));
        await killChild(relays[i]!.child);
        relayKills++;
        await sleep(planRng.int(0, 500));
        startRelay(i);
      }
    })();
    const serverPlan = [
      ...Array.from({ length: planRng.int(1, 2) }, () => 'redis' as const),
      ...Array.from({ length: planRng.int(1, 2) }, () => 'postgres' as const),
      'blackhole' as const,
    ].sort(() => planRng.next() - 0.5);
    const restarts = { redis: 0, postgres: 0, blackhole: 0 };
    const serverFaults = (async () => {
      const slot = (CHAOS_MS - 3_000) / serverPlan.length;
      for (const [i, kind] of serverPlan.entries()) {
        const at = 1_000 + i * slot + planRng.int(0, Math.floor(slot / 2));
        await sleep(Math.max(0, started + at - Date.now()));
        const down = planRng.int(200, 1_500);
        if (kind === 'blackhole') {
          // Held until a relay's batch has waited out batchTimeoutMs (relays restart all along, so
          // one may be down at first), then a while longer.
          const before = batchTimeouts;
          proxy.blackhole();
          await waitUntil(
            () => batchTimeouts > before,
            'a relay to abandon a batch in the black hole',
            15_000,
          );
          await sleep(down);
          proxy.heal();
        } else {
          if (kind === 'redis') await redis.kill();
          else await pgServer.kill();
          await sleep(down);
          if (kind === 'redis') await redis.start();
          else await pgServer.start();
        }
        restarts[kind]++;
      }
    })();
    await Promise.all([relayFaults, serverFaults]);
    producing = false;
    await producerDone;
    for (const r of relays) await killChild(r.child);
    await proxy.close();

    // Drain with one relay, faults over.
    const pool = newPool(pgServer.url, 4);
    const outbox = createOutbox({ pool, table });
    const relay = outbox.relay({ connection: redis.url, batch: 500, pollMs: 50 });
    relay.on('error', () => {});
    await waitUntil(
      async () => {
        const c = await outbox.counts().catch(() => undefined);
        return c?.pending === 0;
      },
      'the drain relay to empty the outbox',
      30_000,
    );
    await relay.close();

    // Verdicts.
    const rows = new Set((await query<{ id: string }>(pool, 'SELECT id FROM orders')).rows.map((r) => r.id));
    const expected = new Set<string>();
    const absent = new Set<string>(ghosts);
    const outcomes = { committed: 0, rolledback: 0, unknown: 0, unknownCommitted: 0, failedTries: 0 };
    for (const tx of txs) {
      outcomes[tx.outcome]++;
      outcomes.failedTries += tx.failedTries;
      const present = rows.has(tx.order);
      if (tx.outcome === 'committed') expect(present, `committed ${tx.order} has its row`).toBe(true);
      if (tx.outcome === 'rolledback') expect(present, `rolled back ${tx.order} has no row`).toBe(false);
      if (tx.outcome === 'unknown' && present) outcomes.unknownCommitted++;
      for (const id of tx.ids) (present ? expected : absent).add(id);
    }
    expect(rows.size).toBe(outcomes.committed + outcomes.unknownCommitted);
    expect(await outbox.counts()).toEqual({ pending: 0, failed: 0 });

    const q = new Queue(queue, { connection: redis.url });
    const counts = await q.counts();
    const inRedis = Object.values(counts).reduce((a, b) => a + b, 0);
    const jobs = await q.getJobs('waiting', { limit: 10_000 });
    const seen = new Map<string, number>();
    for (const j of jobs) seen.set(j.id, (seen.get(j.id) ?? 0) + 1);
    const missing = [...expected].filter((id) => !seen.has(id));
    const extra = [...seen.keys()].filter((id) => !expected.has(id));
    const doubled = [...seen].filter(([, n]) => n > 1).map(([id]) => id);
    const leaked = [...absent].filter((id) => seen.has(id));
    expect({ missing, extra, doubled, leaked }).toEqual({ missing: [], extra: [], doubled: [], leaked: [] });
    expect(inRedis).toBe(expected.size);
    // The black hole was exercised: a relay abandoned a batch Redis did not answer (and lost nothing).
    expect(batchTimeouts).toBeGreaterThan(0);

    // Receipts: every committed one ran, each created once; none of another transaction ran.
    const receiptQueue = new Queue(RECEIPTS, { connection: redis.url });
    await waitUntil(
      async () => {
        const c = await receiptQueue.counts();
        return c.waiting + c.delayed + c.active === 0;
      },
      'the receipts worker to run every receipt',
      30_000,
    );
    await receiptWorker.close();
    await receiptQueue.close();
    const receipts = new Set(txs.filter((t) => t.receipt && rows.has(t.order)).map((t) => `r-${t.order}`));
    const receiptVerdict = {
      notRun: [...receipts].filter((id) => !receiptRuns.has(id)),
      createdTwice: [...receiptRuns].filter(([, created]) => created.size > 1).map(([id]) => id),
      ranUncommitted: [...receiptRuns.keys()].filter((id) => !receipts.has(id)),
    };
    expect(receiptVerdict).toEqual({ notRun: [], createdTwice: [], ranUncommitted: [] });

    // A worker runs them: each completes, once.
    const runs = new Map<string, number>();
    const worker = new Worker(
      queue,
      (job) => {
        runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
      },
      // Every completed job kept, so the queue's counts can say each one completed.
      { connection: redis.url, concurrency: 50, retention: { completed: { maxCount: 1_000_000 } } },
    );
    await worker.start();
    await waitUntil(
      async () => (await q.counts()).completed === expected.size,
      'the worker to complete every job',
      30_000,
    );
    await worker.close();
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(runs.size).toBe(expected.size);
    await q.close();
    await pool.end();

    const stats = relay.stats();
    console.log(
      `postgres-chaos outbox seed=${SEED}: ${txs.length} transactions (${outcomes.committed} committed, ` +
        `${outcomes.rolledback} rolled back, ${outcomes.unknown} unknown of which ${outcomes.unknownCommitted} ` +
        `committed; ${outcomes.failedTries} tries failed before COMMIT and were retried), ` +
        `${expected.size} jobs in Redis once each, ${absent.size} absent as they should be, ` +
        `${receipts.size} receipts run and deleted, each created once; ` +
        `${relayKills} relay kills, ${restarts.redis} redis-server and ${restarts.postgres} PostgreSQL ` +
        `kill+restarts, ${restarts.blackhole} black hole(s) of the relays' network (${batchTimeouts} batch(es) abandoned); the relay processes moved ${moved.relayed} (${moved.existing} already in Redis), ` +
        `the drain relay ${stats.relayed} (${stats.existing} already in Redis); ` +
        `${Math.round((Date.now() - started) / 1000)} s`,
    );
  }, 90_000);

  it('pgStep: worker processes killed at random; every job completes with exactly one effect', async () => {
    const started = Date.now();
    const planRng = new Rng(SEED ^ 0x27d4eb2f);
    const pgServer = await startPostgres();
    servers.push(pgServer);
    const redis = await new RedisServer({ aof: true }).start();
    servers.push(redis);
    const pool = newPool(pgServer.url, 4);
    await migrateSteps(pool);
    await pool.query('CREATE TABLE effects (job_id text NOT NULL, attempt integer NOT NULL, pid integer)');
    const q = new Queue('steps', { connection: redis.url });
    const N = 600;
    const opts = { leaseMs: 1_000, maxAttempts: 1_000, backoff: { type: 'fixed' as const, delayMs: 0 } };
    const added = await q.addBulk(Array.from({ length: N }, (_, n) => ({ data: { n }, opts })));
    const ids = added.map((a) => a.id);

    const workers: { child: ChildProcess; up: Promise<void> }[] = [];
    let spawned = 0;
    const startWorker = (i: number) => {
      const child = spawnChild(WORKER_CHILD, [redis.url, pgServer.url, q.name, String(SEED + ++spawned)]);
      workers[i] = { child, up: ready(child) };
    };
    startWorker(0);
    startWorker(1);
    let kills = 0;
    const CHAOS_MS = 20_000;
    const done = async () => (await q.counts()).completed === N;
    // Each kill at a random moment after the worker is up: idle, inside a step, or after its commit.
    while (Date.now() - started < CHAOS_MS && !(await done())) {
      const i = planRng.int(0, 1);
      await workers[i]!.up;
      await sleep(planRng.int(300, 2_000));
      await killChild(workers[i]!.child);
      kills++;
      await sleep(planRng.int(0, 300));
      startWorker(i);
    }
    const completedDuringChaos = (await q.counts()).completed;
    await waitUntil(done, 'every job completed', 30_000);
    for (const w of workers) await killChild(w.child);

    const counts = await q.counts();
    expect(counts).toMatchObject({ completed: N, dead: 0, active: 0, waiting: 0 });
    const effects = (
      await pool.query<{ job_id: string; attempt: number; pid: number }>(
        'SELECT job_id, attempt, pid FROM effects',
      )
    ).rows;
    const perJob = new Map<string, { attempt: number; pid: number }[]>();
    for (const e of effects) perJob.set(e.job_id, [...(perJob.get(e.job_id) ?? []), e]);
    const missing = ids.filter((id) => !perJob.has(id));
    const duplicated = [...perJob].filter(([, rows]) => rows.length > 1).map(([id]) => id);
    expect({ missing, duplicated, rows: effects.length }).toEqual({ missing: [], duplicated: [], rows: N });
    const steps = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM surety_steps');
    expect(steps.rows[0]!.n).toBe(N);

    // Each job's result is its one effect's (pgStep returned the stored result on later attempts).
    let retried = 0;
    let afterStep = 0;
    for (const id of ids) {
      const info = (await q.getJob(id))!;
      const [effect] = perJob.get(id)!;
      expect(info.result, `result of ${id}`).toEqual({ pid: effect!.pid, attempt: effect!.attempt });
      if (info.attempts > 1) retried++;
      if (info.attempts > effect!.attempt) afterStep++;
    }
    await q.close();
    await pool.end();
    console.log(
      `postgres-chaos pgStep seed=${SEED}: ${N} jobs, ${kills} worker kills (${spawned} worker processes), ` +
        `${completedDuringChaos} completed during the kills; ${retried} jobs ran more than once, ` +
        `${afterStep} of them after their step had committed; ${effects.length} effect rows, one per job; ` +
        `${Math.round((Date.now() - started) / 1000)} s`,
    );
  }, 90_000);
});
