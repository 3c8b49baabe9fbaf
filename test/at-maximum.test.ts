/**
 * Limits are part of the contract: a worker at the documented maximum concurrency and prefetch, through
 * the public API. One claim then asks for up to MAX_CONCURRENCY + MAX_PREFETCH jobs and one extend call
 * renews MAX_CONCURRENCY leases, far past the ~8 000 values Lua's unpack() takes in one call (a claim of
 * 4 000 jobs used to lose them all, and an extend of 4 000 leases renewed none).
 */
import { describe, expect, it } from 'vitest';
import { Queue, Worker } from '../src/index.js';
import { queueKeys } from '../src/keys.js';
import { MAX_CONCURRENCY, MAX_PREFETCH } from '../src/worker/options.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from './helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

/** Adds `n` small jobs in bulks of 10 000 (addBulk's maximum). */
async function addMany(q: Queue<{ i: number }>, n: number, opts: { leaseMs?: number } = {}) {
  for (let from = 0; from < n; from += 10_000) {
    const size = Math.min(10_000, n - from);
    await q.addBulk(Array.from({ length: size }, (_, j) => ({ data: { i: from + j }, opts })));
  }
}

async function redisNow(): Promise<number> {
  const [s, us] = await fx.redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

describe('a worker at the maximum concurrency and prefetch', () => {
  for (const prefetch of ['auto', MAX_PREFETCH] as const) {
    it(`runs a backlog larger than one claim exactly once each, none lost (prefetch ${prefetch})`, async () => {
      const name = uniqueName();
      const total = MAX_CONCURRENCY + MAX_PREFETCH + 5_000;
      const q = new Queue<{ i: number }>(name, { connection: fx.url, events: false });
      open.push(q);
      await addMany(q, total);
      const runs = new Map<number, number>();
      const errors: unknown[] = [];
      let completed = 0;
      const w = new Worker<{ i: number }>(
        name,
        (job) => {
          runs.set(job.data.i, (runs.get(job.data.i) ?? 0) + 1);
        },
        {
          connection: fx.url,
          events: false,
          concurrency: MAX_CONCURRENCY,
          prefetch,
          retention: { completed: { maxCount: total } },
        },
      );
      open.push(w);
      w.on('error', (err) => errors.push(err));
      w.on('completed', () => completed++);
      await waitUntil(
        () => completed === total || errors.length > 0,
        `${total} completions (${completed} so far)`,
        40_000,
      );
      expect(errors).toEqual([]);
      const counts = await q.counts();
      expect(counts).toMatchObject({ waiting: 0, active: 0, delayed: 0, completed: total, dead: 0 });
      expect(runs.size).toBe(total);
      expect([...runs.values()].every((n) => n === 1)).toBe(true);
    }, 60_000);
  }

  it('renews every lease it holds: no job is recovered or run twice', async () => {
    const name = uniqueName();
    const keys = queueKeys('surety', name);
    const leaseMs = 3_000;
    const q = new Queue<{ i: number }>(name, { connection: fx.url, events: false });
    open.push(q);
    await addMany(q, MAX_CONCURRENCY, { leaseMs });
    const runs = new Map<number, number>();
    const errors: unknown[] = [];
    const lost: string[] = [];
    const recovered: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let completed = 0;
    const w = new Worker<{ i: number }>(
      name,
      async (job) => {
        runs.set(job.data.i, (runs.get(job.data.i) ?? 0) + 1);
        await gate;
      },
      {
        connection: fx.url,
        events: false,
        concurrency: MAX_CONCURRENCY,
        prefetch: 0,
        recoverIntervalMs: 50,
        retention: { completed: { maxCount: MAX_CONCURRENCY } },
      },
    );
    open.push(w);
    w.on('error', (err) => errors.push(err));
    w.on('leaseLost', (ids) => lost.push(...ids));
    w.on('recovered', (r) => recovered.push(...r.requeued, ...r.dead));
    w.on('completed', () => completed++);
    try {
      await waitUntil(() => runs.size === MAX_CONCURRENCY || errors.length > 0, 'every job running', 20_000);
      expect(errors).toEqual([]);
      // The deadlines the claims set. Every lease must be renewed past the latest of them, and the
      // clock must pass it, so that a lease left unrenewed would have expired and been recovered.
      const first = await fx.redis.zrangebyscore(keys.active, '-inf', '(+inf', 'WITHSCORES');
      expect(first.length / 2).toBe(MAX_CONCURRENCY);
      let latest = 0;
      for (let i = 1; i < first.length; i += 2) latest = Math.max(latest, Number(first[i]));
      await waitUntil(
        async () => {
          if ((await redisNow()) <= latest + 200) return false;
          const lowest = await fx.redis.zrangebyscore(
            keys.active,
            '-inf',
            '(+inf',
            'WITHSCORES',
            'LIMIT',
            0,
            1,
          );
          return (await fx.redis.zcard(keys.active)) === MAX_CONCURRENCY + 1 && Number(lowest[1]) > latest;
        },
        'every lease renewed past the first deadlines',
        20_000,
      );
    } finally {
      release();
    }
    await waitUntil(() => completed === MAX_CONCURRENCY, 'every job completed', 15_000);
    expect(errors).toEqual([]);
    expect(lost).toEqual([]);
    expect(recovered).toEqual([]);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect((await q.counts()).completed).toBe(MAX_CONCURRENCY);
  }, 60_000);
});
