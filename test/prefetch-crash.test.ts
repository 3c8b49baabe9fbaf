/**
 * The last "killed unrun" case: a worker killed with kill -9 while it holds PREFETCHED jobs (claimed
 * beyond its free slots). Claims used to count an attempt for every job they leased, so those jobs came
 * back from recovery with an attempt spent that never ran; with `maxAttempts: 1` they ended dead with
 * LeaseExpiredError without ever running. Prefetched jobs are now reserved (no attempt counted) until
 * begin.lua starts them. Real child processes and real signals, like test/crash.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Queue, Worker } from '../src/index.js';
import { uniqueName, useRedis, waitUntil } from './helpers/setup.js';
import { useWorkerChildren } from './helpers/worker-children.js';

const fx = useRedis();
const open: { close(): Promise<void> }[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});
// Registered after the hook above, so it runs first: children are killed before the queues close.
const startChild = useWorkerChildren();

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
