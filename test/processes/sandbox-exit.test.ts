/**
 * A sandbox that exits just after its job returned (issue 33, defect 1): the pool must not charge the
 * next job for that exit. A job given to a sandbox that dies before taking it runs in another one.
 */
import { describe, expect, it } from 'vitest';
import { type Job, Queue, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
const EXIT_AFTER = new URL('../fixtures/sandbox/exit-after-return.mjs', import.meta.url);

describe('a sandbox that exits just after its job returned', () => {
  it.each(['thread', 'process'] as const)(
    'in %s mode never takes the next job: 30 jobs with maxAttempts 1 all complete, none failed',
    async (mode) => {
      const name = uniqueName();
      const q = new Queue(name, { connection: fx.url });
      const w = new Worker(name, EXIT_AFTER, { connection: fx.url, sandbox: mode, concurrency: 3 });
      const failed: string[] = [];
      w.on('failed', (job: Job, err: Error) => failed.push(`${job.id}: ${err.message}`));
      open.push(w, q);
      const jobs = await q.addBulk(
        Array.from({ length: 30 }, (_, n) => ({ data: { n }, opts: { maxAttempts: 1 } })),
      );
      const results = await Promise.allSettled(jobs.map((j) => q.waitFor(j.id)));
      expect(failed).toEqual([]);
      expect(await q.counts()).toMatchObject({ completed: 30, dead: 0 });
      expect(results.map((r) => (r.status === 'fulfilled' ? r.value : String(r.reason)))).toEqual(
        Array.from({ length: 30 }, (_, n) => ({ n })),
      );
      // Each ran once: the attempt a dying sandbox was given back is not counted.
      for (const j of jobs) expect((await q.getJob(j.id))!.attempts).toBe(1);
    },
    // Each of the 30 jobs starts a sandbox: up to ~1 s each from source on a loaded machine.
    180_000,
  );
});
