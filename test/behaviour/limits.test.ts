import { describe, expect, it } from 'vitest';
import { Queue, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

describe('queue-wide limits', () => {
  it('the rate limit holds across workers: at most max starts per window', async () => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url });
    open.push(q);
    const starts: number[] = [];
    for (let i = 0; i < 2; i++) {
      const w = new Worker(
        name,
        () => {
          starts.push(Date.now());
        },
        { connection: fx.url, concurrency: 10, limiter: { max: 5, durationMs: 300 } },
      );
      open.push(w);
    }
    await q.addBulk(Array.from({ length: 15 }, () => ({ data: {} })));
    await waitUntil(async () => (await q.counts()).completed === 15, '15 completed');
    // 15 jobs at 5 per 300 ms window need at least two full windows after the first.
    expect(starts.at(-1)! - starts[0]!).toBeGreaterThanOrEqual(2 * 300 - 20);
    // No window of 300 ms (minus timer slack) holds more than 5 starts.
    for (let i = 0; i + 5 < starts.length; i++) expect(starts[i + 5]! - starts[i]!).toBeGreaterThan(250);
  });

  it('global concurrency caps active jobs across workers; held-back workers resume when one finishes', async () => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url });
    open.push(q);
    await q.setGlobalConcurrency(2);
    expect(await q.getGlobalConcurrency()).toBe(2);
    let running = 0;
    let peak = 0;
    for (let i = 0; i < 3; i++) {
      const w = new Worker(
        name,
        async () => {
          running++;
          peak = Math.max(peak, running);
          await new Promise((r) => setTimeout(r, 20));
          running--;
        },
        { connection: fx.url, concurrency: 5, pollIntervalMs: 60_000 },
      );
      open.push(w);
    }
    await q.addBulk(Array.from({ length: 20 }, () => ({ data: {} })));
    // pollIntervalMs is a minute: finishing 20 jobs in time proves held-back workers are woken.
    await waitUntil(async () => (await q.counts()).completed === 20, '20 completed');
    expect(peak).toBe(2);
    await q.setGlobalConcurrency(null);
    expect(await q.getGlobalConcurrency()).toBeNull();
  });
});
