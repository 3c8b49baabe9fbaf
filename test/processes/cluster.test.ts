/**
 * Surety on a real Redis Cluster (3 masters on loopback, started by the test): plain and partitioned
 * queues, every admin call (no CROSSSLOT reachable), wake-ups and waitFor through sharded pub/sub.
 */

import { Queue as BullQueue } from 'bullmq';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Job, Queue, type QueueEvent, Worker } from '../../src/index.js';
import { importFromBullMQ } from '../../src/migrate/index.js';
import { scriptLibrary } from '../../src/scripts/functions.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { closeAfterEach, uniqueName, waitUntil } from '../helpers/setup.js';

let cluster: RedisCluster;
beforeAll(async () => {
  cluster = await new RedisCluster({ masters: 3 }).start();
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});
const open = closeAfterEach();

/** Keys per master, by asking each node for its DBSIZE (each master holds only its own slots). */
async function keysPerMaster(): Promise<number[]> {
  const masters = await cluster.masters();
  return Promise.all(
    masters.map(async (m) => {
      const c = new Redis({ port: m.port, host: m.host });
      try {
        return await c.dbsize();
      } finally {
        c.disconnect();
      }
    }),
  );
}

/** The libraries loaded on each master (FUNCTION LIST), in the masters' order. */
async function librariesPerMaster(): Promise<string[][]> {
  const masters = await cluster.masters();
  return Promise.all(
    masters.map(async (m) => {
      const c = new Redis({ port: m.port, host: m.host });
      try {
        const list = (await c.call('FUNCTION', 'LIST')) as unknown[][];
        return list.map((entry) => String(entry[1]));
      } finally {
        c.disconnect();
      }
    }),
  );
}

describe('Redis Cluster', () => {
  it('the script library is loaded on every master by the first call that misses it, and reloaded after a flush', async () => {
    const masters = await cluster.masters();
    const flush = () =>
      Promise.all(
        masters.map(async (m) => {
          const c = new Redis({ port: m.port, host: m.host });
          try {
            await c.call('FUNCTION', 'FLUSH');
          } finally {
            c.disconnect();
          }
        }),
      );
    await flush();
    const name = uniqueName('lib');
    const q = new Queue<{ n: number }>(name, { connection: cluster.url, partitions: 3 });
    open.push(q);
    await q.addBulk([{ data: { n: 1 } }, { data: { n: 2 } }, { data: { n: 3 } }, { data: { n: 4 } }]);
    const lib = scriptLibrary().name;
    expect(await librariesPerMaster()).toEqual(masters.map(() => [lib]));
    await flush();
    const added = await q.add({ n: 5 });
    expect(added.isNew).toBe(true);
    expect(await librariesPerMaster()).toEqual(masters.map(() => [lib]));
    expect((await q.counts()).waiting).toBe(5);
  });

  it('plain queues run, wake idle workers and resolve waitFor through sharded pub/sub', async () => {
    for (const connection of [cluster.url, { cluster: cluster.seeds }]) {
      const name = uniqueName();
      const q = new Queue<number, number>(name, { connection });
      const w = new Worker<number, number>(name, (job) => job.data * 2, {
        connection,
        pollIntervalMs: 60_000,
      });
      open.push(w, q);
      await w.start();
      // The worker is idle before these adds: only a wake-up message can start them (no short poll).
      const added = await q.addBulk([1, 2, 3].map((data) => ({ data })));
      expect(await Promise.all(added.map((a) => q.waitFor(a.id, { timeoutMs: 5_000 })))).toEqual([2, 4, 6]);
      const started = Date.now();
      await w.close();
      await q.close();
      expect(Date.now() - started).toBeLessThan(2_000);
    }
  });

  it('a partitioned queue spreads over every master and its admin API sees one queue', async () => {
    const name = uniqueName();
    const q = new Queue<number, number>(name, { connection: cluster.url, partitions: 6 });
    const ran: Job<number>[] = [];
    const w = new Worker<number, number>(
      name,
      (job) => {
        ran.push(job);
        if (job.data === 0 && job.attempt === 1) throw new Error('first job fails once');
        return job.data;
      },
      { connection: cluster.url, partitions: 6, concurrency: 10, pollIntervalMs: 60_000 },
    );
    open.push(w, q);
    await w.start();
    const before = await keysPerMaster();
    const added = await q.addBulk(
      Array.from({ length: 60 }, (_, i) => ({
        data: i,
        opts: { backoff: { type: 'fixed' as const, delayMs: 10 } },
      })),
    );
    const results = await Promise.all(added.map((a) => q.waitFor(a.id, { timeoutMs: 10_000 })));
    expect(results).toEqual(added.map((_, i) => i));
    expect(new Set(ran.map((j) => j.partition))).toEqual(new Set([0, 1, 2, 3, 4, 5]));
    // Every master gained keys of this queue: the load is spread, not pinned to one slot.
    const after = await keysPerMaster();
    for (const [i, n] of after.entries()) expect(n).toBeGreaterThan(before[i]!);

    // The admin API across partitions (each call would raise CROSSSLOT if it mixed slots).
    expect(await q.counts()).toMatchObject({ waiting: 0, active: 0, completed: 60, dead: 0 });
    expect(await q.getJobs('completed', { limit: 100 })).toHaveLength(60);
    expect((await q.getJob(added[0]!.id))!.attempts).toBe(2);
    expect((await q.workers()).map((x) => x.id)).toEqual([w.id]);
    // Two minutes: the completions and this read may fall on either side of a minute boundary.
    expect((await q.metrics({ windowMs: 120_000 })).completed).toBe(60);
    await q.retry(added[5]!.id);
    expect(await q.waitFor(added[5]!.id, { timeoutMs: 5_000 })).toBe(5);
    await q.pause();
    const held = await q.add(100, { delayMs: 0 });
    expect(await q.isPaused()).toBe(true);
    await q.resume();
    expect(await q.waitFor(held.id, { timeoutMs: 5_000 })).toBe(100);
    await q.schedule('tick', { everyMs: 100 }, { data: 7 });
    expect((await q.schedules()).map((s) => s.key)).toEqual(['tick']);
    const events: QueueEvent[] = [];
    const controller = new AbortController();
    for await (const e of q.events({ from: '0', signal: controller.signal })) {
      events.push(e);
      if (new Set(events.map((x) => x.partition)).size === 6) break;
    }
    expect(new Set(events.map((x) => x.partition)).size).toBe(6);
    expect(await q.unschedule('tick')).toBe(true);
    const cleaned = await q.clean('completed');
    expect(cleaned.removed).toBeGreaterThanOrEqual(61);
    expect(await q.recoverExpired()).toMatchObject({ requeued: [], dead: [] });
  });

  it('dependencies across queues work across slots and partitions (a parent dead, a parent completed)', async () => {
    const parents = new Queue<{ fail?: boolean }>(uniqueName('parents'), {
      connection: cluster.url,
      partitions: 3,
    });
    const children = new Queue(uniqueName('children'), { connection: cluster.url, partitions: 2 });
    const pw = new Worker<{ fail?: boolean }>(
      parents.name,
      (job) => {
        if (job.data.fail) throw new Error('no');
        return `p ${job.id}`;
      },
      { connection: cluster.url, partitions: 3, concurrency: 10 },
    );
    const cw = new Worker(children.name, async (job) => job.parentResults(), {
      connection: cluster.url,
      partitions: 2,
      concurrency: 10,
    });
    open.push(parents, children, pw, cw);
    const ps = await parents.addBulk(
      Array.from({ length: 6 }, (_, i) => ({
        data: { fail: i === 5 },
        // Held until every child is added (a short delay raced the children's add on a busy machine).
        opts: { delayMs: 3_600_000, maxAttempts: 1 },
      })),
    );
    const cs = await children.addBulk(
      ps.map((p) => ({ data: {}, opts: { dependsOn: [{ queue: parents.name, id: p.id }] } })),
    );
    expect(cs.map((c) => c.state)).toEqual(Array(6).fill('blocked'));
    for (const p of ps) await parents.promote(p.id);
    for (const [i, c] of cs.slice(0, 5).entries()) {
      expect(await children.waitFor(c.id, { timeoutMs: 10_000 })).toEqual({
        [`${parents.name}:${ps[i]!.id}`]: `p ${ps[i]!.id}`,
      });
    }
    await expect(children.waitFor(cs[5]!.id, { timeoutMs: 10_000 })).rejects.toMatchObject({
      code: 'ERR_JOB_DEAD',
    });
    expect((await children.getJob(cs[5]!.id))!.errors[0]).toMatchObject({ code: 'ERR_DEPENDENCY_FAILED' });
  });

  it('children, their waits and signals work across slots and partitions', async () => {
    const orders = new Queue(uniqueName('orders'), { connection: cluster.url, partitions: 3 });
    const parts = new Queue(uniqueName('parts'), { connection: cluster.url, partitions: 2 });
    const ow = new Worker(
      orders.name,
      async (job) => {
        if (job.data === 'local') return 'leaf';
        const kids = await job.addChildren<unknown>([
          ...[1, 2, 3].map((n) => ({ queue: parts.name, data: n })),
          { data: 'local' },
        ]);
        const results = await job.waitForChildren();
        const approval = await job.waitForSignal('approved');
        return {
          approval,
          results: kids.map((k) => results[k.queue === orders.name ? k.id : `${k.queue}:${k.id}`]),
        };
      },
      { connection: cluster.url, partitions: 3, concurrency: 10 },
    );
    const pw = new Worker(parts.name, (job) => Number(job.data) * 2, {
      connection: cluster.url,
      partitions: 2,
      concurrency: 10,
    });
    open.push(orders, parts, ow, pw);
    const ids = (await orders.addBulk(Array.from({ length: 4 }, () => ({ data: 'root' })))).map((a) => a.id);
    for (const id of ids) {
      await waitUntil(async () => (await orders.getJob(id))?.waitingForSignal, `order ${id} waits`);
      expect(await orders.signal(id, 'approved', id)).toMatchObject({ delivered: true, woke: true });
    }
    for (const id of ids) {
      expect(await orders.waitFor(id, { timeoutMs: 15_000 })).toEqual({
        approval: id,
        results: [2, 4, 6, 'leaf'],
      });
    }
  });

  it('accepts an ioredis Cluster client the caller owns, and leaves it open', async () => {
    const client = new Cluster(cluster.seeds, { shardedSubscribers: true });
    const name = uniqueName();
    const q = new Queue(name, { connection: client, partitions: 3 });
    const w = new Worker(name, (job) => job.id, { connection: client, partitions: 3 });
    const a = await q.add('x');
    expect(await q.waitFor(a.id, { timeoutMs: 5_000 })).toBe(a.id);
    await w.close();
    await q.close();
    await waitUntil(async () => (await client.ping()) === 'PONG', 'client still usable');
    client.disconnect();
  });

  it('importFromBullMQ moves a BullMQ queue on the Cluster (its own slot) by copy, then take, into a partitioned queue', async () => {
    const bullName = uniqueName('bull');
    const to = uniqueName('to');
    const bullClient = new Cluster(cluster.seeds, { redisOptions: { maxRetriesPerRequest: null } });
    // BullMQ on a Cluster needs a hash-tagged prefix: all its keys in one slot.
    const bq = new BullQueue(bullName, { connection: bullClient, prefix: '{bull}' });
    try {
      await bq.addBulk(Array.from({ length: 30 }, (_, n) => ({ name: 'x', data: { n } })));
      await bq.add('later', { n: 30 }, { delay: 60_000 });
      await bq.upsertJobScheduler('beat', { every: 3_600_000 }, { name: 'beat' });
      const q = new Queue<{ n: number }>(to, { connection: cluster.url, partitions: 3 });
      open.push(q);
      await q.add({ n: -1 }, { id: 'first' }); // records the partition count
      const report = await importFromBullMQ({
        connection: cluster.url,
        from: { queue: bullName, prefix: '{bull}' },
        to,
      });
      expect(report.mode).toBe('copy');
      // The scheduler's first run (due at once) moves as a waiting job; the scheduler as a schedule.
      expect(report.moved).toMatchObject({ waiting: 31, delayed: 1, total: 32 });
      expect(report.schedulers).toEqual(['beat']);
      expect(await bq.getJobCounts('waiting', 'delayed')).toEqual({ waiting: 0, delayed: 0 });
      expect(await bq.getJobSchedulersCount()).toBe(0);
      const seen = new Set<number>();
      const w = new Worker<{ n: number }>(to, (job) => void seen.add(job.data.n ?? -2), {
        connection: cluster.url,
        partitions: 3,
        concurrency: 10,
      });
      open.push(w);
      await waitUntil(() => seen.size === 32, 'every moved job and the first ran once');
      expect(await q.getJob('31')).toMatchObject({ state: 'delayed', data: { n: 30 } });
    } finally {
      await bq.close();
      bullClient.disconnect();
    }
  });
});
