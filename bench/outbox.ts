/**
 * The outbox stage of `npm run bench` (`--only outbox`, Surety alone): the Postgres transactional
 * outbox (docs/postgres.md, src/postgres/) on a private PostgreSQL (test/helpers/postgres-server.ts:
 * initdb in a temp dir, a free loopback port, fsync off) next to the harness's private redis-server.
 * Three measurements, in this process:
 *
 * - throughput (after a warm-up round of 2 000 jobs each way, not counted): N jobs committed to the
 *   outbox (outbox.addBulk, transactions of 100), then one relay (batch 500, the default) started on
 *   the full outbox and timed from its start to the progress event that reaches N (the last batch
 *   deleted from the outbox and committed); the same with two relays at once; against queue.addBulk
 *   of the same N jobs in awaited chunks of 500 (the relay's batch), once without ids (Redis makes
 *   them) and once with the ids the relay's jobs carry (a UUID each, as outbox.add gives: the same
 *   jobs, like for like). The four are interleaved, the starting one rotating each run; Redis is
 *   flushed before each.
 * - latency: one relay idle (LISTEN up), then single-job transactions committed one at a time (the
 *   next one 5 ms after the previous job was seen): from COMMIT's return to the job's `added` event read
 *   from the queue's event stream (queue.events(): a blocking XREAD on its own connection, so the event
 *   arrives with the reply to the script that added the job; no polling). p50/p99/max, and the relay's
 *   batch time (its progress events). Twice: on the fresh table, before the throughput rounds, and
 *   after them (their rows deleted, the dead tuples left to autovacuum, as after a burst in production),
 *   and once more after a VACUUM of the outbox table.
 * - transaction cost: on one held connection, BEGIN; INSERT of an app row; COMMIT, alternating with
 *   the same plus outbox.add of one job: p50 and mean of each and the difference; once with no relay
 *   running (the rows accumulate: the add's own cost) and once with a relay running and relaying each
 *   job as it commits (production, the relay's work on the same 2 cores included).
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import pg from 'pg';
import { Queue } from '../src/index.js';
import { createOutbox, type Outbox, type Relay } from '../src/postgres/index.js';
import { postgresBin, startPostgres } from '../test/helpers/postgres-server.js';
import { track } from './cleanup.js';
import { monoMs, sleep, withTimeout } from './clock.js';
import { flushAll } from './redis-stats.js';
import { median, summary } from './stats.js';

/** The relay's default batch: the plain addBulk goes in chunks of this size. */
const RELAY_BATCH = 500;
/** Jobs per producer transaction when the outbox is filled. */
const FILL_TX = 100;
const WAIT_MS = 180_000;

type Mode = 'addBulk' | 'addBulk + ids' | 'relay x1' | 'relay x2';
const MODES: Mode[] = ['addBulk', 'addBulk + ids', 'relay x1', 'relay x2'];

export interface OutboxThroughputRow {
  mode: Mode;
  n: number;
  jobsPerSec: number;
  /** Every run's jobs/s. */
  runs: number[];
  /** For the relay rows: committing the N jobs to the outbox (transactions of 100), jobs/s (median). */
  fillJobsPerSec?: number;
}

export interface OutboxLatency {
  /** 'fresh table' (before the throughput rounds) or 'after throughput' (their rows deleted, dead tuples left to autovacuum). */
  when: string;
  jobs: number;
  /** The relay's batches (lock, addBulk, delete, commit) during the measurement: median ms. */
  batchMsP50: number;
  p50: number;
  p99: number;
  max: number;
  mean: number;
}

export interface OutboxTxCost {
  relay: 'none' | 'running';
  pairs: number;
  plainP50: number;
  plainMean: number;
  withAddP50: number;
  withAddMean: number;
}

export interface OutboxResults {
  postgres: string;
  throughput: OutboxThroughputRow[];
  /** relay x1 / addBulk, medians. */
  ratio: number;
  /** relay x1 / addBulk + ids (the same jobs with the ids the outbox gives them), medians. */
  ratioIds: number;
  ratio2: number;
  latency: OutboxLatency[];
  txCost: OutboxTxCost[];
}

const job = (i: number) => ({ data: { i, s: 'x'.repeat(100) } });

let seq = 0;
const queueName = (tag: string) => `bench-outbox-${tag}-${++seq}`;

/**
 * queue.addBulk of the N jobs in chunks of RELAY_BATCH; `ids`: each with an id as outbox.add gives
 * one (a UUID, made before the clock starts), the same jobs as the relay moves.
 */
async function plainAddBulk(url: string, n: number, ids: boolean): Promise<number> {
  const q = new Queue(queueName('plain'), { connection: url });
  const jobs = Array.from({ length: n }, (_, i) =>
    ids ? { ...job(i), opts: { id: randomUUID() } } : job(i),
  );
  const t0 = monoMs();
  for (let i = 0; i < n; i += RELAY_BATCH) await q.addBulk(jobs.slice(i, i + RELAY_BATCH));
  const ms = monoMs() - t0;
  const waiting = (await q.counts()).waiting;
  await q.close();
  if (waiting !== n) throw new Error(`addBulk: ${waiting} jobs waiting, expected ${n}`);
  return ms;
}

/** Commits n jobs to the outbox in transactions of FILL_TX; ms. */
async function fill(outbox: Outbox, app: pg.Pool, queue: string, n: number): Promise<number> {
  const client = await app.connect();
  const t0 = monoMs();
  try {
    for (let i = 0; i < n; i += FILL_TX) {
      await client.query('BEGIN');
      await outbox.addBulk(
        client,
        queue,
        Array.from({ length: Math.min(FILL_TX, n - i) }, (_, j) => job(i + j)),
      );
      await client.query('COMMIT');
    }
  } finally {
    client.release();
  }
  return monoMs() - t0;
}

/** Starts `relays` relays on the filled outbox; ms from their start to the N-th job relayed. */
async function drain(outbox: Outbox, url: string, queue: string, n: number, relays: number): Promise<number> {
  let relayed = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => {
    done = resolve;
  });
  const errors: string[] = [];
  const t0 = monoMs();
  const started: Relay[] = [];
  for (let k = 0; k < relays; k++) {
    const r = outbox.relay({ connection: url });
    r.on('progress', (p) => {
      relayed += p.relayed;
      if (p.failed.length) errors.push(p.failed[0]!.message);
      if (relayed >= n) done();
    });
    r.on('error', (e) => errors.push(e.message));
    started.push(r);
  }
  try {
    await withTimeout(finished, WAIT_MS, `${relays} relay(s) draining ${n} jobs`);
  } finally {
    await Promise.all(started.map((r) => r.close()));
  }
  const ms = monoMs() - t0;
  if (errors.length) throw new Error(`relay: ${errors[0]}`);
  const q = new Queue(queue, { connection: url });
  const waiting = (await q.counts()).waiting;
  await q.close();
  const pending = (await outbox.counts()).pending;
  if (waiting !== n || pending !== 0)
    throw new Error(`relay: ${waiting} waiting, ${pending} pending, expected ${n}`);
  return ms;
}

async function throughput(
  h: { url: string; admin: Redis; outbox: Outbox; app: pg.Pool },
  n: number,
  runs: number,
  log: (line: string) => void,
): Promise<OutboxThroughputRow[]> {
  const ms = new Map<Mode, number[]>(MODES.map((m) => [m, []]));
  const fills: number[] = [];
  // A warm-up round first (not counted): the first relay started would otherwise pay for the JIT.
  const warm = Math.min(n, 2_000);
  await flushAll(h.admin);
  await plainAddBulk(h.url, warm, false);
  await plainAddBulk(h.url, warm, true);
  const warmQueue = queueName('warm-up');
  await fill(h.outbox, h.app, warmQueue, warm);
  await drain(h.outbox, h.url, warmQueue, warm, 1);
  for (let run = 0; run < runs; run++) {
    for (let k = 0; k < MODES.length; k++) {
      const mode = MODES[(run + k) % MODES.length]!;
      await flushAll(h.admin);
      let line: string;
      if (mode === 'addBulk' || mode === 'addBulk + ids') {
        const t = await plainAddBulk(h.url, n, mode === 'addBulk + ids');
        ms.get(mode)!.push(t);
        line = `${n} jobs in ${t.toFixed(0)} ms`;
      } else {
        const queue = queueName(mode === 'relay x1' ? 'r1' : 'r2');
        const f = await fill(h.outbox, h.app, queue, n);
        fills.push(f);
        const t = await drain(h.outbox, h.url, queue, n, mode === 'relay x1' ? 1 : 2);
        ms.get(mode)!.push(t);
        line = `outbox filled in ${f.toFixed(0)} ms (${Math.round((n / f) * 1000)} jobs/s), relayed in ${t.toFixed(0)} ms`;
      }
      log(
        `  ${mode.padEnd(9)} run ${run + 1}: ${line} = ${Math.round((n / ms.get(mode)!.at(-1)!) * 1000)} jobs/s`,
      );
    }
  }
  return MODES.map((mode) => {
    const list = ms.get(mode)!;
    return {
      mode,
      n,
      jobsPerSec: (n / median(list)) * 1000,
      runs: list.map((t) => Math.round((n / t) * 1000)),
      ...(mode.startsWith('relay') ? { fillJobsPerSec: (n / median(fills)) * 1000 } : {}),
    };
  });
}

async function latency(
  h: { url: string; admin: Redis; outbox: Outbox; app: pg.Pool },
  jobs: number,
  when: string,
  log: (line: string) => void,
): Promise<OutboxLatency> {
  await flushAll(h.admin);
  const queue = queueName('latency');
  const q = new Queue(queue, { connection: h.url });
  const relay = h.outbox.relay({ connection: h.url });
  const errors: string[] = [];
  relay.on('error', (e) => errors.push(e.message));
  const batchMs: number[] = [];
  relay.on('progress', (p) => batchMs.push(p.ms));
  const stop = new AbortController();
  const seen = new Map<string, number>();
  let waiter: { id: string; resolve: () => void } | undefined;
  const client = await h.app.connect();
  try {
    // The queue's first add creates it in Redis; its events are read from then on (a warm-up job).
    const one = async (i: number): Promise<{ id: string; committedAt: number }> => {
      await client.query('BEGIN');
      const { id } = await h.outbox.add(client, queue, { i, s: 'x'.repeat(100) });
      await client.query('COMMIT');
      return { id, committedAt: monoMs() };
    };
    const deadline = monoMs() + 10_000;
    while (!relay.stats().listening) {
      if (monoMs() > deadline) throw new Error('the relay is not listening after 10 s');
      await sleep(5);
    }
    const warm = await one(-1);
    while ((await q.getJob(warm.id)) === null) {
      if (monoMs() > deadline) throw new Error('the warm-up job did not reach Redis in 10 s');
      await sleep(5);
    }
    const reader = (async () => {
      for await (const e of q.events({ from: '$', signal: stop.signal })) {
        if (e.event !== 'added') continue;
        seen.set(e.jobId, monoMs());
        if (waiter?.id === e.jobId) waiter.resolve();
      }
    })().catch(() => {});
    // The reader's XREAD must be blocking before the first measured commit: probe jobs until one's
    // event is read (one relayed before the XREAD started from '$' is never seen; try another).
    for (let probe = -2, seenProbe = false; !seenProbe; probe--) {
      const { id } = await one(probe);
      const until = monoMs() + 500;
      while (!seen.has(id) && monoMs() < until) await sleep(5);
      seenProbe = seen.has(id);
      if (!seenProbe && monoMs() > deadline + 10_000) throw new Error('no added event read');
    }
    const samples: number[] = [];
    batchMs.length = 0;
    for (let i = 0; i < jobs; i++) {
      const { id, committedAt } = await one(i);
      if (!seen.has(id)) {
        await withTimeout(
          new Promise<void>((resolve) => {
            waiter = { id, resolve };
            if (seen.has(id)) resolve();
          }),
          WAIT_MS,
          `job ${id} in Redis`,
        );
      }
      samples.push(seen.get(id)! - committedAt);
      await sleep(5);
    }
    stop.abort();
    await reader;
    if (errors.length) log(`  relay errors during the latency run: ${errors.join('; ')}`);
    const s = summary(samples);
    return {
      when,
      jobs,
      batchMsP50: median(batchMs),
      ...s,
      mean: samples.reduce((a, b) => a + b, 0) / samples.length,
    };
  } finally {
    stop.abort();
    client.release();
    await relay.close();
    await q.close();
  }
}

async function txCost(
  h: { url: string; admin: Redis; outbox: Outbox; app: pg.Pool },
  pairs: number,
  withRelay: boolean,
): Promise<OutboxTxCost> {
  await flushAll(h.admin);
  const queue = queueName('tx');
  const relay = withRelay ? h.outbox.relay({ connection: h.url }) : undefined;
  relay?.on('error', () => {});
  const client = await h.app.connect();
  const plain: number[] = [];
  const withAdd: number[] = [];
  try {
    const tx = async (i: number, add: boolean) => {
      const t0 = monoMs();
      await client.query('BEGIN');
      await client.query('INSERT INTO bench_orders (n, note) VALUES ($1, $2)', [i, 'x'.repeat(100)]);
      if (add) await h.outbox.add(client, queue, { i, s: 'x'.repeat(100) });
      await client.query('COMMIT');
      return monoMs() - t0;
    };
    // Warm-up (statements planned, connection warm), not counted.
    for (let i = 0; i < 50; i++) await tx(i, i % 2 === 0);
    for (let i = 0; i < pairs; i++) {
      // Alternating, the order flipping each pair, so drift on a shared machine hits both alike.
      if (i % 2 === 0) {
        plain.push(await tx(i, false));
        withAdd.push(await tx(i, true));
      } else {
        withAdd.push(await tx(i, true));
        plain.push(await tx(i, false));
      }
    }
  } finally {
    client.release();
    await relay?.close();
  }
  // Whatever a relay did not take: empty the outbox for what comes next.
  await h.app.query('TRUNCATE bench_orders');
  await h.app.query(`DELETE FROM ${h.outbox.table}`);
  const mean = (l: number[]) => l.reduce((a, b) => a + b, 0) / l.length;
  return {
    relay: withRelay ? 'running' : 'none',
    pairs,
    plainP50: median(plain),
    plainMean: mean(plain),
    withAddP50: median(withAdd),
    withAddMean: mean(withAdd),
  };
}

/** Why the stage cannot run here (PostgreSQL not installed), or undefined. */
export function outboxUnavailable(): string | undefined {
  try {
    postgresBin();
    return undefined;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

/** Starts PostgreSQL, runs the three measurements, stops it again. */
export async function runOutboxBench(
  url: string,
  admin: Redis,
  opts: { n: number; runs: number; latencyJobs: number; txPairs: number },
  log: (line: string) => void,
): Promise<OutboxResults> {
  const server = await startPostgres();
  const untrack = track({
    stop: () => server.stop(),
    killSync: () => {
      // The 'exit' handler: kill -9 of the postmaster (its backends follow); the temp dir stays.
      void server.kill();
    },
  });
  const app = new pg.Pool({ connectionString: server.url, max: 10 });
  const relayPool = new pg.Pool({ connectionString: server.url, max: 10 });
  app.on('error', () => {});
  relayPool.on('error', () => {});
  try {
    const outbox = createOutbox({ pool: relayPool, table: 'bench_outbox' });
    await outbox.migrate();
    await app.query(
      'CREATE TABLE bench_orders (id bigserial PRIMARY KEY, n int NOT NULL, note text NOT NULL)',
    );
    const postgres = (await app.query<{ v: string }>("SELECT current_setting('server_version') AS v"))
      .rows[0]!.v;
    log(
      `  PostgreSQL ${postgres}, private instance (fsync off, as the test helper starts it), on ${server.url}`,
    );
    const h = { url, admin, outbox, app };
    const lats: OutboxLatency[] = [];
    const measureLatency = async (when: string) => {
      const lat = await latency(h, opts.latencyJobs, when, log);
      lats.push(lat);
      log(
        `  latency (${when}): ${lat.jobs} single-job transactions, commit -> added event: p50 ${lat.p50.toFixed(2)} ms, p99 ${lat.p99.toFixed(2)} ms, max ${lat.max.toFixed(2)} ms; relay batch p50 ${lat.batchMsP50} ms`,
      );
    };
    await measureLatency('fresh table');
    const rows = await throughput(h, opts.n, opts.runs, log);
    await measureLatency('after throughput');
    await app.query(`VACUUM ${outbox.table}`);
    await measureLatency('after throughput + VACUUM');
    const costs: OutboxTxCost[] = [];
    for (const withRelay of [false, true]) {
      const c = await txCost(h, opts.txPairs, withRelay);
      costs.push(c);
      log(
        `  tx cost (relay ${c.relay}): app row alone p50 ${c.plainP50.toFixed(3)} ms, with outbox.add p50 ${c.withAddP50.toFixed(3)} ms (+${(c.withAddP50 - c.plainP50).toFixed(3)})`,
      );
    }
    const jps = (m: Mode) => rows.find((r) => r.mode === m)!.jobsPerSec;
    return {
      postgres,
      throughput: rows,
      ratio: jps('relay x1') / jps('addBulk'),
      ratioIds: jps('relay x1') / jps('addBulk + ids'),
      ratio2: jps('relay x2') / jps('addBulk'),
      latency: lats,
      txCost: costs,
    };
  } finally {
    await app.end().catch(() => {});
    await relayPool.end().catch(() => {});
    untrack();
    await server.stop();
  }
}

export function renderOutboxTable(r: OutboxResults): string {
  const f = (v: number, d = 2) => v.toFixed(d);
  const jps = (m: Mode) => r.throughput.find((x) => x.mode === m)!.jobsPerSec;
  const label = (m: Mode) =>
    m === 'addBulk'
      ? `queue.addBulk, chunks of ${RELAY_BATCH}`
      : m === 'addBulk + ids'
        ? `queue.addBulk, chunks of ${RELAY_BATCH}, each job with its id (a UUID, as outbox.add gives)`
        : `${m.replace('relay x', '')} relay(s), batch ${RELAY_BATCH}`;
  const lines = [
    '| into Redis | jobs/s (median) | runs, jobs/s | ratio to addBulk | ratio to addBulk + ids | outbox fill (tx of 100), jobs/s |',
    '|---|---:|---|---:|---:|---:|',
    ...r.throughput.map(
      (x) =>
        `| ${label(x.mode)} | ${Math.round(x.jobsPerSec)} | ${x.runs.join(', ')} | ${f(x.jobsPerSec / jps('addBulk'))}x | ${f(x.jobsPerSec / jps('addBulk + ids'))}x | ${x.fillJobsPerSec ? Math.round(x.fillJobsPerSec) : ''} |`,
    ),
    '',
    `Commit -> visible in Redis (idle relay, LISTEN/NOTIFY; ${r.latency[0]?.jobs ?? 0} single-job transactions one at a time; end: the job's \`added\` event read by a blocking XREAD on the queue's event stream):`,
    '| outbox table | p50 ms | p99 ms | max ms | mean ms | relay batch p50 ms |',
    '|---|---:|---:|---:|---:|---:|',
    ...r.latency.map(
      (l) => `| ${l.when} | ${f(l.p50)} | ${f(l.p99)} | ${f(l.max)} | ${f(l.mean)} | ${l.batchMsP50} |`,
    ),
    '',
    `What outbox.add adds to a transaction (BEGIN; INSERT app row; [outbox.add;] COMMIT on one connection, alternating, ${r.txCost[0]?.pairs ?? 0} of each):`,
    '| relay | app row alone p50 / mean ms | + outbox.add p50 / mean ms | difference p50 / mean ms |',
    '|---|---:|---:|---:|',
    ...r.txCost.map(
      (c) =>
        `| ${c.relay} | ${f(c.plainP50, 3)} / ${f(c.plainMean, 3)} | ${f(c.withAddP50, 3)} / ${f(c.withAddMean, 3)} | +${f(c.withAddP50 - c.plainP50, 3)} / +${f(c.withAddMean - c.plainMean, 3)} |`,
    ),
  ];
  return lines.join('\n');
}
