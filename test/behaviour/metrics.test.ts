import { describe, expect, it } from 'vitest';
import { Queue, UnrecoverableError, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

describe('queue.metrics()', () => {
  it('counts completed jobs, failed attempts and dead jobs per minute, on Redis time', async () => {
    const name = uniqueName();
    const q = new Queue<{ fail?: 'once' | 'always' }>(name, { connection: fx.url });
    const w = new Worker<{ fail?: 'once' | 'always' }>(
      name,
      (job) => {
        if (job.data.fail === 'always') throw new UnrecoverableError('no');
        if (job.data.fail === 'once' && job.attempt === 1) throw new Error('flaky');
      },
      { connection: fx.url, concurrency: 5 },
    );
    open.push(q, w);
    const empty = await q.metrics({ windowMs: 300_000 });
    expect(empty).toMatchObject({ bucketMs: 60_000, completed: 0, failed: 0, dead: 0 });
    expect(empty.buckets).toHaveLength(5);
    await q.addBulk([
      ...Array.from({ length: 7 }, () => ({ data: {} })),
      { data: { fail: 'once' as const }, opts: { backoff: { type: 'fixed' as const, delayMs: 0 } } },
      { data: { fail: 'always' as const } },
    ]);
    await waitUntil(async () => {
      const c = await q.counts();
      return c.completed === 8 && c.dead === 1;
    }, 'all finished');
    const minuteNow = async () => Math.floor((Number((await fx.redis.time())[0]) * 1000) / 60_000) * 60_000;
    const before = await minuteNow();
    const m = await q.metrics();
    const after = await minuteNow();
    expect(m).toMatchObject({ completed: 8, failed: 2, dead: 1 });
    expect(m.buckets).toHaveLength(60);
    // The last bucket is the current minute (which may roll over while we read it).
    expect([before, after]).toContain(m.buckets.at(-1)!.at);
    expect(m.buckets.reduce((n, b) => n + b.completed, 0)).toBe(8);
    await expect(q.metrics({ windowMs: 10 })).rejects.toThrow(
      /windowMs must be an integer from 60000 to 604800000/,
    );
  });

  it('keeps only the last 61 minutes of counters', async () => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url });
    open.push(q);
    // Seed as if writes had happened two hours ago, then one completion now: the old minutes go.
    const [sec] = await fx.redis.time();
    const minute = Math.floor((Number(sec) * 1000) / 60_000);
    const old = minute - 120;
    await fx.redis.hset(q.keys.stats, 'last', old, `${old}:c`, 5, `${old - 30}:f`, 2);
    const w = new Worker(name, () => {}, { connection: fx.url });
    open.push(w);
    const job = await q.add({});
    await q.waitFor(job.id);
    const fields = (await fx.redis.hkeys(q.keys.stats)).sort();
    // Only the current minute's counter (the minute may have rolled over since we read it) and `last`.
    expect(fields).toHaveLength(2);
    expect(fields[1]).toBe('last');
    expect(Number(fields[0]!.split(':')[0])).toBeGreaterThanOrEqual(minute);
    expect(fields[0]).toMatch(/:c$/);
  });
});
