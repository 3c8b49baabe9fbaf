/**
 * The last "killed unrun" case: a worker killed with kill -9 while it holds PREFETCHED jobs (claimed
 * beyond its free slots). Claims used to count an attempt for every job they leased, so those jobs came
 * back from recovery with an attempt spent that never ran; with `maxAttempts: 1` they ended dead with
 * LeaseExpiredError without ever running. A claim now counts nothing: a job's attempt is counted by its
 * start mark when its processor runs (src/worker/starter.ts). Real child processes and real signals,
 * like test/processes/crash.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_PREFIX, FREE_RETURNS } from '../../src/defaults.js';
import { Queue, Worker } from '../../src/index.js';
import { queueKeys } from '../../src/store/keys.js';
import { uniqueName, useRedis, waitUntil } from '../helpers/setup.js';
import { useWorkerChildren } from '../helpers/worker-children.js';

const fx = useRedis();
const open: { close(): Promise<void> }[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});
// Registered after the hook above, so it runs first: children are killed before the queues close.
const startChild = useWorkerChildren();

/** The job's lease was renewed: its deadline in `active` is past the one its claim set (startedAt + lease). */
async function renewed(queue: Queue, id: string, leaseMs: number): Promise<boolean> {
  const score = await fx.redis.zscore(queueKeys(DEFAULT_PREFIX, queue.name).active, id);
  const info = await queue.getJob(id);
  return score !== null && info?.startedAt !== undefined && Number(score) > info.startedAt + leaseMs;
}

describe('kill -9 of a worker holding prefetched jobs', () => {
  for (const prefetch of [3, 'auto'] as const) {
    it(`every prefetched job still runs once and completes, with maxAttempts 1 (prefetch ${prefetch})`, async () => {
      const name = uniqueName();
      const queue = new Queue<{ fast?: boolean; n: number }, string>(name, { connection: fx.url });
      open.push(queue);
      const leaseMs = 600;
      const { child, messages } = startChild(fx.url, name, leaseMs, { concurrency: 1, prefetch });
      await waitUntil(() => messages.some((m) => m.ready), 'child ready');
      if (prefetch === 'auto') {
        // Fast jobs first, so that the automatic prefetch grows past 0 (it follows attempt durations).
        const warm = await queue.addBulk(
          Array.from({ length: 50 }, (_, n) => ({ data: { fast: true, n }, opts: { leaseMs } })),
        );
        await waitUntil(
          () => messages.filter((m) => m.completed).length === warm.length,
          'warm-up jobs completed',
        );
      }
      // One claim sees them all: the first (which blocks in the child) starts, the rest are prefetched.
      const added = await queue.addBulk(
        Array.from({ length: 4 }, (_, n) => ({
          data: { fast: n > 0, n },
          opts: { leaseMs, maxAttempts: 1 },
        })),
      );
      const [blocked, ...prefetched] = added.map((a) => a.id);
      await waitUntil(() => messages.some((m) => m.started === blocked), 'first job started in the child');
      await waitUntil(async () => (await queue.counts()).active === 4, 'the other three prefetched (active)');
      // Renewed once: a lease lost before its first renewal would be refunded (see the poison test below).
      await waitUntil(() => renewed(queue, blocked!, leaseMs), 'the blocked job renewed');
      expect(messages.some((m) => prefetched.includes(m.started ?? ''))).toBe(false);
      child.kill('SIGKILL');

      const ranBy = new Map<string, number>();
      const rescuer = new Worker<{ n: number }, string>(
        name,
        (job) => {
          ranBy.set(job.id, (ranBy.get(job.id) ?? 0) + 1);
          return `rescued attempt ${job.attempt}`;
        },
        { connection: fx.url, recoverIntervalMs: 50 },
      );
      open.push(rescuer);
      for (const id of prefetched) {
        expect(await queue.waitFor(id, { timeoutMs: 10_000 })).toBe('rescued attempt 1');
        const info = await queue.getJob(id);
        expect(info).toMatchObject({ state: 'completed', attempts: 1, errors: [] });
        expect(ranBy.get(id)).toBe(1);
      }
      // The blocked job really ran (in the child): its one attempt ended with the lease.
      await waitUntil(
        async () => (await queue.getJob(blocked!))?.state === 'dead',
        'the blocked job ended dead',
      );
      const info = await queue.getJob(blocked!);
      expect(info!.attempts).toBe(1);
      expect(info!.errors.map((e) => e.code)).toEqual(['ERR_LEASE_EXPIRED']);
      expect(ranBy.has(blocked!)).toBe(false);
    }, 30_000);
  }
});

describe('kill -9 of a worker running a job', () => {
  it("a maxAttempts 1 job whose start was recorded ends dead with the lost attempt's error: it runs once", async () => {
    const name = uniqueName();
    const queue = new Queue<{ n: number }, string>(name, { connection: fx.url });
    open.push(queue);
    const leaseMs = 800;
    const job = await queue.add({ n: 1 }, { leaseMs, maxAttempts: 1 });
    const first = startChild(fx.url, name, leaseMs, { concurrency: 1, prefetch: 0 });
    await waitUntil(() => first.messages.some((m) => m.started === job.id), 'started in the first worker');
    // The start mark leaves without being awaited; once Redis has it, the attempt is spent.
    await waitUntil(async () => (await queue.getJob(job.id))?.startedAt !== undefined, 'start recorded');
    first.child.kill('SIGKILL');
    const second = startChild(fx.url, name, leaseMs, { concurrency: 1, prefetch: 0 });
    await waitUntil(async () => (await queue.getJob(job.id))?.state === 'dead', 'dead', 20_000);
    const info = (await queue.getJob(job.id))!;
    expect(info).toMatchObject({ state: 'dead', attempts: 1, attemptsLeft: 0 });
    expect(info.errors.map((e) => [e.attempt, e.code])).toEqual([[1, 'ERR_LEASE_EXPIRED']]);
    expect(
      second.messages.some((m) => m.started === job.id),
      'the second worker never ran it',
    ).toBe(false);
  }, 30_000);

  it(`a processor that kills its worker before its start mark leaves comes back free ${FREE_RETURNS} times, then runs only with its start counted and is charged: no endless loop`, async () => {
    const name = uniqueName();
    const queue = new Queue<{ die: boolean }, string>(name, { connection: fx.url });
    open.push(queue);
    const leaseMs = 300;
    const job = await queue.add({ die: true }, { leaseMs, maxAttempts: 1 });
    // Each child claims the job (recovering it first once its lease expired) and dies as it starts it,
    // in the same turn of its event loop, so its start mark never leaves: back free. After FREE_RETURNS
    // of those, a worker marks the start and waits for Redis before calling the processor, so the
    // death that follows is a marked start's, charged.
    let children = 0;
    while ((await queue.getJob(job.id))?.state !== 'dead') {
      expect(children, 'children started').toBeLessThan(FREE_RETURNS + 3);
      const { child } = startChild(fx.url, name, leaseMs, { concurrency: 1, prefetch: 0 });
      children++;
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      await Promise.race([
        exited,
        waitUntil(async () => (await queue.getJob(job.id))?.state === 'dead', 'dead', 20_000),
      ]);
      child.kill('SIGKILL');
    }
    const info = (await queue.getJob(job.id))!;
    expect(info).toMatchObject({ state: 'dead', attempts: 1, attemptsLeft: 0 });
    expect(info.errors.map((e) => e.code)).toEqual(['ERR_LEASE_EXPIRED']);
    expect(info.errors[0]!.message).toMatch(/stopped renewing it/);
  }, 60_000);
});
