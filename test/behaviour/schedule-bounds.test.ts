import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { type Job, Queue, ValidationError, Worker } from '../../src/index.js';
import { MAX_RUN_AT } from '../../src/options/job.js';
import {
  MAX_SCHEDULE_LIMIT,
  type ScheduleInfo,
  type ScheduleOptions,
} from '../../src/queue/schedule-timing.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

function queue(name: string, partitions?: number): Queue {
  const q = new Queue(name, { connection: fx.url, ...(partitions ? { partitions } : {}) });
  open.push(q);
  return q;
}

/** A worker that records the id of every job it runs; recoverIntervalMs 10 makes its repair loop race too. */
function worker(name: string, runs: string[], partitions?: number): Worker {
  const w = new Worker(
    name,
    (job: Job) => {
      runs.push(job.id);
    },
    { connection: fx.url, concurrency: 4, recoverIntervalMs: 10, ...(partitions ? { partitions } : {}) },
  );
  open.push(w);
  return w;
}

const tickOf = (id: string) => Number(id.split(':').pop());

async function redisNow(): Promise<number> {
  const [sec, usec] = await fx.redis.time();
  return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
}

/** Waits until the schedule has ended and every job of the queue has finished. */
async function untilEnded(q: Queue, key: string) {
  return waitUntil(async () => {
    const s = (await q.schedules()).find((x) => x.key === key);
    if (!s?.ended) return null;
    const c = await q.counts();
    return c.waiting + c.delayed + c.active === 0 ? { s, c } : null;
  }, `schedule ${key} ended and drained`);
}

describe('schedule bounds', () => {
  it('limit 3 with 4 workers racing on the shortest interval creates exactly 3 jobs, then ends', async () => {
    const name = uniqueName();
    const q = queue(name);
    const runs: string[] = [];
    for (let i = 0; i < 4; i++) worker(name, runs);
    await q.schedule('three', { everyMs: 100 }, { data: {}, limit: 3, catchUp: 5 });
    const { s, c } = await untilEnded(q, 'three');
    expect(runs).toHaveLength(3);
    expect(new Set(runs).size).toBe(3);
    expect(c.completed).toBe(3);
    expect(s).toMatchObject({ limit: 3, count: 3, ended: true, upcoming: [] });
    expect(s.pendingJobId).toBe([...runs].sort((a, b) => tickOf(a) - tickOf(b))[2]);
  });

  it('endAt stops production: no tick after it is created, and the schedule is listed as ended', async () => {
    const name = uniqueName();
    const q = queue(name);
    const startAt = (await redisNow()) + 1_000;
    const endAt = startAt + 350;
    const runs: string[] = [];
    worker(name, runs);
    // catchUp keeps every tick in range even if this machine is too loaded to run them on time.
    await q.schedule('window', { everyMs: 100 }, { data: {}, startAt, endAt, catchUp: 10 });
    const [listed] = await q.schedules();
    expect(listed).toMatchObject({ startAt, endAt, ended: false });
    for (const t of listed!.upcoming) expect(t).toBeLessThanOrEqual(endAt);
    const { s } = await untilEnded(q, 'window');
    const ticks = runs.map(tickOf).sort((a, b) => a - b);
    expect(ticks.at(-1)).toBe(startAt + 300);
    for (const t of ticks) expect(t).toBeLessThanOrEqual(endAt);
    for (let i = 1; i < ticks.length; i++) expect(ticks[i]! - ticks[i - 1]!).toBe(100);
    expect(s.count).toBe(runs.length);
    expect((await q.counts()).completed).toBe(runs.length);
  });

  it('startAt defers the first occurrence to startAt', async () => {
    const name = uniqueName();
    const q = queue(name);
    const startAt = (await redisNow()) + 1_500;
    // catchUp: on a loaded machine the first run can start over 100 ms late, and missed ticks
    // collapse into the next by default (startAt + 200 would come second); this test is about startAt.
    await q.schedule(
      'later',
      { everyMs: 100 },
      { data: {}, startAt: new Date(startAt), limit: 2, catchUp: 1_000 },
    );
    await q.schedule('cron', { cron: '*/1 * * * * *' }, { data: {}, startAt: startAt + 1 });
    const byKey = Object.fromEntries((await q.schedules()).map((s) => [s.key, s]));
    expect(byKey.later).toMatchObject({ nextRunAt: startAt, upcoming: [startAt + 100], count: 1 });
    // The first whole second strictly after startAt (a cron tick at startAt itself would be allowed).
    expect(byKey.cron!.nextRunAt).toBe(Math.ceil((startAt + 1) / 1000) * 1000);
    expect(await q.unschedule('cron')).toBe(true);
    const runs: string[] = [];
    worker(name, runs);
    await untilEnded(q, 'later');
    expect(runs.map(tickOf).sort((a, b) => a - b)).toEqual([startAt, startAt + 100]);
    const first = await q.getJob(runs[0]!);
    expect(first!.startedAt).toBeGreaterThanOrEqual(startAt);
  });

  it('immediately runs the first occurrence at once, then the cron continues', async () => {
    const name = uniqueName();
    const q = queue(name);
    const runs: string[] = [];
    worker(name, runs);
    const before = await redisNow();
    await q.schedule('now', { cron: '0 0 1 1 *' }, { data: {}, immediately: true });
    const after = await redisNow();
    await waitUntil(() => runs.length >= 1, 'the immediate occurrence runs');
    expect(tickOf(runs[0]!)).toBeGreaterThanOrEqual(before);
    expect(tickOf(runs[0]!)).toBeLessThanOrEqual(after);
    const s = await waitUntil(async () => {
      const [x] = await q.schedules();
      return x!.pendingJobId !== runs[0] ? x : null;
    }, 'the next occurrence');
    expect(new Date(s.nextRunAt).toISOString()).toMatch(/-01-01T00:00:00\.000Z$/);
    expect(s).toMatchObject({ immediately: true, count: 2, ended: false });
    // Upserting the same spec (as an application does at every start) does not run it again at once.
    expect(await q.schedule('now', { cron: '0 0 1 1 *' }, { data: {}, immediately: true })).toEqual({
      version: 1,
      changed: false,
    });
    // Nor does a changed spec once the schedule has produced an occurrence: it goes on with the cron.
    await q.schedule('now', { cron: '0 0 1 1 *' }, { data: { v: 2 }, immediately: true });
    const [replaced] = await q.schedules();
    expect(replaced!.nextRunAt).toBe(s.nextRunAt);
    expect(replaced!.count).toBe(1 + 1); // the discarded unstarted occurrence no longer counts
    expect(runs).toHaveLength(1);
  });

  it('immediately with startAt runs the first occurrence at startAt, and an endAt in the past creates nothing', async () => {
    const q = queue(uniqueName());
    const startAt = (await redisNow()) + 60_000;
    await q.schedule('x', { cron: '0 0 1 1 *' }, { data: {}, startAt, immediately: true });
    expect((await q.schedules())[0]).toMatchObject({ nextRunAt: startAt, count: 1 });
    const past = (await redisNow()) - 1_000;
    await q.schedule('gone', { everyMs: 100 }, { data: {}, endAt: past, immediately: true });
    const gone = (await q.schedules()).find((s) => s.key === 'gone');
    expect(gone).toMatchObject({ ended: true, count: 0, pendingJobId: '', upcoming: [] });
    expect((await q.counts()).delayed).toBe(1);
  });

  it('the bound options and listing fields are typed', () => {
    expectTypeOf<ScheduleOptions<unknown>['startAt']>().toEqualTypeOf<Date | number | undefined>();
    expectTypeOf<ScheduleOptions<unknown>['endAt']>().toEqualTypeOf<Date | number | undefined>();
    expectTypeOf<ScheduleOptions<unknown>['limit']>().toEqualTypeOf<number | undefined>();
    expectTypeOf<ScheduleOptions<unknown>['immediately']>().toEqualTypeOf<boolean | undefined>();
    expectTypeOf<ScheduleInfo['count']>().toEqualTypeOf<number>();
    expectTypeOf<ScheduleInfo['ended']>().toEqualTypeOf<boolean>();
    expectTypeOf<ScheduleInfo['endAt']>().toEqualTypeOf<number | undefined>();
  });

  it('bad bounds are ValidationErrors naming the option, and nothing is written', async () => {
    const q = queue(uniqueName());
    const t = { everyMs: 1_000 };
    const refused: [Record<string, unknown>, RegExp][] = [
      [
        { startAt: 'tomorrow' },
        /startAt must be a Date or epoch ms from 0 to 99999999999999, got "tomorrow"/,
      ],
      [{ startAt: new Date(Number.NaN) }, /startAt must be .*got Date\(invalid\)/],
      [{ endAt: -1 }, /endAt must be a Date or epoch ms/],
      [{ endAt: MAX_RUN_AT + 1 }, /endAt must be/],
      [{ startAt: 2_000, endAt: 2_000 }, /startAt must be before endAt, got startAt 2000 and endAt 2000/],
      [{ startAt: 3_000, endAt: new Date(2_000) }, /startAt must be before endAt/],
      [{ limit: 0 }, /limit must be an integer from 1 to 99999999999999, got 0/],
      [{ limit: 1.5 }, /limit must be an integer/],
      [{ limit: MAX_SCHEDULE_LIMIT + 1 }, /limit must be an integer/],
      [{ immediately: 'yes' }, /immediately must be true or false, got "yes"/],
      [{ until: 5 }, /schedule options has an unknown option/],
    ];
    for (const [bounds, message] of refused) {
      const p = q.schedule('bad', t, { data: {}, ...bounds } as never);
      await expect(p).rejects.toBeInstanceOf(ValidationError);
      await expect(p).rejects.toThrow(message);
    }
    expect(await q.schedules()).toEqual([]);
    // At the maximums: accepted.
    await q.schedule('max', t, {
      data: {},
      limit: MAX_SCHEDULE_LIMIT,
      startAt: MAX_RUN_AT - 1,
      endAt: MAX_RUN_AT,
    });
    expect((await q.schedules())[0]).toMatchObject({
      limit: MAX_SCHEDULE_LIMIT,
      nextRunAt: MAX_RUN_AT - 1,
      upcoming: [],
    });
  });

  it('the count survives a worker restart: limit 3 across two workers is still 3 jobs', async () => {
    const name = uniqueName();
    const q = queue(name);
    const runs: string[] = [];
    const first = worker(name, runs);
    await q.schedule('restart', { everyMs: 100 }, { data: {}, limit: 3 });
    await waitUntil(() => runs.length >= 1, 'a first run');
    await first.close();
    const counted = (await q.schedules())[0]!.count;
    expect(counted).toBeGreaterThanOrEqual(1);
    expect(counted).toBeLessThanOrEqual(3);
    worker(name, runs);
    await untilEnded(q, 'restart');
    expect(runs).toHaveLength(3);
    expect(new Set(runs).size).toBe(3);
  });

  it('upserting keeps the count: the same spec leaves an ended schedule ended, a higher limit resumes it', async () => {
    const name = uniqueName();
    const q = queue(name);
    const runs: string[] = [];
    worker(name, runs);
    await q.schedule('grow', { everyMs: 100 }, { data: {}, limit: 2 });
    await untilEnded(q, 'grow');
    expect(await q.schedule('grow', { everyMs: 100 }, { data: {}, limit: 2 })).toEqual({
      version: 1,
      changed: false,
    });
    expect((await q.schedules())[0]).toMatchObject({ ended: true, count: 2 });
    expect(await q.schedule('grow', { everyMs: 100 }, { data: {}, limit: 4 })).toEqual({
      version: 2,
      changed: true,
    });
    const { s } = await untilEnded(q, 'grow');
    expect(s).toMatchObject({ version: 2, count: 4, ended: true });
    expect(runs).toHaveLength(4);
    // unschedule forgets the count: scheduled again, it starts from 0.
    expect(await q.unschedule('grow')).toBe(true);
    await q.schedule('grow', { everyMs: 100 }, { data: {}, limit: 1 });
    expect((await q.schedules())[0]).toMatchObject({ version: 1, count: 1, ended: false });
  });

  it('bounds work in a partitioned queue', async () => {
    const name = uniqueName();
    const q = queue(name, 4);
    const runs: string[] = [];
    worker(name, runs, 4);
    await q.schedule('p', { everyMs: 100 }, { data: {}, limit: 2, immediately: true });
    const { s } = await untilEnded(q, 'p');
    expect(s).toMatchObject({ count: 2, ended: true });
    expect(runs).toHaveLength(2);
  });

  it('surety schedules shows the runs so far against the limit, the bounds, and ended', async () => {
    const name = uniqueName();
    const q = queue(name);
    const runs: string[] = [];
    worker(name, runs);
    await q.schedule('capped', { everyMs: 100 }, { data: {}, limit: 1 });
    await untilEnded(q, 'capped');
    await q.schedule(
      'window',
      { everyMs: 60_000 },
      { data: {}, startAt: 4_102_444_800_000, endAt: new Date('2100-01-02T00:00:00Z'), immediately: true },
    );
    const bin = fileURLToPath(new URL('../../bin/surety.js', import.meta.url));
    const env = { ...process.env, REDIS_URL: fx.url, NO_COLOR: '1' };
    const { stdout } = await promisify(execFile)(process.execPath, [bin, 'schedules', name], {
      env,
      cwd: tmpdir(),
    });
    expect(stdout).toMatch(/RUNS\s+BOUNDS/);
    expect(stdout).toMatch(/capped\s+every 100ms\s+ended\s+1\/1\s+-\s+schedule:capped:\d+/);
    expect(stdout).toMatch(
      /window\s+every 1m\s+in .+\s+1\s+from 2100-01-01T00:00:00Z until 2100-01-02T00:00:00Z immediately\s+schedule:window:4102444800000/,
    );
  });
});
