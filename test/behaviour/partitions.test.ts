/**
 * Partitioned queues on one Redis server (the layout and routing do not need a cluster; test/cluster
 * runs them on a real one): routing, the recorded count, fair claiming, and an admin API that sees
 * one queue.
 */
import { describe, expect, it } from 'vitest';
import {
  CrossPartitionError,
  type Job,
  PartitionMismatchError,
  Queue,
  type QueueEvent,
  RepartitionError,
  repartition,
  UnrecoverableError,
  Worker,
} from '../../src/index.js';
import { partitionOf } from '../../src/queue/partitions.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

function queue<D = unknown>(name: string, partitions: number | 'auto' = 4) {
  const q = new Queue<D>(name, { connection: fx.url, partitions });
  open.push(q);
  return q;
}
function worker<D = unknown>(name: string, fn: (job: Job<D>) => unknown, opts: Record<string, unknown> = {}) {
  const w = new Worker<D>(name, fn, { connection: fx.url, partitions: 4, concurrency: 8, ...opts });
  open.push(w);
  return w;
}

describe('partitioned queues', () => {
  it('generated ids go round-robin and carry their partition; explicit ids go to the hash of the id', async () => {
    const name = uniqueName();
    const q = queue(name);
    const added = await q.addBulk(Array.from({ length: 8 }, (_, i) => ({ data: i })));
    const parts = added.map((a) => Number(a.id.split('@')[1]));
    expect(new Set(parts)).toEqual(new Set([0, 1, 2, 3]));
    for (const p of [0, 1, 2, 3]) {
      expect(await fx.redis.hlen(`{surety:${name}:${p}}:jobs`)).toBe(2);
    }
    // Idempotent add by id: the second add meets the first in the id's home partition.
    const first = await q.add('x', { id: 'order-42' });
    const again = await q.add('y', { id: 'order-42' });
    expect([first.isNew, again.isNew]).toEqual([true, false]);
    const home = partitionOf('order-42', 4);
    expect(await fx.redis.hexists(`{surety:${name}:${home}}:jobs`, 'order-42')).toBe(1);
    expect((await q.getJob('order-42'))!.data).toBe('x');
    expect((await q.counts()).waiting).toBe(9);
  });

  it('a worker runs the jobs of every partition, and waitFor sees each one finish', async () => {
    const name = uniqueName();
    const q = queue<number>(name);
    worker<number>(name, (job) => job.data * 2);
    const added = await q.addBulk(Array.from({ length: 40 }, (_, i) => ({ data: i })));
    const results = await Promise.all(added.map((a) => q.waitFor(a.id, { timeoutMs: 10_000 })));
    expect(results).toEqual(added.map((_, i) => i * 2));
    expect(await q.counts()).toMatchObject({ waiting: 0, active: 0, completed: 40 });
    const completed = await q.getJobs('completed', { limit: 100 });
    expect(completed).toHaveLength(40);
    const finished = completed.map((j) => j.finishedAt!);
    expect(finished).toEqual([...finished].sort((a, b) => a - b));
    // Two minutes: the completions and this read may fall on either side of a minute boundary.
    expect((await q.metrics({ windowMs: 120_000 })).completed).toBe(40);
    const paged = await q.getJobs('completed', { offset: 10, limit: 5 });
    expect(paged.map((j) => j.id)).toEqual(completed.slice(10, 15).map((j) => j.id));
  });

  it('the partition count is recorded: another count is refused, and auto reads it', async () => {
    const name = uniqueName();
    const q = queue(name, 4);
    await q.add('a');
    const wrong = queue(name, 2);
    const err = await wrong.add('b').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PartitionMismatchError);
    expect(err).toMatchObject({ code: 'ERR_PARTITIONS_MISMATCH', configured: 2, recorded: 4 });
    const unpartitioned = queue(name, 1);
    await expect(unpartitioned.counts()).rejects.toThrow(/has 4 partition\(s\) in Redis/);
    const w = new Worker(name, () => {}, { connection: fx.url, partitions: 8, autostart: false });
    open.push(w);
    await expect(w.start()).rejects.toBeInstanceOf(PartitionMismatchError);
    const auto = queue(name, 'auto');
    expect((await auto.counts()).waiting).toBe(1);
    expect(auto.partitions).toBe(4);
    // Nothing was written by the refused clients.
    expect((await q.counts()).waiting).toBe(1);
  });

  it('an unpartitioned queue that holds jobs cannot be opened with partitions', async () => {
    const name = uniqueName();
    await queue(name, 1).add('old job');
    await expect(queue(name, 4).add('new job')).rejects.toMatchObject({
      code: 'ERR_PARTITIONS_MISMATCH',
      recorded: 1,
    });
    expect((await queue(name, 'auto').counts()).waiting).toBe(1);
  });

  it('a worker shares its slots fairly: a small partition is served while a big backlog waits', async () => {
    const name = uniqueName();
    const q = queue<string>(name);
    // partitionKey pins jobs to a partition: 400 in one, 10 in each of two others.
    await q.addBulk(Array.from({ length: 400 }, () => ({ data: 'big', opts: { partitionKey: 'big' } })));
    const small = await q.addBulk([
      ...Array.from({ length: 10 }, () => ({ data: 'small', opts: { partitionKey: 'small-1' } })),
      ...Array.from({ length: 10 }, () => ({ data: 'small', opts: { partitionKey: 'small-2' } })),
    ]);
    const pinned = new Set(small.map((a) => a.id.split('@')[1]));
    expect(pinned.size).toBe(2);
    let bigDone = 0;
    let bigDoneWhenSmallFinished = -1;
    let smallDone = 0;
    worker<string>(
      name,
      async (job) => {
        await new Promise((r) => setImmediate(r));
        if (job.data === 'big') bigDone++;
        else if (++smallDone === 20) bigDoneWhenSmallFinished = bigDone;
      },
      { concurrency: 4 },
    );
    await waitUntil(() => bigDone === 400 && smallDone === 20, 'every job done', 20_000);
    // Unfair claiming would drain the big partition first (400 before the first small job).
    console.log(`fair share: small partitions finished after ${bigDoneWhenSmallFinished} of 400 big jobs`);
    expect(bigDoneWhenSmallFinished).toBeGreaterThanOrEqual(0);
    expect(bigDoneWhenSmallFinished).toBeLessThan(200);
  });

  it('delays, retries, schedules and dependencies work in a partitioned queue', async () => {
    const name = uniqueName();
    const q = queue<{ step: string }>(name);
    const attempts = new Map<string, number>();
    worker<{ step: string }>(name, async (job) => {
      const n = (attempts.get(job.id) ?? 0) + 1;
      attempts.set(job.id, n);
      if (job.data.step === 'flaky' && n === 1) throw new Error('first attempt fails');
      if (job.data.step === 'child') return Object.keys(await job.parentResults()).sort();
      return job.data.step;
    });
    const delayed = await q.add({ step: 'later' }, { delayMs: 150 });
    expect(delayed.state).toBe('delayed');
    const flaky = await q.add({ step: 'flaky' }, { backoff: { type: 'fixed', delayMs: 10 } });
    // One addBulk: the parents and the child are written by one script call in their partition, so the
    // running worker cannot complete the parents before the child exists (separate adds made this
    // test pass only when the worker was slower than the adds).
    const [p1, p2, child] = await q.addBulk([
      { data: { step: 'p1' }, opts: { id: 'p1', partitionKey: 'graph' } },
      { data: { step: 'p2' }, opts: { id: 'p2', partitionKey: 'graph' } },
      { data: { step: 'child' }, opts: { dependsOn: ['p1', 'p2'], partitionKey: 'graph' } },
    ]);
    expect([p1!.id, p2!.id]).toEqual(['p1', 'p2']);
    expect(child!.state).toBe('blocked');
    await q.schedule('every', { everyMs: 100 }, { data: { step: 'tick' } });
    expect(await q.waitFor(delayed.id)).toBe('later');
    expect(await q.waitFor(flaky.id)).toBe('flaky');
    expect(attempts.get(flaky.id)).toBe(2);
    expect(await q.waitFor(child!.id)).toEqual(['p1', 'p2']);
    await waitUntil(
      async () =>
        (await q.getJobs('completed', { limit: 100 })).some((j) => j.id.startsWith('schedule:every:')),
      'a schedule tick ran',
    );
    expect((await q.schedules()).map((s) => s.key)).toEqual(['every']);
    expect(await q.unschedule('every')).toBe(true);
    // Parents placed by their ids' hashes may sit in different partitions: refused, nothing written.
    const a = await q.add({ step: 'a' }, { id: 'a' });
    let other = 'b';
    for (let i = 0; partitionOf(other, 4) === partitionOf('a', 4); i++) other = `b${i}`;
    const b = await q.add({ step: 'b' }, { id: other });
    await expect(q.add({ step: 'child' }, { dependsOn: [a.id, b.id] })).rejects.toBeInstanceOf(
      CrossPartitionError,
    );
    // In a bulk add the refusal comes before any chunk is sent: the 1 500 good items are not written.
    // (Jobs of this test may change state meanwhile: count them all, whatever their state.)
    const total = async () => Object.values(await q.counts()).reduce((s, n) => s + n, 0);
    const before = await total();
    const bulk = [
      ...Array.from({ length: 1_500 }, () => ({ data: { step: 'filler' } })),
      { data: { step: 'child' }, opts: { dependsOn: [a.id, b.id] } },
    ];
    await expect(q.addBulk(bulk)).rejects.toBeInstanceOf(CrossPartitionError);
    expect(await total()).toBe(before);
  });

  it('the admin API sees one queue: retry, remove, cancel, promote, pause, clean, workers and events', async () => {
    const name = uniqueName();
    const q = queue<string>(name);
    const seen: QueueEvent[] = [];
    const controller = new AbortController();
    const reading = (async () => {
      for await (const e of q.events({ signal: controller.signal, from: '0' })) {
        seen.push(e);
        if (seen.filter((x) => x.event === 'completed').length >= 4) break;
      }
    })();
    const jobs = await q.addBulk(
      Array.from({ length: 4 }, (_, i) => ({ data: `j${i}`, opts: { delayMs: 60_000 } })),
    );
    for (const j of jobs) await q.promote(j.id);
    const w = worker<string>(
      name,
      (job) => {
        if (job.data === 'j0') throw new UnrecoverableError('boom');
        return job.data;
      },
      { concurrency: 2 },
    );
    await waitUntil(async () => {
      const c = await q.counts();
      return c.completed === 3 && c.dead === 1;
    }, '3 completed, 1 dead').catch(async (e) => {
      console.log('COUNTS', await q.counts(), JSON.stringify(await q.getJobs('waiting')));
      throw e;
    });
    expect((await q.workers()).map((x) => x.id)).toEqual([w.id]);
    await q.pause();
    expect(await q.isPaused()).toBe(true);
    const held = await q.add('while paused');
    await q.resume();
    expect(await q.waitFor(held.id)).toBe('while paused');
    await q.retry(jobs[1]!.id);
    expect(await q.waitFor(jobs[1]!.id)).toBe('j1');
    await q.retry(jobs[0]!.id);
    expect((await q.getJob(jobs[0]!.id))!.state).not.toBe('dead');
    const victim = await q.add('to cancel', { delayMs: 60_000 });
    await q.cancel(victim.id);
    expect((await q.getJob(victim.id))!.state).toBe('dead');
    await q.remove(victim.id);
    expect(await q.getJob(victim.id)).toBeNull();
    const cleaned = await q.clean('completed');
    expect(cleaned.removed).toBeGreaterThanOrEqual(4);
    expect((await q.counts()).completed).toBe(0);
    await reading;
    controller.abort();
    const partitions = new Set(seen.map((e) => e.partition));
    expect(partitions.size).toBeGreaterThan(1);
    expect(seen.some((e) => e.event === 'added')).toBe(true);
  });
});

describe('repartition', () => {
  it('moves a queue from 1 to 4 partitions and back, keeping every job in its state', async () => {
    const name = uniqueName();
    const q1 = queue<string>(name, 1);
    const w1 = new Worker<string>(name, (job) => `done ${job.data}`, { connection: fx.url });
    open.push(w1);
    const finished = await q1.addBulk([{ data: 'a' }, { data: 'b' }]);
    for (const f of finished) await q1.waitFor(f.id);
    await w1.close();
    await q1.add('waiting-1');
    await q1.add('urgent', { priority: -5 });
    await q1.add('later', { delayMs: 60_000, id: 'later' });
    await q1.schedule('nightly', { cron: '0 3 * * *' }, { data: 'tick' });
    const before = await q1.counts();
    expect(before).toMatchObject({ waiting: 2, delayed: 2, completed: 2 });

    const r = await repartition(fx.redis, name, { to: 4 });
    expect(r).toMatchObject({ from: 1, to: 4, moved: 6, schedules: 1 });
    // A producer still on the old count is refused; the new layout holds everything.
    await expect(q1.add('stale producer')).rejects.toBeInstanceOf(PartitionMismatchError);
    const q4 = queue<string>(name, 4);
    expect(await q4.counts()).toEqual(before);
    expect((await q4.getJob('later'))!.state).toBe('delayed');
    expect((await q4.getJob(finished[0]!.id))!.result).toBe('done a');
    expect((await q4.schedules()).map((s) => s.key)).toEqual(['nightly']);
    // Workers on the new count run the waiting jobs.
    const ran: string[] = [];
    worker<string>(
      name,
      (job) => {
        ran.push(job.data);
      },
      { concurrency: 1 },
    );
    await waitUntil(() => ran.length === 2, 'the two waiting jobs ran');
    // (Ordering holds within a partition only: the two may now live in different partitions.)
    expect(ran.sort()).toEqual(['urgent', 'waiting-1']);
    await open.splice(0).reduce((p, c) => p.then(() => c.close()), Promise.resolve());

    const back = await repartition(fx.redis, name, { to: 1 });
    expect(back).toMatchObject({ from: 4, to: 1, schedules: 1 });
    const again = queue<string>(name, 1);
    expect(await again.counts()).toMatchObject({ waiting: 0, delayed: 2, completed: 4 });
    await expect(queue(name, 4).add('x')).rejects.toBeInstanceOf(PartitionMismatchError);
    expect(await repartition(fx.redis, name, { to: 1 })).toMatchObject({ moved: 0 });
  });

  it('a sleeping job keeps its steps, a parked job its wait and its signals, across a repartition', async () => {
    const name = uniqueName();
    const q1 = queue<string>(name, 1);
    const w1 = new Worker<string>(
      name,
      async (job) => {
        await job.step('charge', () => 'ch_1');
        if (job.data === 'sleeper') await job.sleep(60_000);
        else await job.waitForSignal('go');
        return 'never here';
      },
      { connection: fx.url },
    );
    open.push(w1);
    const sleeper = await q1.add('sleeper', { id: 'sleeper' });
    const parked = await q1.add('parked', { id: 'parked' });
    await waitUntil(async () => (await q1.counts()).delayed === 2, 'both jobs wait');
    await w1.close();
    await q1.signal(parked.id, 'other', { n: 1 });

    await repartition(fx.redis, name, { to: 4 });
    const q4 = queue<string>(name, 4);
    expect((await q4.getJob(sleeper.id))!.steps).toMatchObject({ charge: 'ch_1' });
    const moved = (await q4.getJob(parked.id))!;
    expect(moved.steps).toMatchObject({ charge: 'ch_1' });
    expect(moved.waitingForSignal).toEqual({ name: 'go' });
    expect(moved.pendingSignals).toEqual([{ name: 'other', payload: { n: 1 } }]);
    let charged = 0;
    worker<string>(name, async (job) => {
      await job.step('charge', () => `ch_${++charged + 1}`);
      return job.waitForSignal('go');
    });
    expect(await q4.signal(parked.id, 'go', 'yes')).toMatchObject({ delivered: true, woke: true });
    expect(await q4.waitFor(parked.id, { timeoutMs: 10_000 })).toBe('yes');
    expect(charged).toBe(0);
  });

  it('does not move a workflow under way: an open child of job.addChildren, or a parent of one', async () => {
    const parents = uniqueName();
    const kids = uniqueName();
    const qp = queue(parents, 1);
    const qk = queue(kids, 1);
    const w = new Worker(
      parents,
      async (job) => {
        await job.addChildren([{ queue: kids, data: 1, opts: { id: 'kid' } }]);
        if (job.attempt === 1) throw new Error('retried later, with its child open');
        return job.waitForChildren();
      },
      { connection: fx.url, backoffStrategies: {} },
    );
    open.push(w);
    const { id } = await qp.add({}, { backoff: { type: 'fixed', delayMs: 60_000 } });
    await waitUntil(async () => (await qp.getJob(id))?.state === 'delayed', 'the parent waits for its retry');
    await w.close();
    expect((await qk.getJob('kid'))!.parent).toEqual({ queue: parents, id });
    // Refused at that job, as for an active one: the operator runs it again once the workflow ended.
    await expect(repartition(fx.redis, kids, { to: 2 })).rejects.toThrow(/part of a workflow under way/);
    await expect(repartition(fx.redis, parents, { to: 2 })).rejects.toThrow(/part of a workflow under way/);
  });

  it('refuses to go from N to M directly, and waits for active jobs', async () => {
    const name = uniqueName();
    await queue(name, 2).add('x');
    await expect(repartition(fx.redis, name, { to: 3 })).rejects.toThrow(/repartition to 1 first/);
    const q = queue<string>(name, 1);
    const other = uniqueName();
    const qo = queue<string>(other, 1);
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    worker<string>(other, () => gate, { partitions: 1 });
    await qo.add('slow');
    await waitUntil(async () => (await qo.counts()).active === 1, 'the job is active');
    await expect(repartition(fx.redis, other, { to: 2, waitMs: 100 })).rejects.toBeInstanceOf(
      RepartitionError,
    );
    expect(await qo.isPaused()).toBe(true);
    release();
    expect(await repartition(fx.redis, other, { to: 2, waitMs: 5_000 })).toMatchObject({
      from: 1,
      to: 2,
      moved: 1,
    });
    expect(q.name).toBe(name);
  });
});
