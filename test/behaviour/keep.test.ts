/**
 * A job's own retention (issue 15): add(data, { keep: { completed: false } }) deletes the job as soon
 * as it completes, `dead: false` as soon as it ends dead, beside the worker's retention rules.
 */
import { describe, expect, it } from 'vitest';
import { Queue, ValidationError, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

describe('per-job retention (keep)', () => {
  it('deletes a completed job with keep.completed false and a dead one with keep.dead false; keeps the others', async () => {
    const q = new Queue<{ fail: boolean }>(uniqueName(), { connection: fx.url });
    open.push(q);
    const w = new Worker<{ fail: boolean }>(
      q.name,
      (job) => {
        if (job.data.fail) throw new Error('no');
        return 'ok';
      },
      { connection: fx.url },
    );
    open.push(w);
    const gone = await q.add({ fail: false }, { keep: { completed: false } });
    const kept = await q.add({ fail: false }, { keep: { dead: false } });
    const goneDead = await q.add({ fail: true }, { maxAttempts: 1, keep: { dead: false, completed: true } });
    const keptDead = await q.add({ fail: true }, { maxAttempts: 1, keep: { completed: false } });
    const plain = await q.add({ fail: false });
    // Deleted at completion, like retention 0: its result is gone with it (waitFor finds no job).
    await waitUntil(
      async () => (await q.getJob(gone.id)) === null && (await q.counts()).completed >= 1,
      'gone',
    );
    await q.waitFor(plain.id);
    await q.waitFor(kept.id);
    await waitUntil(async () => (await q.counts()).dead === 1, 'one dead kept');
    await waitUntil(async () => (await q.getJob(goneDead.id)) === null, 'the unkept dead job deleted');
    expect(await q.getJob(gone.id)).toBeNull();
    expect(await q.getJob(kept.id)).toMatchObject({
      state: 'completed',
      keep: { completed: true, dead: false },
    });
    expect(await q.getJob(keptDead.id)).toMatchObject({
      state: 'dead',
      keep: { completed: false, dead: true },
    });
    expect((await q.getJob(plain.id))!.keep).toBeUndefined();
    expect(await q.counts()).toMatchObject({ completed: 2, dead: 1 });
  });

  it('refuses bad keep options with a ValidationError and writes nothing', async () => {
    const q = new Queue(uniqueName(), { connection: fx.url });
    open.push(q);
    await expect(q.add({}, { keep: { completed: 0 as never } })).rejects.toThrow(ValidationError);
    await expect(q.add({}, { keep: { forever: true } as never })).rejects.toThrow(ValidationError);
    expect(await q.counts()).toMatchObject({ waiting: 0 });
  });
});
