/**
 * One account of a job's life (issue 32): `attempts` counts starts and is never given back; the budget
 * a snooze, job.sleep or RateLimitError gives back is counted apart (base). So a job that started is
 * never expired as if it had not, and keeps its place in its group after a snooze. Through the public
 * API, with real workers.
 */
import { describe, expect, it } from 'vitest';
import { type Job, Queue, RateLimitError, SnoozeError, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

function queue<D = unknown>() {
  const q = new Queue<D>(uniqueName(), { connection: fx.url });
  open.push(q);
  return q;
}

/** Each way a processor gives its budget back once, on its first start, for `ms`. */
const pauses: Record<string, (job: Job<unknown>, ms: number) => Promise<unknown>> = {
  SnoozeError: async (_job, ms) => {
    throw new SnoozeError(ms);
  },
  'job.sleep': (job, ms) => job.sleep(ms),
  RateLimitError: async (_job, ms) => {
    throw new RateLimitError(ms);
  },
};

describe('a job that started is never expired as if it had not', () => {
  for (const [how, pause] of Object.entries(pauses)) {
    it(`a ttlMs job that ${how}s past its expiry runs again and completes`, async () => {
      const q = queue();
      const runs: number[] = [];
      const w = new Worker(
        q.name,
        async (job) => {
          runs.push(job.attempt);
          if (job.attempt === 1) await pause(job as Job<unknown>, 600);
          return 'done';
        },
        { connection: fx.url, pollIntervalMs: 50 },
      );
      open.push(w);
      const { id } = await q.add({}, { ttlMs: 300, maxAttempts: 1 });
      expect(await q.waitFor(id, { timeoutMs: 10_000 })).toBe('done');
      expect(runs).toEqual([1, 2]);
      const info = (await q.getJob(id))!;
      expect(info).toMatchObject({ state: 'completed', attempts: 2, attemptsLeft: 0, errors: [] });
    });
  }
});

describe('a snoozed job keeps its place in a concurrency-1 group', () => {
  it('A, B, C in one group, A snoozes once on its first start: the order is A, A, B, C', async () => {
    const q = queue<{ n: string }>();
    await q.setGroupLimits({ concurrency: 1 });
    const order: string[] = [];
    const w = new Worker<{ n: string }>(
      q.name,
      (job) => {
        order.push(job.data.n);
        if (job.data.n === 'A' && job.attempt === 1) throw new SnoozeError(0);
        return job.data.n;
      },
      { connection: fx.url, concurrency: 3 },
    );
    open.push(w);
    const jobs = await q.addBulk(['A', 'B', 'C'].map((n) => ({ data: { n }, opts: { group: 'g' } })));
    for (const j of jobs) await q.waitFor(j.id, { timeoutMs: 10_000 });
    expect(order).toEqual(['A', 'A', 'B', 'C']);
  });
});
