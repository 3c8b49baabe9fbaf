/**
 * The operator reads the dashboard is built on (issue 16): getJobs newest first, search by data over a
 * bounded scan, latency and throughput (queue.stats), metrics kept longer than an hour with bounded
 * memory, and serverInfo's warnings for settings that can lose acknowledged jobs.
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  type JobInfo,
  MAX_PRIORITIES_PER_CALL,
  Queue,
  serverInfo,
  ValidationError,
  Worker,
} from '../../src/index.js';
import { RedisServer } from '../helpers/redis-server.js';
import { ACL_MODE, closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

function queue(opts: { partitions?: number } = {}): Queue<{ n: number; user?: { id: number } }> {
  const q = new Queue<{ n: number; user?: { id: number } }>(uniqueName(), { connection: fx.url, ...opts });
  open.push(q);
  return q;
}

describe("getJobs(state, { order: 'desc' })", () => {
  for (const partitions of [1, 3]) {
    it(`pages every state newest first, the exact reverse of the default order (${partitions} partition(s))`, async () => {
      const q = queue({ partitions });
      await q.addBulk(Array.from({ length: 23 }, (_, n) => ({ data: { n }, opts: { id: `w${n}` } })));
      await q.addBulk(
        Array.from({ length: 7 }, (_, n) => ({
          data: { n },
          opts: { id: `d${n}`, delayMs: 60_000 + n * 1000 },
        })),
      );
      for (const state of ['waiting', 'delayed'] as const) {
        const asc = (await q.getJobs(state, { limit: 100 })).map((j) => j.id);
        const pages: string[] = [];
        for (let offset = 0; offset < asc.length; offset += 5)
          pages.push(...(await q.getJobs(state, { offset, limit: 5, order: 'desc' })).map((j) => j.id));
        expect(asc.length).toBeGreaterThan(5);
        expect(pages).toEqual([...asc].reverse());
      }
      expect((await q.getJobs('delayed', { limit: 1, order: 'desc' }))[0]!.id).toBe('d6');
      expect(await q.getJobs('waiting', { offset: 23, order: 'desc' })).toEqual([]);
    });
  }

  it('lists finished jobs newest first, and refuses an unknown order', async () => {
    const q = queue();
    for (let n = 0; n < 4; n++) await q.cancel((await q.add({ n }, { id: `x${n}` })).id);
    expect((await q.getJobs('dead', { order: 'desc' })).map((j) => j.id)).toEqual(['x3', 'x2', 'x1', 'x0']);
    await expect(q.getJobs('dead', { order: 'up' as never })).rejects.toThrow(
      /order must be 'asc' or 'desc', got "up"/,
    );
  });
});

describe("getJobs(['completed', 'waiting'])", () => {
  for (const partitions of [1, 3]) {
    it(`lists the states one after another, in the order given, and pages through them (${partitions} partition(s))`, async () => {
      const q = queue({ partitions });
      await q.addBulk(Array.from({ length: 5 }, (_, n) => ({ data: { n }, opts: { id: `w${n}` } })));
      await q.addBulk(
        Array.from({ length: 3 }, (_, n) => ({ data: { n }, opts: { id: `d${n}`, delayMs: 60_000 + n } })),
      );
      for (let n = 0; n < 4; n++) await q.cancel((await q.add({ n }, { id: `x${n}` })).id);
      const ids = async (states: Parameters<typeof q.getJobs>[0], opts = {}) =>
        (await q.getJobs(states, opts)).map((j) => j.id);
      const dead = await ids('dead');
      const waiting = await ids('waiting');
      const delayed = await ids('delayed');
      expect([dead.length, waiting.length, delayed.length]).toEqual([4, 5, 3]);
      expect(await ids(['dead', 'waiting', 'delayed'])).toEqual([...dead, ...waiting, ...delayed]);
      expect(await ids(['delayed', 'dead'])).toEqual([...delayed, ...dead]);
      // One state in a list is that state; empty states are skipped.
      expect(await ids(['waiting'])).toEqual(waiting);
      expect(await ids(['active', 'waiting', 'completed'])).toEqual(waiting);
      // Pages cross from one state into the next.
      const all = [...dead, ...waiting, ...delayed];
      const pages: string[] = [];
      for (let offset = 0; offset < all.length; offset += 5)
        pages.push(...(await ids(['dead', 'waiting', 'delayed'], { offset, limit: 5 })));
      expect(pages).toEqual(all);
      expect(await ids(['dead', 'waiting'], { offset: 3, limit: 3 })).toEqual([
        dead[3],
        waiting[0],
        waiting[1],
      ]);
      expect(await ids(['dead', 'waiting'], { offset: 9 })).toEqual([]);
      // order 'desc' applies inside each state; the states keep the order given.
      const newest = await ids(['dead', 'delayed'], { order: 'desc' });
      expect(newest).toEqual([...[...dead].reverse(), ...[...delayed].reverse()]);
    });
  }

  it('refuses an empty list, an unknown or repeated state, and a group with any state list but waiting', async () => {
    const q = queue();
    await expect(q.getJobs([])).rejects.toThrow(/getJobs needs at least one state/);
    await expect(q.getJobs(['waiting', 'gone' as never])).rejects.toThrow(
      /state must be one of .*, got "gone"/,
    );
    await expect(q.getJobs(['dead', 'dead'])).rejects.toThrow(
      /each state at most once, got \["dead","dead"\]/,
    );
    await expect(q.getJobs(['waiting', 'delayed'], { group: 'g' })).rejects.toThrow(/state waiting only/);
    await expect(q.getJobs('bogus' as never, { order: 'desc' })).rejects.toThrow(ValidationError);
    expect(await q.getJobs(['waiting'], { group: 'g' })).toEqual([]);
    expectTypeOf(q.getJobs(['completed', 'waiting'])).resolves.toEqualTypeOf<
      JobInfo<{ n: number; user?: { id: number } }, unknown>[]
    >();
  });
});

describe('queue.getCountsPerPriority()', () => {
  it('counts the waiting jobs of each priority asked for, grouped ones included, over every partition', async () => {
    const q = queue({ partitions: 3 });
    const at = (priority: number, n: number, extra = {}) =>
      Array.from({ length: n }, (_, i) => ({ data: { n: i }, opts: { priority, ...extra } }));
    await q.addBulk([
      ...at(0, 4),
      ...at(1, 3),
      ...at(-1_000_000, 2),
      ...at(1_000_000, 1),
      ...at(2, 2, { group: 'g' }),
      ...at(0, 2, { group: 'h' }),
      ...at(1, 5, { delayMs: 60_000 }), // delayed: not waiting
    ]);
    const counts = await q.getCountsPerPriority([0, 1, 2, 3, -1_000_000, 1_000_000, 1, -1]);
    expect(counts).toEqual({ 0: 6, 1: 3, 2: 2, 3: 0, [-1_000_000]: 2, 1000000: 1, [-1]: 0 });
    const sum = Object.values(counts).reduce((a, b) => a + b, 0);
    expect(sum).toBe((await q.counts()).waiting);
    expect(await q.getCountsPerPriority([])).toEqual({});
    expectTypeOf(counts).toEqualTypeOf<Record<number, number>>();
  });

  it('follows jobs as they are claimed and reprioritised', async () => {
    const q = queue();
    await q.addBulk([...Array(3)].map((_, n) => ({ data: { n }, opts: { id: `p${n}`, priority: 5 } })));
    await q.changePriority('p0', 0);
    expect(await q.getCountsPerPriority([0, 5])).toEqual({ 0: 1, 5: 2 });
    const w = new Worker(q.name, async () => {}, { connection: fx.url, concurrency: 1 });
    open.push(w);
    await waitUntil(async () => (await q.counts()).completed === 3, 'the jobs to complete');
    expect(await q.getCountsPerPriority([0, 5])).toEqual({ 0: 0, 5: 0 });
  });

  it(`refuses priorities out of range or not integers, and more than ${MAX_PRIORITIES_PER_CALL} of them`, async () => {
    const q = queue();
    const all = Array.from({ length: MAX_PRIORITIES_PER_CALL }, (_, i) => i - 500);
    expect(Object.keys(await q.getCountsPerPriority(all))).toHaveLength(MAX_PRIORITIES_PER_CALL);
    await expect(q.getCountsPerPriority([...all, 600])).rejects.toThrow(
      /priorities must be an array of at most 1000 integers from -1000000 to 1000000, got an array of 1001/,
    );
    await expect(q.getCountsPerPriority([1_000_001])).rejects.toThrow(
      /priorities\[0\] must be an integer from -1000000 to 1000000, got 1000001/,
    );
    await expect(q.getCountsPerPriority([0, 1.5])).rejects.toThrow(/priorities\[1\] must be an integer/);
    await expect(q.getCountsPerPriority('0' as never)).rejects.toThrow(ValidationError);
  });
});

describe('queue.search()', () => {
  it('finds jobs by a substring of their data or a field value, newest first', async () => {
    const q = queue();
    await q.addBulk(
      Array.from({ length: 30 }, (_, n) => ({ data: { n, user: { id: n % 3 } }, opts: { id: `j${n}` } })),
    );
    const byField = await q.search({ field: 'user.id', value: 2 });
    expect(byField.jobs.map((j) => j.id)).toEqual([
      'j29',
      'j26',
      'j23',
      'j20',
      'j17',
      'j14',
      'j11',
      'j8',
      'j5',
      'j2',
    ]);
    expect(byField).toMatchObject({ scanned: 30, more: false });
    // A string value matches the field's value as a string (what a search box sends).
    expect((await q.search({ field: 'user.id', value: '2' })).jobs).toHaveLength(10);
    expect((await q.search({ text: '"N":17' })).jobs.map((j) => j.id)).toEqual(['j17']);
    expect((await q.search({ text: 'nothing like it' })).jobs).toEqual([]);
  });

  it('scans at most `scan` jobs, in pages, and says when it stopped early', async () => {
    const q = queue();
    await q.addBulk(Array.from({ length: 450 }, (_, n) => ({ data: { n }, opts: { id: `j${n}` } })));
    // j0 is the oldest: outside the newest 300.
    const bounded = await q.search({ text: '"n":0}', scan: 300 });
    expect(bounded).toMatchObject({ jobs: [], scanned: 300, more: true });
    const whole = await q.search({ text: '"n":0}', scan: 10_000 });
    expect(whole.jobs.map((j) => j.id)).toEqual(['j0']);
    expect(whole).toMatchObject({ scanned: 450, more: false });
    expect((await q.search({ text: '"n"', limit: 500 })).jobs).toHaveLength(450);
    await expect(q.search({ text: '"n"', limit: 501 })).rejects.toThrow(
      /limit must be an integer from 1 to 500/,
    );
    const limited = await q.search({ text: '"n"', limit: 3 });
    expect(limited.jobs.map((j) => j.id)).toEqual(['j449', 'j448', 'j447']);
    expect(limited.more).toBe(true);
  });

  it('validates its options, naming the option and the value', async () => {
    const q = queue();
    await expect(q.search({})).rejects.toThrow('search needs text or field (with value)');
    await expect(q.search({ text: 'a', scan: 10_001 })).rejects.toThrow(
      /scan must be an integer from 1 to 10000, got 10001/,
    );
    await expect(q.search({ field: 'a..b', value: 1 })).rejects.toBeInstanceOf(ValidationError);
    await expect(q.search({ text: 'a', state: 'gone' as never })).rejects.toThrow(/state must be one of/);
  });
});

describe('queue.stats()', () => {
  it('reports the age of the oldest waiting job and completions per minute', async () => {
    const q = queue();
    expect((await q.stats()).oldestWaiting).toBeNull();
    const first = await q.add({ n: 1 }, { id: 'first' });
    await q.add({ n: 2 }, { group: 'tenant' });
    await q.add({ n: 3 }, { priority: 5 });
    const runAt = (await q.getJob(first.id))!.runAt;
    await waitUntil(async () => ((await q.stats()).oldestWaiting?.ageMs ?? 0) >= 20, 'the job to age');
    const s = await q.stats();
    expect(s.oldestWaiting).toMatchObject({ id: 'first', since: runAt });
    expect(s.oldestWaiting!.ageMs).toBe(s.at - runAt);
    expect(s.completedPerMinute).toBe(0);
    const w = new Worker(q.name, () => {}, { connection: fx.url });
    open.push(w);
    await waitUntil(async () => (await q.counts()).completed === 3, 'the jobs to complete');
    const after = await q.stats();
    expect(after.oldestWaiting).toBeNull();
    expect(after.completedPerMinute).toBe(3 / 5);
  });

  it("finds the oldest waiting job at the front of a group's line or among prioritised jobs", async () => {
    // The second job of each queue is added once Redis's clock has moved past the first one's runAt.
    const redisMs = async () => {
      const [sec, micro] = await fx.redis.time();
      return Number(sec) * 1000 + Math.floor(Number(micro) / 1000);
    };
    const later = async (q: Queue<{ n: number }>, id: string) => {
      const runAt = (await q.getJob(id))!.runAt;
      await waitUntil(async () => (await redisMs()) > runAt, "Redis's clock to move on");
    };
    const grouped = queue();
    const g = await grouped.add({ n: 1 }, { group: 'tenant-a' });
    await later(grouped, g.id);
    await grouped.add({ n: 2 }, { priority: 3 });
    expect((await grouped.stats()).oldestWaiting?.id).toBe(g.id);
    const prioritised = queue();
    const p = await prioritised.add({ n: 1 }, { priority: 7 });
    await later(prioritised, p.id);
    await prioritised.add({ n: 2 }, { priority: -2 });
    expect((await prioritised.stats()).oldestWaiting?.id).toBe(p.id);
  });
});

describe('metrics retention', () => {
  it('keeps counters for the configured retention and answers windows longer than an hour in wider buckets', async () => {
    const q = queue();
    const [sec] = await fx.redis.time();
    const minute = Math.floor((Number(sec) * 1000) / 60_000);
    expect((await q.metrics()).retentionMs).toBe(3_600_000);
    await q.setMetricsRetention(24 * 3_600_000);
    // Counters of 3 h and 25 h ago, as if written then; a completion now trims past the retention.
    await fx.redis.hset(q.keys.stats, 'last', minute - 180, `${minute - 180}:c`, 4, `${minute - 1500}:c`, 9);
    const w = new Worker(q.name, () => {}, { connection: fx.url });
    open.push(w);
    await q.waitFor((await q.add({ n: 1 })).id);
    const day = await q.metrics({ windowMs: 24 * 3_600_000, bucketMs: 15 * 60_000 });
    expect(day).toMatchObject({ bucketMs: 900_000, completed: 5, retentionMs: 86_400_000 });
    expect(day.buckets).toHaveLength(96);
    expect(day.buckets.reduce((n, b) => n + b.completed, 0)).toBe(5);
    expect(await fx.redis.hexists(q.keys.stats, `${minute - 1500}:c`)).toBe(0);
    // Lowering the retention deletes the older counters at once: memory follows the setting.
    await q.setMetricsRetention(3_600_000);
    expect(await fx.redis.hexists(q.keys.stats, `${minute - 180}:c`)).toBe(0);
    expect((await q.metrics({ windowMs: 7 * 24 * 3_600_000, bucketMs: 3_600_000 })).completed).toBe(1);
  });

  it('trims in bounded HDELs after a long idle time at the longest retention', async () => {
    const q = queue();
    await q.setMetricsRetention(7 * 24 * 3_600_000);
    const [sec] = await fx.redis.time();
    const minute = Math.floor((Number(sec) * 1000) / 60_000);
    // Last write 8 days ago: the whole 7-day range (30 000 fields) is deleted by the next write.
    const old = minute - 8 * 1440;
    await fx.redis.hset(q.keys.stats, 'last', old, `${old}:c`, 1, `${old - 5000}:f`, 1);
    const w = new Worker(q.name, () => {}, { connection: fx.url });
    open.push(w);
    await q.waitFor((await q.add({ n: 1 })).id);
    const fields = await fx.redis.hkeys(q.keys.stats);
    expect(fields.filter((f) => f.includes(':'))).toHaveLength(1);
  });

  it('refuses a retention or window beyond 7 days, partial minutes and too many buckets', async () => {
    const q = queue();
    await expect(q.setMetricsRetention(8 * 24 * 3_600_000)).rejects.toThrow(
      /retentionMs must be an integer from 60000 to 604800000/,
    );
    await expect(q.setMetricsRetention(90_000)).rejects.toThrow(/whole number of minutes/);
    // At the maximum: 1 440 one-minute buckets.
    expect((await q.metrics({ windowMs: 24 * 3_600_000 })).buckets).toHaveLength(1_440);
    await expect(q.metrics({ windowMs: 7 * 24 * 3_600_000 })).rejects.toThrow(
      /at most 1440 buckets, got 604800000 \/ 60000 = 10080/,
    );
  });
});

describe('serverInfo()', () => {
  it('warns that a Redis without AOF or snapshots loses every job on restart', async () => {
    const q = queue();
    const info = await serverInfo(q.client);
    expect(info).toMatchObject({ appendonly: false, maxMemoryPolicy: 'noeviction' });
    expect(info!.version).toMatch(/^\d+\.\d+/);
    expect(info!.usedMemory).toBeGreaterThan(0);
    expect(info!.connectedClients).toBeGreaterThan(0);
    // As the ACL user of docs/acl.md, CONFIG is refused: whether RDB snapshots exist is unknown.
    expect(info!.warnings.map((w) => [w.code, w.level])).toEqual(
      ACL_MODE
        ? [
            ['NO_AOF', 'danger'],
            ['CONFIG_UNREADABLE', 'notice'],
          ]
        : [['NO_PERSISTENCE', 'danger']],
    );
  });

  it('has no warning with AOF fsynced always and noeviction, and warns of eviction otherwise', async () => {
    const safe = await new RedisServer({ aof: true }).start();
    const evicting = await new RedisServer({ config: { 'maxmemory-policy': 'allkeys-lru' } }).start();
    try {
      const a = new Queue(uniqueName(), { connection: safe.url });
      const b = new Queue(uniqueName(), { connection: evicting.url, logger: { warn: () => {} } });
      open.push(a, b);
      const ok = await serverInfo(a.client);
      expect(ok).toMatchObject({ appendonly: true, appendfsync: 'always', warnings: [] });
      const bad = await serverInfo(b.client);
      expect(bad!.warnings.map((w) => w.code)).toEqual(['EVICTION', 'NO_PERSISTENCE']);
      expect(bad!.warnings[0]!.message).toMatch(/maxmemory-policy is allkeys-lru.*noeviction/);
    } finally {
      await safe.stop();
      await evicting.stop();
    }
  });
});
