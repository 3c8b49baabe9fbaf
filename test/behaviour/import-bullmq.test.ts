/**
 * importFromBullMQ (surety/migrate) against real BullMQ 6 queues on a private server: what moves and
 * what each job keeps, the order BullMQ would have run them in, dry runs, running again, what stays
 * in BullMQ and why, schedulers, a partitioned target, and BullMQ on another server (copy mode).
 * The live harness (producers, workers and a killed importer at once) is
 * test/processes/import-bullmq-live.test.ts.
 */
import { Queue as BullQueue, Worker as BullWorker, FlowProducer } from 'bullmq';
import { CronExpressionParser } from 'cron-parser';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ImportError, Queue, ValidationError, Worker } from '../../src/index.js';
import { importFromBullMQ } from '../../src/migrate/index.js';
import { queueKeys } from '../../src/store/keys.js';
import { startRedis } from '../helpers/redis-server.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
const bullClients: Redis[] = [];

/** BullMQ wants its own client with maxRetriesPerRequest: null. */
function bullConnection(url = fx.url): Redis {
  const c = new Redis(url, { maxRetriesPerRequest: null });
  bullClients.push(c);
  return c;
}

function bullQueue(name = uniqueName('bull'), opts: { prefix?: string; url?: string } = {}) {
  const q = new BullQueue(name, {
    connection: bullConnection(opts.url),
    ...(opts.prefix ? { prefix: opts.prefix } : {}),
  });
  open.push(q);
  return q;
}

function suretyQueue<D = unknown>(name: string, partitions?: number) {
  const q = new Queue<D>(name, { connection: fx.url, ...(partitions ? { partitions } : {}) });
  open.push(q);
  return q;
}

afterEach(() => {
  for (const c of bullClients.splice(0)) c.disconnect();
});

describe('importFromBullMQ', () => {
  it('moves waiting, prioritized, delayed and failed jobs, each keeping its id, name, data, options, due time, attempts, errors and log', async () => {
    const bq = bullQueue();
    const to = uniqueName('to');
    // A real BullMQ worker fails boom-1 (one attempt: it ends failed), logging a line first. It is
    // the only job while the worker runs.
    await bq.add('boom', { to: 'e' }, { jobId: 'boom-1', attempts: 1 });
    await failInBullMQ(bq.name, 1);
    const welcome = await bq.add('welcome', { to: 'a' });
    const digest = await bq.add(
      'digest',
      { to: 'b' },
      { priority: 3, attempts: 5, backoff: { type: 'exponential', delay: 100 } },
    );
    const later = await bq.add('later', { to: 'c' }, { delay: 3_600_000, removeOnComplete: true });
    await bq.add('fixed', { to: 'd' }, { jobId: 'custom-1', attempts: 2, backoff: 250, lifo: true });

    const report = await importFromBullMQ({ connection: fx.url, from: { queue: bq.name }, to });
    expect(report.mode).toBe('atomic');
    expect(report.moved).toEqual({ waiting: 2, paused: 0, prioritized: 1, delayed: 1, failed: 1, total: 5 });
    expect(report.kept.total).toBe(0);
    expect(report.before).toMatchObject({ waiting: 2, prioritized: 1, delayed: 1, failed: 1 });
    expect(report.after).toMatchObject({ waiting: 0, prioritized: 0, delayed: 0, failed: 0, active: 0 });
    expect(await bq.getJobCounts('waiting', 'prioritized', 'delayed', 'failed')).toEqual({
      waiting: 0,
      prioritized: 0,
      delayed: 0,
      failed: 0,
    });

    const q = suretyQueue(to);
    expect(await q.getJob(welcome.id!)).toMatchObject({
      state: 'waiting',
      name: 'welcome',
      data: { to: 'a' },
      priority: 0,
      // BullMQ's defaults: one attempt, a retry at once.
      maxAttempts: 1,
      backoff: { type: 'fixed', delayMs: 0 },
      createdAt: welcome.timestamp,
    });
    expect(await q.getJob(digest.id!)).toMatchObject({
      state: 'waiting',
      name: 'digest',
      data: { to: 'b' },
      priority: 3,
      maxAttempts: 5,
      attempts: 0,
      attemptsLeft: 5,
      backoff: { type: 'exponential', delayMs: 100 },
    });
    const delayed = await q.getJob(later.id!);
    expect(delayed).toMatchObject({
      state: 'delayed',
      name: 'later',
      keep: { completed: false, dead: true },
    });
    expect(delayed!.runAt).toBe(later.timestamp + 3_600_000);
    expect(await q.getJob('custom-1')).toMatchObject({
      maxAttempts: 2,
      lifo: true,
      backoff: { type: 'fixed', delayMs: 250 },
    });
    const dead = await q.getJob('boom-1');
    expect(dead).toMatchObject({
      state: 'dead',
      name: 'boom',
      attempts: 1,
      attemptsLeft: 0,
      logs: ['about to fail'],
    });
    expect(dead!.errors).toHaveLength(1);
    expect(dead!.errors[0]).toMatchObject({ attempt: 1, name: 'Error', message: 'kaboom' });
    expect(dead!.errors[0]!.stack).toContain('kaboom');
    expect(dead!.finishedAt).toBeGreaterThan(0);
    expect(report.droppedOptions).toEqual({});
  });

  it('a Surety worker runs the moved jobs in the order BullMQ would have: lifo first, then FIFO, then by priority', async () => {
    const bq = bullQueue();
    const to = uniqueName('to');
    for (const n of [1, 2, 3]) await bq.add('plain', { n });
    await bq.add('p2', { n: 20 }, { priority: 2 });
    await bq.add('p1', { n: 10 }, { priority: 1 });
    await bq.add('p1', { n: 11 }, { priority: 1 });
    await bq.add('lifo', { n: 0 }, { lifo: true });
    await importFromBullMQ({ connection: fx.url, from: { queue: bq.name }, to });
    const ran: number[] = [];
    const w = new Worker<{ n: number }>(to, (job) => void ran.push(job.data.n), {
      connection: fx.url,
      concurrency: 1,
      prefetch: 0,
    });
    open.push(w);
    await waitUntil(() => ran.length === 7, 'all seven ran');
    expect(ran).toEqual([0, 1, 2, 3, 10, 11, 20]);
  });

  it('a dry run reports what would move, and moves nothing', async () => {
    const bq = bullQueue();
    const to = uniqueName('to');
    await bq.add('a', { n: 1 });
    await bq.add('b', { n: 2 }, { delay: 60_000, deduplication: { id: 'k' } });
    await bq.upsertJobScheduler('tick', { every: 60_000 }, { name: 'tick', data: { t: 1 } });
    const before = await bq.getJobCounts();
    const report = await importFromBullMQ({ connection: fx.url, from: { queue: bq.name }, to, dryRun: true });
    expect(report.dryRun).toBe(true);
    // The scheduler's first occurrence (due now: BullMQ runs `every` at once) is a waiting job.
    expect(report.moved).toMatchObject({ waiting: 2, delayed: 1, total: 3 });
    expect(report.schedulers).toEqual(['tick']);
    expect(report.droppedOptions).toEqual({ deduplication: 1 });
    expect(await bq.getJobCounts()).toEqual(before);
    expect(await bq.getJobSchedulersCount()).toBe(1);
    expect(await fx.redis.exists(queueKeys('surety', to).jobs)).toBe(0);
    expect(await suretyQueue(to).schedules()).toEqual([]);
  });

  it('running it again moves only what is new', async () => {
    const bq = bullQueue();
    const to = uniqueName('to');
    await bq.addBulk([1, 2, 3].map((n) => ({ name: 'x', data: { n } })));
    const first = await importFromBullMQ({ connection: fx.url, from: { queue: bq.name }, to });
    expect(first.moved.total).toBe(3);
    const again = await importFromBullMQ({ connection: fx.url, from: { queue: bq.name }, to });
    expect(again.moved.total).toBe(0);
    await bq.add('x', { n: 4 });
    const third = await importFromBullMQ({ connection: fx.url, from: { queue: bq.name }, to });
    expect(third.moved).toMatchObject({ waiting: 1, total: 1 });
    const q = suretyQueue<{ n: number }>(to);
    const jobs = await q.getJobs('waiting');
    expect(jobs.map((j) => j.data.n).sort()).toEqual([1, 2, 3, 4]);
  });

  it('leaves in BullMQ, with a reason each: a job whose id is taken here, flow jobs, and data over maxPayloadBytes', async () => {
    const bq = bullQueue();
    const to = uniqueName('to');
    const q = suretyQueue(to);
    await q.add({ mine: true }, { id: 'same' });
    await bq.add('clash', { theirs: true }, { jobId: 'same' });
    const flow = new FlowProducer({ connection: bullConnection() });
    open.push(flow);
    await flow.add({
      name: 'parent',
      queueName: bq.name,
      data: {},
      children: [{ name: 'child', queueName: bq.name, data: {} }],
    });
    await bq.add('huge', { blob: 'x'.repeat(600 * 1024) }, { jobId: 'huge' });
    const report = await importFromBullMQ({ connection: fx.url, from: { queue: bq.name }, to });
    expect(report.moved.total).toBe(0);
    expect(report.kept.byReason).toEqual({ 'id-taken': 1, flow: 1, invalid: 1 });
    expect(report.kept.first.find((k) => k.id === 'huge')?.detail).toMatch(/maxPayloadBytes/);
    expect(report.notes.join('\n')).toMatch(/1 flow parent/);
    expect(await q.getJob('same')).toMatchObject({ data: { mine: true } });
    expect(await bq.getJobCounts('waiting', 'waiting-children')).toEqual({
      waiting: 3,
      'waiting-children': 1,
    });
  });

  it("a job scheduler becomes a schedule from the tick after BullMQ's pending run, which moves as a job", async () => {
    const bq = bullQueue();
    const to = uniqueName('to');
    await bq.upsertJobScheduler(
      'nightly',
      { pattern: '0 3 * * *', tz: 'Europe/Paris' },
      { name: 'nightly', data: { report: 'sales' }, opts: { attempts: 4, priority: 2 } },
    );
    const next = Number(await fx.redis.zscore(`bull:${bq.name}:repeat`, 'nightly'));
    const report = await importFromBullMQ({ connection: fx.url, from: { queue: bq.name }, to });
    expect(report.schedulers).toEqual(['nightly']);
    expect(report.moved).toMatchObject({ delayed: 1, total: 1 });
    expect(await bq.getJobSchedulersCount()).toBe(0);
    expect(await bq.getJobCounts('delayed', 'waiting')).toEqual({ delayed: 0, waiting: 0 });
    const q = suretyQueue(to);
    // BullMQ's pending run is a job here, due when BullMQ would have run it.
    expect(await q.getJob(`repeat:nightly:${next}`)).toMatchObject({
      state: 'delayed',
      runAt: next,
      data: { report: 'sales' },
      maxAttempts: 4,
      priority: 2,
    });
    const [schedule] = await q.schedules();
    expect(schedule).toMatchObject({
      key: 'nightly',
      cron: '0 3 * * *',
      tz: 'Europe/Paris',
      data: { report: 'sales' },
      opts: { maxAttempts: 4, priority: 2 },
      // The tick after BullMQ's pending one (a day later, give or take a change of clocks).
      nextRunAt: CronExpressionParser.parse('0 3 * * *', { currentDate: next, tz: 'Europe/Paris' })
        .next()
        .getTime(),
    });
    // A second run finds nothing to do.
    const again = await importFromBullMQ({ connection: fx.url, from: { queue: bq.name }, to });
    expect(again.schedulers).toEqual([]);
  });

  it('an every-scheduler keeps its cadence, and a limited one keeps only the runs it has left', async () => {
    const bq = bullQueue();
    const to = uniqueName('to');
    await bq.upsertJobScheduler(
      'beat',
      { every: 60_000, startDate: Date.now() + 120_000, limit: 5 },
      { name: 'beat' },
    );
    const next = Number(await fx.redis.zscore(`bull:${bq.name}:repeat`, 'beat'));
    await importFromBullMQ({ connection: fx.url, from: { queue: bq.name }, to });
    const q = suretyQueue(to);
    // The pending run moved as a job, so the schedule keeps the 4 runs left after it, from the next tick.
    expect(await q.getJob(`repeat:beat:${next}`)).toMatchObject({ state: 'delayed', runAt: next });
    const [schedule] = await q.schedules();
    expect(schedule).toMatchObject({ key: 'beat', everyMs: 60_000, nextRunAt: next + 60_000, limit: 4 });
    expect(schedule!.upcoming[0]).toBe(next + 120_000);
  });

  it('refuses an unknown BullMQ queue with ImportError naming the closest one', async () => {
    const bq = bullQueue(uniqueName('emails'));
    await bq.add('x', {});
    // One letter dropped (a swap of the last two would be no typo when they are the same letter).
    const typo = bq.name.slice(0, -1);
    const err = await importFromBullMQ({ connection: fx.url, from: { queue: typo }, to: 'any' }).catch(
      (e) => e,
    );
    expect(err).toBeInstanceOf(ImportError);
    expect(err.code).toBe('ERR_IMPORT');
    expect(err.message).toContain(`did you mean ${bq.name}?`);
  });

  it('validates its options before touching Redis', async () => {
    const base = { connection: fx.url, from: { queue: 'a' }, to: 'b' };
    const cases: [object, RegExp][] = [
      [{ ...base, to: 'no:colons' }, /queue name/],
      [{ ...base, from: { queue: 'a:b' } }, /from\.queue/],
      [{ ...base, from: { queue: 'a', prefix: '' } }, /from\.prefix/],
      [{ ...base, passes: 0 }, /passes/],
      [{ ...base, dryRun: 'yes' }, /dryRun/],
      [{ ...base, onProgress: 1 }, /onProgress/],
      [{ ...base, surprise: 1 }, /surprise/],
      [{ from: { queue: 'a' }, to: 'b' }, /connection/],
    ];
    for (const [opts, message] of cases) {
      const err = await importFromBullMQ(opts as never).catch((e) => e);
      expect(err, JSON.stringify(opts)).toBeInstanceOf(ValidationError);
      expect(err.message).toMatch(message);
    }
  });

  it('into a partitioned queue, each job lands in the partition of its id, where lookups find it', async () => {
    const bq = bullQueue();
    const to = uniqueName('to');
    const q = suretyQueue<{ n: number }>(to, 4);
    await q.add({ n: -1 }); // records the partition count
    await bq.addBulk(Array.from({ length: 20 }, (_, n) => ({ name: 'x', data: { n } })));
    const report = await importFromBullMQ({ connection: fx.url, from: { queue: bq.name }, to });
    expect(report.moved.total).toBe(20);
    for (let id = 1; id <= 20; id++) expect((await q.getJob(String(id)))?.data.n).toBe(id - 1);
    const ran = new Set<number>();
    const w = new Worker<{ n: number }>(to, (job) => void ran.add(job.data.n), {
      connection: fx.url,
      partitions: 4,
    });
    open.push(w);
    await waitUntil(() => ran.size === 21, 'all 21 ran');
  });

  it("generated ids of the Surety queue start above BullMQ's id counter", async () => {
    const bq = bullQueue();
    const to = uniqueName('to');
    for (let i = 0; i < 7; i++) await bq.add('x', {});
    await importFromBullMQ({ connection: fx.url, from: { queue: bq.name }, to });
    const added = await suretyQueue(to).add({});
    expect(Number(added.id)).toBeGreaterThan(7);
  });

  it('a job BullMQ holds active finishes there; a later run takes it once BullMQ puts it back for a retry', async () => {
    const bq = bullQueue();
    const to = uniqueName('to');
    await bq.add('slow', { n: 1 }, { jobId: 'slow-1', attempts: 3 });
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const worker = new BullWorker(
      bq.name,
      async () => {
        await held;
        throw new Error('first attempt fails');
      },
      { connection: bullConnection() },
    );
    open.push(worker);
    await waitUntil(async () => (await bq.getJobCounts('active')).active === 1, 'BullMQ holds it');
    const first = await importFromBullMQ({ connection: fx.url, from: { queue: bq.name }, to });
    expect(first.moved.total).toBe(0);
    expect(first.notes.join('\n')).toMatch(/1 job\(s\) active in BullMQ finish there/);
    const retried = new Promise<void>((r) => worker.once('failed', () => r()));
    release();
    await retried;
    await worker.close();
    const second = await importFromBullMQ({ connection: fx.url, from: { queue: bq.name }, to });
    expect(second.moved.total).toBe(1);
    expect(await suretyQueue(to).getJob('slow-1')).toMatchObject({
      attempts: 1,
      attemptsLeft: 2,
      errors: [{ attempt: 1, message: 'first attempt fails' }],
    });
  });

  it('notes a paused BullMQ queue, and reads jobs from the legacy paused list', async () => {
    const bq = bullQueue();
    const to = uniqueName('to');
    await bq.add('x', { n: 1 });
    await bq.pause();
    // A queue paused before BullMQ 5 kept its jobs in a `paused` list.
    const legacy = await bq.add('y', { n: 2 });
    await fx.redis.lrem(`bull:${bq.name}:wait`, 0, legacy.id!);
    await fx.redis.lpush(`bull:${bq.name}:paused`, legacy.id!);
    const report = await importFromBullMQ({ connection: fx.url, from: { queue: bq.name }, to });
    expect(report.moved).toMatchObject({ waiting: 1, paused: 1, total: 2 });
    expect(report.notes.join('\n')).toMatch(/BullMQ queue is paused/);
  });

  it('reports BullMQ options that have no equivalent, per option, and maps a custom backoff by name', async () => {
    const bq = bullQueue();
    const to = uniqueName('to');
    await bq.add(
      'a',
      {},
      { removeOnComplete: 100, keepLogs: 10, backoff: { type: 'linear', delay: 5 }, attempts: 2 },
    );
    await bq.add('b', {}, { removeOnFail: { age: 3600 }, priority: 2_000_000 });
    const report = await importFromBullMQ({ connection: fx.url, from: { queue: bq.name }, to });
    expect(report.moved.total).toBe(2);
    expect(report.droppedOptions).toEqual({
      'removeOnComplete (a count or age: use the Worker retention)': 1,
      'removeOnFail (a count or age: use the Worker retention)': 1,
      keepLogs: 1,
      'priority 2000000 (kept as 1000000)': 1,
    });
    expect(await suretyQueue(to).getJob('1')).toMatchObject({ backoff: { type: 'custom', name: 'linear' } });
  });

  it('with BullMQ on another server, copies, takes out of BullMQ, and leaves no note behind', async () => {
    const other = await startRedis();
    try {
      const bq = bullQueue(uniqueName('bull'), { url: other.url });
      const to = uniqueName('to');
      await bq.addBulk([1, 2, 3].map((n) => ({ name: 'x', data: { n } })));
      await bq.add('later', { n: 4 }, { delay: 60_000 });
      const report = await importFromBullMQ({
        connection: fx.url,
        from: { queue: bq.name, connection: other.url },
        to,
      });
      expect(report.mode).toBe('copy');
      expect(report.moved).toMatchObject({ waiting: 3, delayed: 1, total: 4 });
      expect(await bq.getJobCounts('waiting', 'delayed')).toEqual({ waiting: 0, delayed: 0 });
      expect(await fx.redis.exists(queueKeys('surety', to).imported)).toBe(0);
      expect((await suretyQueue(to).getJobs(['waiting', 'delayed'])).length).toBe(4);
    } finally {
      for (const c of bullClients.splice(0)) c.disconnect();
      await other.stop();
    }
  });

  it('with a custom BullMQ prefix and Surety prefix', async () => {
    const bq = bullQueue(uniqueName('bull'), { prefix: 'legacy' });
    const to = uniqueName('to');
    await bq.add('x', { n: 1 });
    const report = await importFromBullMQ({
      connection: fx.url,
      from: { queue: bq.name, prefix: 'legacy' },
      to,
      prefix: 'jobs',
    });
    expect(report.moved.total).toBe(1);
    const q = new Queue(to, { connection: fx.url, prefix: 'jobs' });
    open.push(q);
    expect(await q.getJob('1')).toMatchObject({ data: { n: 1 } });
  });
});

/** Runs a BullMQ worker whose processor logs a line and throws, until `n` jobs have failed. */
async function failInBullMQ(queue: string, n: number, prefix?: string): Promise<void> {
  let failures = 0;
  const worker = new BullWorker(
    queue,
    async (job) => {
      await job.log('about to fail');
      throw new Error('kaboom');
    },
    { connection: bullConnection(), ...(prefix ? { prefix } : {}) },
  );
  worker.on('failed', () => {
    failures++;
  });
  await waitUntil(() => failures >= n, `${n} job(s) failed in BullMQ`);
  await worker.close();
}

afterAll(() => {
  for (const c of bullClients.splice(0)) c.disconnect();
});
