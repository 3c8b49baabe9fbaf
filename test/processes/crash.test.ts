/**
 * Crashes with real processes and real signals: kill -9 of a worker mid-job, SIGSTOP past the lease
 * (stale ack), kill -9 of redis-server with AOF, and dropped connections.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Queue, Worker } from '../../src/index.js';
import { RedisServer } from '../helpers/redis-server.js';
import { uniqueName, useRedis, waitUntil } from '../helpers/setup.js';
import { useWorkerChildren } from '../helpers/worker-children.js';

const fx = useRedis();
const open: { close(): Promise<void> }[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});
// Registered after the hook above, so it runs first: children are killed before the queues close.
const startChild = useWorkerChildren();

describe('crashes', () => {
  it('a worker killed with kill -9 mid-job: the job runs again in another process once the lease expires', async () => {
    const name = uniqueName();
    const queue = new Queue(name, { connection: fx.url });
    open.push(queue);
    const { child, messages } = startChild(fx.url, name, 600);
    await waitUntil(() => messages.some((m) => m.ready), 'child ready');
    const job = await queue.add({}, { leaseMs: 600 });
    await waitUntil(() => messages.some((m) => m.started === job.id), 'job started in the child');
    // Its start mark is sent without being awaited: once Redis has it, the lost lease costs the attempt.
    await waitUntil(async () => (await queue.getJob(job.id))?.startedAt !== undefined, 'start recorded');
    child.kill('SIGKILL');

    const rescuer = new Worker(name, (j) => `rescued attempt ${j.attempt}`, {
      connection: fx.url,
      recoverIntervalMs: 50,
    });
    open.push(rescuer);
    expect(await queue.waitFor(job.id, { timeoutMs: 10_000 })).toBe('rescued attempt 2');
    const info = await queue.getJob(job.id);
    expect(info!.errors.map((e) => e.code)).toEqual(['ERR_LEASE_EXPIRED']);
  });

  it("a worker stopped (SIGSTOP) past its lease: another completes the job, and the first one's late ack is refused", async () => {
    const name = uniqueName();
    const queue = new Queue(name, { connection: fx.url });
    open.push(queue);
    const { child, messages } = startChild(fx.url, name, 500);
    await waitUntil(() => messages.some((m) => m.ready), 'child ready');
    const job = await queue.add({}, { leaseMs: 500 });
    await waitUntil(() => messages.some((m) => m.started === job.id), 'job started in the child');
    // Its start mark is sent without being awaited: once Redis has it, the lost lease costs the attempt.
    await waitUntil(async () => (await queue.getJob(job.id))?.startedAt !== undefined, 'start recorded');
    child.kill('SIGSTOP');

    const other = new Worker(name, (j) => `other attempt ${j.attempt}`, {
      connection: fx.url,
      recoverIntervalMs: 50,
    });
    open.push(other);
    expect(await queue.waitFor(job.id, { timeoutMs: 10_000 })).toBe('other attempt 2');

    child.kill('SIGCONT');
    child.send({ release: job.id });
    const refusal = await waitUntil(() => messages.find((m) => m.error), 'stale ack refused in the child');
    expect(refusal.error).toBe('ERR_STALE_JOB');
    expect(refusal.message).toMatch(/attempt 1: its lease was lost; the job is now completed at attempt 2/);
    expect(messages.some((m) => m.completed === job.id)).toBe(false);
    expect(await queue.getJob(job.id)).toMatchObject({
      state: 'completed',
      result: 'other attempt 2',
      attempts: 2,
    });
  });

  it('redis-server killed with kill -9 and restarted from its AOF loses no accepted job', async () => {
    const server = await new RedisServer({ aof: true }).start();
    try {
      const name = uniqueName();
      const queue = new Queue<{ i: number }>(name, { connection: server.url });
      open.push(queue);
      const done = new Set<number>();
      const worker = new Worker<{ i: number }, void>(
        name,
        async (job) => {
          await new Promise((r) => setTimeout(r, 1));
          done.add(job.data.i);
        },
        {
          connection: server.url,
          concurrency: 10,
          recoverIntervalMs: 100,
          pollIntervalMs: 100,
          retention: { completed: { maxCount: 10_000 } },
        },
      );
      worker.on('error', () => {}); // connection errors are expected while Redis is down
      open.push(worker);
      const accepted = await queue.addBulk(
        Array.from({ length: 1_000 }, (_, i) => ({ data: { i }, opts: { leaseMs: 1_000 } })),
      );
      await waitUntil(() => done.size > 100, 'some jobs done');
      await server.kill();
      await server.start();
      // More jobs after the restart, through the reconnected clients.
      const more = await queue.addBulk(Array.from({ length: 200 }, (_, i) => ({ data: { i: 1_000 + i } })));
      await waitUntil(async () => (await queue.counts()).completed === 1_200, 'all 1 200 completed', 20_000);
      const counts = await queue.counts();
      expect(counts).toEqual({ waiting: 0, delayed: 0, blocked: 0, active: 0, completed: 1_200, dead: 0 });
      for (const a of [...accepted, ...more]) expect((await queue.getJob(a.id))?.state).toBe('completed');
      expect(done.size).toBe(1_200);
    } finally {
      await Promise.all(open.splice(0).map((c) => c.close()));
      await server.stop();
    }
  });

  it('a worker whose connection drops during start-up retries and then processes jobs', async () => {
    const name = uniqueName();
    const queue = new Queue(name, { connection: fx.url });
    open.push(queue);
    await queue.add({}, { id: 'first' });
    // Hold writes so the worker's first heartbeat (a script) is in flight, then cut its connections.
    await fx.redis.call('CLIENT', 'PAUSE', '5000', 'WRITE');
    const errors: string[] = [];
    const worker = new Worker(name, () => 'done', { connection: fx.url, pollIntervalMs: 60_000 });
    worker.on('error', (e) => errors.push(e.code));
    open.push(worker);
    try {
      await waitUntil(
        async () => /cmd=(evalsha|fcall)/.test(String(await fx.redis.call('CLIENT', 'LIST'))),
        'heartbeat held',
      );
      await fx.redis.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    } finally {
      await fx.redis.call('CLIENT', 'UNPAUSE');
    }
    expect(await queue.waitFor('first', { timeoutMs: 10_000 })).toBe('done');
    expect(errors).toContain('ERR_CONNECTION');
  });

  it('the rate limit holds across two worker processes', async () => {
    const name = uniqueName();
    const queue = new Queue(name, { connection: fx.url });
    open.push(queue);
    const limiter = { limiter: { max: 4, durationMs: 400 } };
    const a = startChild(fx.url, name, 5_000, limiter);
    const b = startChild(fx.url, name, 5_000, limiter);
    await waitUntil(
      () => a.messages.some((m) => m.ready) && b.messages.some((m) => m.ready),
      'children ready',
    );
    await queue.addBulk(Array.from({ length: 12 }, () => ({ data: { fast: true } })));
    const starts = () => [...a.messages, ...b.messages].filter((m) => m.started).map((m) => m.at!);
    await waitUntil(() => starts().length === 12, '12 starts', 15_000);
    const at = starts().sort((x, y) => x - y);
    // Both processes claim; were the limit per process, a window could see 8 starts. None sees more
    // than 4 (less timer slack).
    for (let i = 0; i + 4 < at.length; i++) expect(at[i + 4]! - at[i]!).toBeGreaterThan(350);
    expect(at.at(-1)! - at[0]!).toBeGreaterThanOrEqual(2 * 400 - 50);
  });

  it('a worker whose connections are killed reconnects and finishes every job exactly once in Redis', async () => {
    const name = uniqueName();
    const queue = new Queue<{ i: number }>(name, { connection: fx.url });
    open.push(queue);
    const worker = new Worker<{ i: number }, number>(
      name,
      async (job) => {
        await new Promise((r) => setTimeout(r, 2));
        return job.data.i;
      },
      { connection: fx.url, concurrency: 20, pollIntervalMs: 100, recoverIntervalMs: 100 },
    );
    worker.on('error', () => {});
    open.push(worker);
    await worker.start();
    await queue.addBulk(Array.from({ length: 500 }, (_, i) => ({ data: { i }, opts: { leaseMs: 1_000 } })));
    await waitUntil(async () => (await queue.counts()).completed > 50, 'progress');
    await fx.redis.client('KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    await waitUntil(async () => (await queue.counts()).completed === 500, 'all completed', 20_000);
    const jobs = await queue.getJobs('completed', { limit: 500 });
    expect(jobs.every((j) => j.result === j.data.i)).toBe(true);
  });
});
