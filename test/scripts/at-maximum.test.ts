/**
 * Limits are part of the contract: a worker at the documented maximum concurrency and prefetch, through
 * the public API. One claim then asks for up to MAX_CONCURRENCY + MAX_PREFETCH jobs and one extend call
 * renews MAX_CONCURRENCY leases, far past the ~8 000 values Lua's unpack() takes in one call (a claim of
 * 4 000 jobs used to lose them all, and an extend of 4 000 leases renewed none).
 */
import { describe, expect, it } from 'vitest';
import { Queue, Worker } from '../../src/index.js';
import { type ArgValue, runScript, scripts } from '../../src/scripts/specs.js';
import { type QueueKeys, queueKeys } from '../../src/store/keys.js';
import { MAX_CONCURRENCY, MAX_PREFETCH } from '../../src/worker/options.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

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

// Each batch script, called once with the largest batch a worker at the maximum sends (a claim of
// MAX_CONCURRENCY + MAX_PREFETCH jobs, then outcomes and renewals for all of them), on an injected clock.
// Arguments are passed by name (names a script version does not take are ignored).
function call(
  spec: (typeof scripts)[keyof typeof scripts],
  keys: QueueKeys & { finished?: string },
  args: Record<string, ArgValue>,
  rows: Record<string, ArgValue>[] = [],
) {
  return runScript(fx.redis, spec as never, keys, args as never, rows as never);
}

describe('every batch script at the largest batch a worker sends', () => {
  it('claims, marks starts, renews, completes, fails, recovers and cleans 20 000 jobs in single calls', async () => {
    const T = 1_700_000_000_000;
    const n = MAX_CONCURRENCY + MAX_PREFETCH;
    const name = uniqueName();
    const keys = queueKeys('surety', name);
    const q = new Queue<{ i: number; pad?: string }>(name, { connection: fx.url, events: false });
    open.push(q);
    // Half the payloads are large enough to live in the annex (claim puts them back in its reply).
    for (let from = 0; from < n; from += 10_000) {
      await q.addBulk(
        Array.from({ length: 10_000 }, (_, j) => ({
          data: (from + j) % 2 ? { i: from + j, pad: 'x'.repeat(600) } : { i: from + j },
        })),
      );
    }
    const flat = (await call(scripts.claim, keys, {
      now: T,
      count: n,
      defaultLeaseMs: 1_000,
      limit: 1_000,
      rateMax: 0,
      rateWindowMs: 0,
      eventsMaxLen: 1_000,
      claimer: '',
      nonce: '',
      freeSlots: MAX_CONCURRENCY,
    })) as string[];
    const attemptsOf = (i: number) => flat[6 + i * 2 + 1]!.split('|')[2];
    expect([
      attemptsOf(0),
      attemptsOf(MAX_CONCURRENCY - 1),
      attemptsOf(MAX_CONCURRENCY),
      attemptsOf(n - 1),
    ]).toEqual(['0', '0', '0', '0']); // a claim counts nothing: the start marks do
    const claimed: { id: string; token: string }[] = [];
    for (let i = 6; i < flat.length; i += 2)
      claimed.push({ id: flat[i]!, token: flat[i + 1]!.split('|')[1]! });
    expect(flat.filter((r) => typeof r === 'string' && r.includes('x'.repeat(600))).length).toBe(n / 2);
    expect(claimed.length).toBe(n);
    expect(await call(scripts.extend, keys, { now: T + 500, defaultLeaseMs: 1_000 }, claimed)).toEqual([]);
    expect(await call(scripts.start, keys, { now: T + 550 }, claimed)).toEqual([]);
    expect((await q.getJob(claimed[n - 1]!.id))!.attempts).toBe(1);

    const [done, failed, stalled] = [
      claimed.slice(0, 10_000),
      claimed.slice(10_000, 15_000),
      claimed.slice(15_000),
    ];
    const channels = { wakeChannel: keys.wakeChannel, doneChannel: keys.doneChannel, eventsMaxLen: 1_000 };
    const refused = await call(
      scripts.complete,
      keys,
      { now: T + 600, keepCount: 0, keepAgeMs: 0, limit: 1_000, ...channels, starts: '' },
      done.map((c) => ({ ...c, result: '"ok"' })),
    );
    expect(refused).toEqual([]);
    const outcomes = (await call(
      scripts.fail,
      keys,
      { now: T + 700, defaultMaxAttempts: 3, keepCount: n, keepAgeMs: 86_400_000, limit: 1_000, ...channels },
      failed.map((c) => ({ ...c, retryDelayMs: -1, error: '{"name":"Error","message":"no"}' })),
    )) as string[];
    expect(outcomes.filter((_, i) => i % 2 === 1)).toEqual(failed.map(() => 'dead'));
    const [requeued, dead] = (await call(scripts.recover, keys, {
      now: T + 2_000,
      limit: n,
      defaultMaxAttempts: 3,
      keepCount: n,
      keepAgeMs: 86_400_000,
      ...channels,
    })) as [string[], string[]];
    expect([requeued.length, dead.length]).toEqual([stalled.length, 0]);
    const [cleaned] = (await call(
      scripts.clean,
      { ...keys, finished: keys.dead },
      { cutoff: T + 700, limit: n, state: 'dead', eventsMaxLen: 0 },
    )) as [number];
    expect(cleaned).toBe(failed.length);
    expect(await q.counts()).toMatchObject({ waiting: stalled.length, active: 0, completed: 0, dead: 0 });
    // Nothing of the deleted jobs is left behind: records and annex fields (errors, payloads) are gone.
    expect(await fx.redis.hlen(keys.jobs)).toBe(stalled.length);
    const annex = await fx.redis.hkeys(keys.annex);
    const live = new Set(stalled.map((c) => c.id));
    expect(annex.every((f) => live.has(f.split('\u0001')[0]!))).toBe(true);
  }, 60_000);
});
