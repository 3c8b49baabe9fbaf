import { describe, expect, it } from 'vitest';
import { MAX_BULK } from '../../src/defaults.js';
import {
  InvalidStateError,
  JobFailedError,
  JobNotFoundError,
  Queue,
  UnrecoverableError,
  ValidationError,
  WaitTimeoutError,
  Worker,
} from '../../src/index.js';
import { hashPartition } from '../../src/queue/partitions.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
function queue<D = unknown, R = unknown>(name = uniqueName(), opts = {}): Queue<D, R> {
  const q = new Queue<D, R>(name, { connection: fx.url, ...opts });
  open.push(q);
  return q;
}
function worker<D, R>(
  name: string,
  fn: (job: import('../../src/index.js').Job<D>) => R | Promise<R>,
  opts = {},
) {
  const w = new Worker<D, R>(name, fn, { connection: fx.url, ...opts });
  open.push(w);
  return w;
}

describe('Queue', () => {
  it('adds a job that getJob reads back with its data and defaults', async () => {
    const q = queue<{ to: string }>();
    const added = await q.add({ to: 'a@example.com' });
    expect(added).toEqual({ id: '1', isNew: true, state: 'waiting' });
    const job = await q.getJob(added.id);
    expect(job).toMatchObject({
      id: '1',
      state: 'waiting',
      data: { to: 'a@example.com' },
      attempts: 0,
      maxAttempts: 3,
      priority: 0,
    });
    expect(job?.errors).toEqual([]);
    expect(job?.runAt).toBe(job?.createdAt);
    expect(await q.getJob('nope')).toBeNull();
  });

  it('adding an existing id returns the existing job and enqueues nothing', async () => {
    const q = queue();
    const first = await q.add({ n: 1 }, { id: 'order-7' });
    const again = await q.add({ n: 2 }, { id: 'order-7' });
    expect(first.isNew).toBe(true);
    expect(again).toEqual({ id: 'order-7', isNew: false, state: 'waiting' });
    expect((await q.getJob('order-7'))?.data).toEqual({ n: 1 });
    expect((await q.counts()).waiting).toBe(1);
  });

  it('generated ids skip ids that callers already used', async () => {
    const q = queue();
    await q.add({}, { id: '1' });
    await q.add({}, { id: '2' });
    const a = await q.add({});
    const b = await q.add({});
    expect([a.id, b.id]).toEqual(['3', '4']);
    expect((await q.counts()).waiting).toBe(4);
  });

  it('addBulk adds thousands of jobs, in order, dedups repeated ids within the call', async () => {
    const q = queue<{ i: number }>();
    const items = Array.from({ length: 2_500 }, (_, i) => ({ data: { i } }));
    items.push(
      { data: { i: -1 }, opts: { id: 'dup' } } as never,
      { data: { i: -2 }, opts: { id: 'dup' } } as never,
    );
    const added = await q.addBulk(items);
    expect(added).toHaveLength(2_502);
    expect(added.filter((a) => a.isNew)).toHaveLength(2_501);
    expect(added[2_501]).toEqual({ id: 'dup', isNew: false, state: 'waiting' });
    expect((await q.counts()).waiting).toBe(2_501);
    const firstPage = await q.getJobs('waiting', { limit: 3 });
    expect(firstPage.map((j) => j.data)).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
  });

  it('delayed and runAt jobs are counted as delayed with the right due time', async () => {
    const q = queue();
    const before = Date.now();
    const a = await q.add({}, { delayMs: 60_000 });
    const b = await q.add({}, { runAt: new Date(before + 120_000) });
    const c = await q.add({}, { runAt: before - 1_000 }); // in the past: waiting at once
    expect([a.state, b.state, c.state]).toEqual(['delayed', 'delayed', 'waiting']);
    const ja = await q.getJob(a.id);
    expect(ja!.runAt - ja!.createdAt).toBe(60_000);
    expect((await q.getJob(b.id))!.runAt).toBe(before + 120_000);
    expect(await q.counts()).toEqual({
      waiting: 1,
      delayed: 2,
      blocked: 0,
      active: 0,
      completed: 0,
      dead: 0,
    });
  });

  it('promote makes a delayed job waiting; promoting a waiting job is refused', async () => {
    const q = queue();
    const a = await q.add({}, { delayMs: 60_000 });
    await q.promote(a.id);
    expect((await q.getJob(a.id))!.state).toBe('waiting');
    await expect(q.promote(a.id)).rejects.toBeInstanceOf(InvalidStateError);
    await expect(q.promote('missing')).rejects.toBeInstanceOf(JobNotFoundError);
  });

  it('runs lower priorities first and FIFO within a priority', async () => {
    const name = uniqueName();
    const q = queue<{ tag: string }>(name);
    await q.add({ tag: 'p0-a' });
    await q.add({ tag: 'p5-a' }, { priority: 5 });
    await q.add({ tag: 'pneg-a' }, { priority: -3 });
    await q.add({ tag: 'p0-b' });
    await q.add({ tag: 'p5-b' }, { priority: 5 });
    await q.add({ tag: 'p1' }, { priority: 1 });
    await q.add({ tag: 'pneg-b' }, { priority: -3 });
    expect((await q.getJobs('waiting')).map((j) => j.data.tag)).toEqual([
      'pneg-a',
      'pneg-b',
      'p0-a',
      'p0-b',
      'p1',
      'p5-a',
      'p5-b',
    ]);
    const order: string[] = [];
    worker<{ tag: string }, void>(name, (job) => {
      order.push(job.data.tag);
    });
    await waitUntil(() => order.length === 7, '7 jobs');
    expect(order).toEqual(['pneg-a', 'pneg-b', 'p0-a', 'p0-b', 'p1', 'p5-a', 'p5-b']);
  });

  it('remove deletes a waiting, delayed or finished job and refuses an active one', async () => {
    const name = uniqueName();
    const q = queue(name);
    const w1 = await q.add({}, { id: 'w' });
    const d1 = await q.add({}, { id: 'd', delayMs: 60_000, priority: 2 });
    await q.remove(w1.id);
    await q.remove(d1.id);
    expect(await q.getJob('w')).toBeNull();
    expect(await q.counts()).toEqual({
      waiting: 0,
      delayed: 0,
      blocked: 0,
      active: 0,
      completed: 0,
      dead: 0,
    });
    await expect(q.remove('w')).rejects.toBeInstanceOf(JobNotFoundError);

    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    worker(name, () => gate);
    const a = await q.add({}, { id: 'a' });
    await waitUntil(async () => (await q.getJob(a.id))?.state === 'active', 'job active');
    await expect(q.remove(a.id)).rejects.toMatchObject({ code: 'ERR_INVALID_STATE', state: 'active' });
    release();
    await q.waitFor(a.id);
    await q.remove(a.id);
    expect((await q.counts()).completed).toBe(0);
  });

  it('pause stops every worker from claiming; resume restarts them at once', async () => {
    const name = uniqueName();
    const q = queue(name);
    await q.pause();
    expect(await q.isPaused()).toBe(true);
    const ran: string[] = [];
    const w = worker(name, (job) => {
      ran.push(job.id);
    });
    await w.start();
    const job = await q.add({});
    // The worker has claimed (and been refused) since start; a claim now proves it still gets nothing.
    await waitUntil(async () => (await q.counts()).waiting === 1, 'job waiting');
    expect(ran).toEqual([]);
    await q.resume();
    await q.waitFor(job.id, { timeoutMs: 5_000 });
    expect(ran).toEqual([job.id]);
    expect(await q.isPaused()).toBe(false);
  });

  it('waitFor resolves with the result, rejects with every error when dead, and times out', async () => {
    const name = uniqueName();
    const q = queue<{ ok: boolean }, { doubled: number }>(name);
    worker<{ ok: boolean }, { doubled: number }>(
      name,
      (job) => {
        if (!job.data.ok) throw new Error(`boom ${job.attempt}`);
        return { doubled: 42 };
      },
      { concurrency: 2 },
    );
    const good = await q.add({ ok: true });
    const bad = await q.add({ ok: false }, { maxAttempts: 2, backoff: { type: 'fixed', delayMs: 0 } });
    expect(await q.waitFor(good.id)).toEqual({ doubled: 42 });
    const err = await q.waitFor(bad.id).catch((e) => e);
    expect(err).toBeInstanceOf(JobFailedError);
    expect(err.code).toBe('ERR_JOB_DEAD');
    expect(err.errors.map((e: { message: string }) => e.message)).toEqual(['boom 1', 'boom 2']);
    const slow = await q.add({ ok: true }, { delayMs: 60_000 });
    await expect(q.waitFor(slow.id, { timeoutMs: 50 })).rejects.toBeInstanceOf(WaitTimeoutError);
    await expect(q.waitFor('missing')).rejects.toBeInstanceOf(JobNotFoundError);
  });

  it('waitFor stops when its signal aborts (rejecting with the reason), at once if already aborted; a non-signal is refused', async () => {
    const q = queue();
    const { id } = await q.add({});
    const controller = new AbortController();
    const waiting = q.waitFor(id, { timeoutMs: 30_000, signal: controller.signal });
    const reason = new Error('the client went away');
    setImmediate(() => controller.abort(reason));
    await expect(waiting).rejects.toBe(reason);
    await expect(q.waitFor(id, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    await expect(q.waitFor(id, { signal: {} as AbortSignal })).rejects.toThrow(
      /waitFor options.signal must be an AbortSignal, got \{\}/,
    );
    expect((await q.getJob(id))?.state).toBe('waiting');
  });

  it('waitFor on a job that already finished resolves at once', async () => {
    const name = uniqueName();
    const q = queue(name);
    const job = await q.add({});
    worker(name, () => 'done');
    await waitUntil(async () => (await q.getJob(job.id))?.state === 'completed', 'completed');
    expect(await q.waitFor(job.id)).toBe('done');
  });

  it('retry gives a dead job a fresh budget; its errors are kept and tokens keep increasing', async () => {
    const name = uniqueName();
    const q = queue<{ failUntil: number }>(name);
    const seen: number[] = [];
    worker<{ failUntil: number }, string>(name, (job) => {
      seen.push(job.attempt);
      if (job.attempt <= job.data.failUntil) throw new Error(`fail ${job.attempt}`);
      return 'ok';
    });
    const job = await q.add({ failUntil: 2 }, { maxAttempts: 1 });
    await expect(q.waitFor(job.id)).rejects.toBeInstanceOf(JobFailedError);
    await expect(q.retry('missing')).rejects.toBeInstanceOf(JobNotFoundError);
    await q.retry(job.id);
    await expect(q.waitFor(job.id)).rejects.toBeInstanceOf(JobFailedError);
    await q.retry(job.id);
    expect(await q.waitFor(job.id)).toBe('ok');
    const info = await q.getJob(job.id);
    expect(seen).toEqual([1, 2, 3]);
    expect(info).toMatchObject({ state: 'completed', attempts: 3, result: 'ok' });
    expect(info!.errors.map((e) => e.attempt)).toEqual([1, 2]);
    await expect(q.retry(job.id).then(() => q.retry(job.id))).rejects.toBeInstanceOf(InvalidStateError);
  });

  it('clean deletes finished jobs older than a cutoff, atomically, with their records', async () => {
    const name = uniqueName();
    const q = queue(name);
    worker(
      name,
      (job) => {
        if ((job.data as { fail?: boolean }).fail) throw new UnrecoverableError('no');
      },
      { concurrency: 5 },
    );
    const added = await q.addBulk([
      ...Array.from({ length: 5 }, () => ({ data: {} })),
      ...Array.from({ length: 3 }, () => ({ data: { fail: true } })),
    ]);
    await waitUntil(async () => {
      const c = await q.counts();
      return c.completed === 5 && c.dead === 3;
    }, 'all finished');
    expect(await q.clean('completed', { olderThanMs: 60_000 })).toEqual({ removed: 0, more: false });
    expect(await q.clean('dead', { limit: 2 })).toEqual({ removed: 2, more: true });
    expect(await q.clean('dead')).toEqual({ removed: 1, more: false });
    expect(await q.clean('completed')).toEqual({ removed: 5, more: false });
    expect(await q.counts()).toMatchObject({ completed: 0, dead: 0 });
    expect(await fx.redis.hlen(q.keys.jobs)).toBe(0);
    expect(await fx.redis.exists(q.keys.annex)).toBe(0); // the dead jobs' error lines went too
    expect(await q.getJob(added[0]!.id)).toBeNull();
    await expect(q.clean('waiting' as never)).rejects.toThrow(/'completed' or 'dead'/);
  });

  it('exists() is false for a name nothing used, true once a job, a pause or a partition count is written, false after obliterate', async () => {
    const added = queue();
    expect(await added.exists()).toBe(false);
    await added.add({ n: 1 });
    expect(await added.exists()).toBe(true);
    await added.obliterate();
    expect(await added.exists()).toBe(false);
    const paused = queue();
    await paused.pause();
    expect(await paused.exists()).toBe(true);
    // A Queue opened with a partition count records it on first use: the queue exists from then on.
    const partitioned = queue(uniqueName(), { partitions: 3 });
    expect(await partitioned.exists()).toBe(true);
    // Opened as 'auto' (what the CLI does), nothing is written for a name nothing used.
    expect(await queue(uniqueName(), { partitions: 'auto' }).exists()).toBe(false);
  });

  it('workers() lists live workers with their active jobs and drops them after close', async () => {
    const name = uniqueName();
    const q = queue(name);
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const w = worker(name, () => gate, { concurrency: 3, heartbeatMs: 50 });
    await w.start();
    const job = await q.add({});
    const listed = await waitUntil(async () => {
      const ws = await q.workers();
      return ws.length === 1 && ws[0]!.activeJobIds.includes(job.id) ? ws : null;
    }, 'worker listing its active job');
    expect(listed[0]).toMatchObject({ id: w.id, pid: process.pid, concurrency: 3 });
    expect(listed[0]!.lastBeat).toBeGreaterThanOrEqual(listed[0]!.startedAt - 1_000);
    release();
    await w.close();
    expect(await q.workers()).toEqual([]);
  });
});

describe('addBulk', () => {
  /** Every key of the queue, in every partition (the tags all start with `{surety:<name>`). */
  const keysOf = (name: string) => fx.redis.keys(`{surety:${name}*`);

  it('a generated id never takes an id given explicitly earlier in the same call', async () => {
    const q = queue<string>();
    const added = await q.addBulk([{ data: 'X', opts: { id: '2' } }, { data: 'A' }, { data: 'B' }]);
    expect(added).toEqual([
      { id: '2', isNew: true, state: 'waiting' },
      { id: '1', isNew: true, state: 'waiting' },
      { id: '3', isNew: true, state: 'waiting' },
    ]);
    expect((await q.getJob('3'))?.data).toBe('B');
    expect((await q.counts()).waiting).toBe(3);
  });

  it('a generated id never takes an id given explicitly later in the same call', async () => {
    const q = queue<string>();
    const added = await q.addBulk([{ data: 'A' }, { data: 'X', opts: { id: '1' } }, { data: 'B' }]);
    expect(added.map((a) => [a.id, a.isNew])).toEqual([
      ['2', true],
      ['1', true],
      ['3', true],
    ]);
    expect((await q.getJob('1'))?.data).toBe('X');
    expect((await q.getJob('2'))?.data).toBe('A');
    // The counter continues after the numbers it skipped; an explicit id that merely looks numeric is another id.
    expect((await q.add('C')).id).toBe('4');
    expect((await q.add('D', { id: '05' })).id).toBe('05');
    expect((await q.add('E')).id).toBe('5');
  });

  it('in a partitioned queue a generated id never takes an explicit id of the call that has its form', async () => {
    const q = queue<string>(uniqueName(), { partitions: 2 });
    // '1@0' routes to partition 0, like the generated ids of partition 0.
    const added = await q.addBulk([
      { data: 'X', opts: { id: '1@0' } },
      { data: 'A' },
      { data: 'B' },
      { data: 'C' },
    ]);
    expect(added.every((a) => a.isNew)).toBe(true);
    expect(new Set(added.map((a) => a.id)).size).toBe(4);
    for (const [i, a] of added.entries()) expect((await q.getJob(a.id))?.data).toBe(['X', 'A', 'B', 'C'][i]);
  });

  it('an unknown parent at item 1 001 refuses the whole call and writes nothing', async () => {
    const name = uniqueName();
    const q = queue(name);
    const items = Array.from({ length: 1_001 }, (_, i) => ({ data: { i } }));
    items.push({ data: { i: -1 }, opts: { dependsOn: ['missing'] } } as never);
    await expect(q.addBulk(items)).rejects.toBeInstanceOf(JobNotFoundError);
    expect(await keysOf(name)).toEqual([]);
  });

  it('an unknown parent in one partition refuses the whole call: no partition is written', async () => {
    const name = uniqueName();
    const q = queue(name, { partitions: 4 });
    // Two partition keys that land in different partitions.
    const keys = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5'];
    const a = keys[0]!;
    const b = keys.find((k) => hashPartition(k, 4) !== hashPartition(a, 4))!;
    const items = [
      ...Array.from({ length: 1_500 }, (_, i) => ({ data: { i }, opts: { partitionKey: a } })),
      { data: {}, opts: { id: 'p', partitionKey: b } },
      { data: {}, opts: { dependsOn: ['p'], partitionKey: b } }, // added earlier in the call: fine
      { data: {}, opts: { dependsOn: ['missing'], partitionKey: b } },
    ];
    await expect(q.addBulk(items)).rejects.toBeInstanceOf(JobNotFoundError);
    // Only the partition count recorded when the queue was opened.
    const left = await keysOf(name);
    for (const k of left) expect(await fx.redis.type(k)).toBe('hash');
    expect(await Promise.all(left.map((k) => fx.redis.hkeys(k)))).toEqual(left.map(() => ['partitions']));
    expect((await q.counts()).waiting).toBe(0);
  });

  it(`takes ${MAX_BULK} jobs of every kind in one call (chunked inside the script) and refuses one more`, async () => {
    const name = uniqueName();
    const q = queue<{ i: number }>(name);
    await q.add({ i: -1 }, { id: '5' }); // a generated number already taken
    const items = Array.from({ length: MAX_BULK }, (_, i) => {
      const kind = i % 5;
      if (kind === 0) return { data: { i }, opts: { id: `e${i}` } };
      if (kind === 1) return { data: { i }, opts: { delayMs: 60_000 } };
      if (kind === 2) return { data: { i }, opts: { priority: (i % 3) - 1 } };
      if (kind === 3) return { data: { i }, opts: { dependsOn: [`e${i - 3}`] } };
      return { data: { i } };
    });
    const added = await q.addBulk(items);
    expect(added).toHaveLength(MAX_BULK);
    expect(added.every((a) => a.isNew)).toBe(true);
    expect(new Set(added.map((a) => a.id)).size).toBe(MAX_BULK);
    expect(added.some((a) => a.id === '5')).toBe(false);
    expect(await q.counts()).toMatchObject({ waiting: 6_000 + 1, delayed: 2_000, blocked: 2_000 });
    expect((await q.getJob(added[MAX_BULK - 1]!.id))?.data).toEqual({ i: MAX_BULK - 1 });
    // FIFO at priority 0 across the script's chunks: explicit and plain jobs in the order given.
    const order = (await q.getJobs('waiting', { limit: 10_000 }))
      .map((j) => j.data.i)
      .filter((i) => i % 5 !== 2);
    expect(order.slice(1)).toEqual(items.map((_, i) => i).filter((i) => i % 5 === 0 || i % 5 === 4));

    const other = uniqueName();
    const tooMany = Array.from({ length: MAX_BULK + 1 }, () => ({ data: { i: 0 } }));
    await expect(queue(other).addBulk(tooMany)).rejects.toThrow(
      new ValidationError(`addBulk takes at most ${MAX_BULK} jobs per call, got ${MAX_BULK + 1}`),
    );
    expect(await keysOf(other)).toEqual([]);
  });
});
