import { describe, expect, it } from 'vitest';
import { JobNotFoundError, Queue, ValidationError, Worker } from '../../src/index.js';
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

  it('addJobLog appends to the log job.log writes, from outside the processor, in any state, with the same limits', async () => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url, partitions: 2 });
    open.push(q);
    const { id } = await q.add({}, { id: 'order-7', delayMs: 3_600_000 });
    expect(await q.addJobLog(id, 'queued by the nightly import')).toBe(1);
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const w = new Worker(
      name,
      async (job) => {
        await job.log('from the processor');
        await gate;
      },
      { connection: fx.url, partitions: 2 },
    );
    open.push(w);
    await q.promote(id);
    await waitUntil(async () => (await q.getJob(id))?.logs.length === 2, 'the processor log line');
    expect(await q.addJobLog(id, 'operator: looked at it\nwhile running')).toBe(3);
    release();
    await q.waitFor(id);
    // Finished jobs take lines too; a long line is cut at 2 000 characters; the last 100 are kept.
    expect(await q.addJobLog(id, 'x'.repeat(2_500))).toBe(4);
    for (let i = 0; i < 95; i++) await q.addJobLog(id, `after ${i}`);
    expect(await q.addJobLog(id, 'the 100th')).toBe(100);
    expect((await q.getJob(id))!.logs[0]).toBe('queued by the nightly import');
    expect(await q.addJobLog(id, 'the last')).toBe(100);
    const { logs } = (await q.getJob(id))!;
    expect(logs).toHaveLength(100);
    expect(logs.slice(0, 3)).toEqual([
      'from the processor',
      'operator: looked at it\nwhile running',
      'x'.repeat(2_000),
    ]);
    expect(logs.at(-1)).toBe('the last');
    await expect(q.addJobLog('nope', 'hello')).rejects.toBeInstanceOf(JobNotFoundError);
    await expect(q.addJobLog(id, 42 as never)).rejects.toThrow(ValidationError);
    await expect(q.addJobLog('', 'hello')).rejects.toThrow(ValidationError);
  });
});
