/**
 * `lifo: true` through the public API: a worker runs a backlog newest first, getJob shows the option,
 * an idle worker is handed a lifo add as any plain add, changePriority keeps it first in its new
 * priority, and a value that is not a boolean is refused. The exact claim order (priorities, groups,
 * due jobs, retries) is in test/scripts/order.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { Queue, ValidationError, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

function queue() {
  const q = new Queue<{ n: number }>(uniqueName('lifo'), { connection: fx.url });
  open.push(q);
  return q;
}

describe('lifo', () => {
  it('a worker runs a backlog of lifo jobs newest first, after which the FIFO ones in order', async () => {
    const q = queue();
    await q.pause();
    await q.addBulk([{ data: { n: 1 } }, { data: { n: 2 } }]);
    for (const n of [3, 4, 5]) await q.add({ n }, { lifo: true });
    await q.addBulk([{ data: { n: 6 }, opts: { lifo: true } }]);
    const ran: number[] = [];
    const w = new Worker<{ n: number }>(
      q.name,
      (job) => {
        ran.push(job.data.n);
      },
      { connection: fx.url, concurrency: 1, prefetch: 0 },
    );
    open.push(w);
    await q.resume();
    await waitUntil(() => ran.length === 6, 'all six ran');
    expect(ran).toEqual([6, 5, 4, 3, 1, 2]);
  });

  it('getJob shows lifo: true on a lifo job only', async () => {
    const q = queue();
    const a = await q.add({ n: 1 }, { lifo: true, delayMs: 60_000 });
    const b = await q.add({ n: 2 }, { lifo: false });
    expect((await q.getJob(a.id))?.lifo).toBe(true);
    expect((await q.getJob(b.id))?.lifo).toBeUndefined();
  });

  it('a lifo add is handed to an idle worker inside the add, as a plain one is', async () => {
    const q = queue();
    const w = new Worker(q.name, () => 'ok', { connection: fx.url });
    open.push(w);
    // The worker registers for a handoff once its first claim finds nothing.
    const added = await waitUntil(async () => {
      const r = await q.add({ n: 1 }, { lifo: true });
      return r.state === 'active' ? r : null;
    }, 'a lifo add handed off (state active)');
    await waitUntil(async () => (await q.getJob(added.id))?.state === 'completed', 'it completed');
  });

  it('changePriority puts a waiting lifo job at the front of its new priority', async () => {
    const q = queue();
    const a = await q.add({ n: 1 }, { priority: 5 });
    const b = await q.add({ n: 2 }, { priority: 5 });
    const c = await q.add({ n: 3 }, { priority: 1, lifo: true });
    await q.changePriority(c.id, 5);
    expect((await q.getJobs('waiting')).map((j) => j.id)).toEqual([c.id, a.id, b.id]);
  });

  it('refuses a lifo that is not a boolean, naming the option and the value', async () => {
    const q = queue();
    const bad = q.add({ n: 1 }, { lifo: 'yes' as unknown as boolean });
    await expect(bad).rejects.toBeInstanceOf(ValidationError);
    await expect(bad).rejects.toMatchObject({
      code: 'ERR_INVALID_OPTION',
      message: 'lifo must be true or false, got "yes"',
    });
    await expect(q.addBulk([{ data: { n: 1 }, opts: { lifo: 1 as unknown as boolean } }])).rejects.toThrow(
      /lifo must be true or false, got 1/,
    );
    expect(await q.counts()).toMatchObject({ waiting: 0 });
  });
});
