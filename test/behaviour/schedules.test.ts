import { describe, expect, it } from 'vitest';
import { Queue, ValidationError, Worker } from '../../src/index.js';
import { nextTick } from '../../src/queue/schedule-timing.js';
import { advanceSchedule } from '../../src/queue/schedules.js';
import { occurrenceId } from '../../src/store/occurrence-id.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
function queue<D = unknown>(name: string): Queue<D> {
  const q = new Queue<D>(name, { connection: fx.url });
  open.push(q);
  return q;
}

describe('repeatable schedules', () => {
  it('an everyMs schedule runs once per tick, on time, with several workers racing', async () => {
    const name = uniqueName();
    const q = queue<{ report: string }>(name);
    const runs: { id: string; data: unknown; at: number }[] = [];
    for (let i = 0; i < 3; i++) {
      const w = new Worker<{ report: string }>(
        name,
        (job) => {
          runs.push({ id: job.id, data: job.data, at: Date.now() });
        },
        { connection: fx.url, concurrency: 5 },
      );
      open.push(w);
    }
    await q.schedule('tick', { everyMs: 150 }, { data: { report: 'daily' } });
    await waitUntil(() => runs.length >= 5, '5 runs', 10_000);
    const ids = runs.map((r) => r.id);
    expect(new Set(ids).size).toBe(ids.length);
    const ticks = ids.map((id) => Number(id.split(':').pop()));
    for (let i = 1; i < ticks.length; i++) expect(ticks[i]! - ticks[i - 1]!).toBe(150);
    for (const r of runs) expect(r.data).toEqual({ report: 'daily' });
    const jobs = await Promise.all(ids.map((id) => q.getJob(id)));
    for (const j of jobs) expect(j!.startedAt).toBeGreaterThanOrEqual(j!.runAt);
  });

  it('two schedulers racing to advance the same tick create exactly one next job', async () => {
    const name = uniqueName();
    const q = queue(name);
    await q.schedule('race', { everyMs: 60_000 }, { data: {} });
    const [s] = await q.schedules();
    const tick = s!.nextRunAt;
    const results = await Promise.all(
      Array.from({ length: 8 }, () => advanceSchedule(fx.redis, q.keys, 'race', tick)),
    );
    expect(results.filter(Boolean)).toHaveLength(1);
    expect(await q.counts()).toMatchObject({ delayed: 2 });
    const [after] = await q.schedules();
    expect(after!.pendingJobId).toBe(occurrenceId('race', tick + 60_000));
  });

  it('upserting an identical schedule changes nothing; a changed one replaces its pending occurrence', async () => {
    const q = queue(uniqueName());
    expect(await q.schedule('r', { cron: '0 9 * * 1-5', tz: 'Europe/Paris' }, { data: { a: 1 } })).toEqual({
      version: 1,
      changed: true,
    });
    expect(await q.schedule('r', { cron: '0 9 * * 1-5', tz: 'Europe/Paris' }, { data: { a: 1 } })).toEqual({
      version: 1,
      changed: false,
    });
    const [before] = await q.schedules();
    expect(await q.schedule('r', { cron: '0 10 * * 1-5', tz: 'Europe/Paris' }, { data: { a: 1 } })).toEqual({
      version: 2,
      changed: true,
    });
    const [after] = await q.schedules();
    expect(after!.pendingJobId).not.toBe(before!.pendingJobId);
    expect(await q.getJob(before!.pendingJobId)).toBeNull();
    expect((await q.counts()).delayed).toBe(1);
    expect(after).toMatchObject({
      key: 'r',
      cron: '0 10 * * 1-5',
      tz: 'Europe/Paris',
      version: 2,
      data: { a: 1 },
    });
    expect(new Date(after!.nextRunAt).getUTCMinutes()).toBe(0);
    expect(after!.upcoming).toHaveLength(3);
  });

  it('invalid cron text, time zone or key is a clear ValidationError at schedule()', async () => {
    const q = queue(uniqueName());
    await expect(q.schedule('x', { cron: '61 * * * *' }, { data: {} })).rejects.toThrow(
      /invalid cron expression "61 \* \* \* \*"/,
    );
    await expect(q.schedule('x', { cron: '* * * * *', tz: 'Mars/Olympus' }, { data: {} })).rejects.toThrow(
      /IANA time zone/,
    );
    await expect(q.schedule('bad key', { everyMs: 1_000 }, { data: {} })).rejects.toBeInstanceOf(
      ValidationError,
    );
    await expect(q.schedule('x', { everyMs: 10 }, { data: {} })).rejects.toThrow(
      /everyMs must be an integer from 100/,
    );
    await expect(q.add({}, { id: 'schedule:x:1' })).rejects.toThrow(/reserved for schedule occurrences/);
    expect(await q.schedules()).toEqual([]);
  });

  it('a zoned cron fires once a day across both DST transitions', () => {
    const spec = { cron: '30 2 * * *', tz: 'Europe/Paris' };
    const fire = (fromIso: string, n: number) => {
      const out: string[] = [];
      let t = Date.parse(fromIso);
      for (let i = 0; i < n; i++) {
        t = nextTick(spec, t);
        out.push(new Date(t).toISOString());
      }
      return out;
    };
    // Spring forward (29 March 2026: 02:00 -> 03:00): 02:30 does not exist that day; it still fires once.
    const spring = fire('2026-03-27T12:00:00Z', 4);
    expect(spring.map((s) => s.slice(0, 10))).toEqual([
      '2026-03-28',
      '2026-03-29',
      '2026-03-30',
      '2026-03-31',
    ]);
    expect(spring[0]).toBe('2026-03-28T01:30:00.000Z'); // 02:30 CET
    expect(spring[2]).toBe('2026-03-30T00:30:00.000Z'); // 02:30 CEST
    // Fall back (25 October 2026: 03:00 -> 02:00): 02:30 happens twice; it fires once.
    const fall = fire('2026-10-24T12:00:00Z', 3);
    expect(fall.map((s) => s.slice(0, 10))).toEqual(['2026-10-25', '2026-10-26', '2026-10-27']);
  });

  it('after downtime a schedule fires once for all missed ticks, or catchUp more', async () => {
    const name = uniqueName();
    const q = queue(name);
    await q.schedule('missed', { everyMs: 100 }, { data: {} });
    await q.schedule('caught', { everyMs: 100 }, { data: {}, opts: { priority: 1 } });
    await q.schedule('caught', { everyMs: 100 }, { data: {}, catchUp: 2, opts: { priority: 1 } });
    // Simulated downtime: no worker for ~6 ticks.
    await new Promise((r) => setTimeout(r, 650));
    const runs: { key: string; tick: number; createdAt: number }[] = [];
    const [sec, usec] = await fx.redis.time();
    const workerStart = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
    const w = new Worker(
      name,
      (job) => {
        const [key, tick] = job.id.split(':').slice(-2);
        runs.push({ key: key!, tick: Number(tick), createdAt: job.createdAt });
      },
      { connection: fx.url },
    );
    open.push(w);
    const of = (key: string) => runs.filter((r) => r.key === key);
    // An occurrence is created before its tick, except the missed ticks an advance catches up on: those
    // are created already due. They are told apart by that, not by the worker's start: the advance
    // reads the clock after the worker has started, and which ticks it catches up on depends on how
    // long that took (the next tick here comes about 50 ms after the worker's start).
    const caughtUp = (key: string) => of(key).filter((r) => r.tick <= r.createdAt);
    const onTime = (key: string) => of(key).filter((r) => r.tick > r.createdAt);
    // Each key's next tick after the missed ones has run: every catch-up, due before it, has run too.
    await waitUntil(
      () => onTime('missed').length >= 2 && onTime('caught').length >= 2,
      'runs after downtime',
    );
    await w.close();
    // The pending occurrence (due before the worker started) runs once for all the ticks missed...
    for (const key of ['missed', 'caught'])
      expect(
        onTime(key).filter((r) => r.tick < workerStart),
        key,
      ).toHaveLength(1);
    expect(caughtUp('missed')).toEqual([]);
    // ... or, with catchUp 2, followed by the last two ticks missed, created together by one advance.
    const extra = caughtUp('caught');
    expect(extra).toHaveLength(2);
    const [a, b] = extra.sort((x, y) => x.tick - y.tick);
    expect(a!.tick).toBeGreaterThan(onTime('caught')[0]!.tick);
    expect(b!.tick - a!.tick).toBe(100);
    expect(b!.createdAt).toBe(a!.createdAt);
    expect(b!.tick + 100).toBeGreaterThan(b!.createdAt);
  });

  it('unschedule deletes the schedule and its pending occurrence', async () => {
    const q = queue(uniqueName());
    await q.schedule('gone', { everyMs: 60_000 }, { data: {} });
    expect((await q.counts()).delayed).toBe(1);
    expect(await q.unschedule('gone')).toBe(true);
    expect(await q.unschedule('gone')).toBe(false);
    expect(await q.schedules()).toEqual([]);
    expect((await q.counts()).delayed).toBe(0);
  });

  it('a schedule whose occurrence was claimed by a worker that died is advanced by the recovery loop', async () => {
    const name = uniqueName();
    const q = queue(name);
    await q.schedule('orphan', { everyMs: 100 }, { data: {} });
    const [s] = await q.schedules();
    // Simulate a worker that claimed the occurrence and died before advancing: run it by hand.
    await fx.redis.hset(
      q.keys.jobs,
      s!.pendingJobId,
      (await fx.redis.hget(q.keys.jobs, s!.pendingJobId))!.replace(/^d/, 'c'),
    );
    await fx.redis.zrem(q.keys.delayed, s!.pendingJobId);
    const runs: string[] = [];
    const w = new Worker(
      name,
      (job) => {
        runs.push(job.id);
      },
      { connection: fx.url, recoverIntervalMs: 50 },
    );
    open.push(w);
    await waitUntil(() => runs.length >= 1, 'the next occurrence runs');
    expect(runs[0]).not.toBe(s!.pendingJobId);
  });
});
