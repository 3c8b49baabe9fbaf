import { describe, expect, it } from 'vitest';
import { Queue, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

describe('progress and logs', () => {
  it('a processor reports progress and log lines, stored with the job and bounded', async () => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url });
    const w = new Worker(
      name,
      async (job) => {
        expect(await job.progress({ done: 1, total: 3 })).toBe(true);
        for (let i = 0; i < 105; i++) await job.log(`line ${i}`);
        await job.log('multi\nline "quoted"');
        await job.progress(100);
        return 'ok';
      },
      { connection: fx.url },
    );
    open.push(q, w);
    const job = await q.add({});
    await q.waitFor(job.id);
    const info = await q.getJob(job.id);
    expect(info!.progress).toBe(100);
    expect(info!.logs).toHaveLength(100);
    expect(info!.logs[0]).toBe('line 6');
    expect(info!.logs.at(-1)).toBe('multi\nline "quoted"');
    const listed = await q.getJobs('completed');
    expect(listed[0]!.logs).toHaveLength(100);
  });

  it('progress from an attempt that lost its lease is refused; retention removes progress and logs', async () => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url });
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let reported: boolean | undefined;
    const w = new Worker(
      name,
      async (job) => {
        await job.log('started');
        await gate;
        reported = await job.progress(50);
      },
      { connection: fx.url, retention: { completed: { maxCount: 0 } } },
    );
    open.push(q, w);
    const job = await q.add({});
    await waitUntil(async () => (await q.getJob(job.id))?.logs.length === 1, 'first log line');
    await q.cancel(job.id); // revokes the lease
    release();
    await waitUntil(() => reported !== undefined, 'progress call answered');
    expect(reported).toBe(false);
    expect((await q.getJob(job.id))!.progress).toBeUndefined();
    await q.remove(job.id);
    expect(await fx.redis.hlen(q.keys.annex)).toBe(0);
  });
});
