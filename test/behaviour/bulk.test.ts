/** Bulk admin operations (queue.retryJobs / removeJobs, src/queue/bulk.ts) that the CLI and dashboard share. */
import { describe, expect, it } from 'vitest';
import { Queue, ValidationError } from '../../src/index.js';
import { changeEach, retryJobs } from '../../src/queue/bulk.js';
import { closeAfterEach, uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
function queue(name = uniqueName()): Queue {
  const q = new Queue(name, { connection: fx.url });
  open.push(q);
  return q;
}

/** n jobs made dead at once (cancel: dead without running). */
async function deadJobs(q: Queue, n: number, prefix = 'd'): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(4, '0')}`);
  await q.addBulk(ids.map((id) => ({ data: {}, opts: { id, delayMs: 60_000 } })));
  await changeEach(ids, (id) => q.cancel(id));
  return ids;
}

describe('bulk admin operations', () => {
  it('retryJobs retries every dead job (the default state), oldest first, and leaves none dead', async () => {
    const q = queue();
    const ids = await deadJobs(q, 30);
    const r = await q.retryJobs();
    expect(r).toEqual({ done: ids, failed: [], more: false });
    expect((await q.counts()).dead).toBe(0);
    expect((await q.counts()).waiting).toBe(30);
  });

  it('retryJobs stops at max and says more are left; the next call retries the rest', async () => {
    const q = queue();
    const ids = await deadJobs(q, 1_205);
    const first = await q.retryJobs({ max: 1_200 });
    expect(first.more).toBe(true);
    expect(first.done).toEqual(ids.slice(0, 1_200));
    const second = await q.retryJobs({ max: 1_200 });
    expect(second).toEqual({ done: ids.slice(1_200), failed: [], more: false });
  });

  it('a snapshot: jobs that die again while the call runs are not retried again in the same call', async () => {
    const q = queue();
    const ids = await deadJobs(q, 30);
    // Each retried job is made dead again before the call goes on, as a processor failing at once would.
    const target = {
      getJobs: q.getJobs.bind(q),
      remove: q.remove.bind(q),
      retry: async (id: string) => {
        await q.retry(id);
        await q.cancel(id);
      },
    };
    const r = await retryJobs(target);
    expect(r).toEqual({ done: ids, failed: [], more: false });
    expect((await q.counts()).dead).toBe(30);
  });

  it('exactly max dead jobs: all retried and more is false', async () => {
    const q = queue();
    await deadJobs(q, 5);
    expect((await q.retryJobs({ max: 5 })).more).toBe(false);
  });

  it('removeJobs removes the jobs of one state and leaves the others', async () => {
    const q = queue();
    await deadJobs(q, 3);
    await q.addBulk([{ data: {}, opts: { delayMs: 60_000 } }, { data: {} }]);
    const r = await q.removeJobs({ state: 'delayed' });
    expect(r.done).toHaveLength(1);
    expect(await q.counts()).toMatchObject({ delayed: 0, waiting: 1, dead: 3 });
  });

  it('refuses a state it cannot apply to, and unknown options, before changing anything', async () => {
    const q = queue();
    await deadJobs(q, 2);
    await expect(q.retryJobs({ state: 'waiting' as 'dead' })).rejects.toBeInstanceOf(ValidationError);
    await expect(q.removeJobs({ state: 'active' as 'dead' })).rejects.toThrow(
      /removeJobs state must be one of/,
    );
    await expect(q.removeJobs({} as { state: 'dead' })).rejects.toBeInstanceOf(ValidationError);
    await expect(q.retryJobs({ max: 0 })).rejects.toThrow(/max/);
    await expect(q.retryJobs({ nope: 1 } as object)).rejects.toBeInstanceOf(ValidationError);
    expect((await q.counts()).dead).toBe(2);
  });

  it('changeEach reports each refusal with its code and carries on with the others', async () => {
    const q = queue();
    const [dead] = await deadJobs(q, 1);
    const r = await changeEach(['missing', dead!, 'missing-too'], (id) => q.retry(id));
    expect(r.done).toEqual([dead]);
    expect(r.failed.map((f) => [f.id, f.code])).toEqual([
      ['missing', 'ERR_JOB_NOT_FOUND'],
      ['missing-too', 'ERR_JOB_NOT_FOUND'],
    ]);
  });
});
