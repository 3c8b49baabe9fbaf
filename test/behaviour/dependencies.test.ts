import { describe, expect, it } from 'vitest';
import {
  type Job,
  JobNotFoundError,
  Queue,
  UnrecoverableError,
  ValidationError,
  Worker,
} from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

function setup<D = { step: string; fail?: boolean }>(fn: (job: Job<D>) => unknown, opts = {}) {
  const name = uniqueName();
  const q = new Queue<D>(name, { connection: fx.url });
  const w = new Worker<D>(name, fn, { connection: fx.url, concurrency: 5, ...opts });
  open.push(q, w);
  return { q, w };
}

describe('dependencies', () => {
  it('a chain of three runs in order, each child reading its parent results', async () => {
    const order: string[] = [];
    const seen: Record<string, unknown>[] = [];
    const { q } = setup(async (job) => {
      order.push(job.data.step);
      seen.push(await job.parentResults());
      return `${job.data.step} done`;
    });
    // Added child-first in one call would refer to unknown parents: parents first, by id.
    const added = await q.addBulk([
      { data: { step: 'extract' }, opts: { id: 'extract', delayMs: 100 } },
      { data: { step: 'transform' }, opts: { id: 'transform', dependsOn: ['extract'] } },
      { data: { step: 'load' }, opts: { id: 'load', dependsOn: ['transform'] } },
    ]);
    expect(added.map((a) => a.state)).toEqual(['delayed', 'blocked', 'blocked']);
    expect((await q.counts()).blocked).toBe(2);
    expect((await q.getJobs('blocked')).map((j) => j.id)).toEqual(['load', 'transform']);
    expect(await q.waitFor('load')).toBe('load done');
    expect(order).toEqual(['extract', 'transform', 'load']);
    expect(seen).toEqual([{}, { extract: 'extract done' }, { transform: 'transform done' }]);
    expect((await q.getJob('load'))!.dependsOn).toEqual(['transform']);
    expect((await q.counts()).blocked).toBe(0);
  });

  it('a child waits for all its parents, then becomes waiting atomically', async () => {
    const ran: string[] = [];
    const { q } = setup((job) => {
      ran.push(job.id);
    });
    const a = await q.add({ step: 'a' }, { delayMs: 50 });
    const b = await q.add({ step: 'b' }, { delayMs: 150 });
    const c = await q.add({ step: 'c' }, { id: 'child', dependsOn: [a.id, b.id] });
    expect(c.state).toBe('blocked');
    await q.waitFor(a.id);
    expect((await q.getJob('child'))!.state).toBe('blocked');
    await q.waitFor('child');
    expect(ran).toEqual([a.id, b.id, 'child']);
  });

  it('a dead parent fails its children and grandchildren with DependencyFailedError, unless they ignore it', async () => {
    const ran: string[] = [];
    const { q } = setup((job) => {
      ran.push(job.id);
      if (job.data.fail) throw new UnrecoverableError('parent broke');
      return 'ok';
    });
    await q.add({ step: 'p', fail: true }, { id: 'p', delayMs: 50 });
    await q.add({ step: 'c' }, { id: 'c', dependsOn: ['p'] });
    await q.add({ step: 'g' }, { id: 'g', dependsOn: ['c'] });
    await q.add({ step: 'tolerant' }, { id: 't', dependsOn: ['p'], ignoreDependencyFailure: true });
    await expect(q.waitFor('g')).rejects.toMatchObject({ code: 'ERR_JOB_DEAD' });
    expect(await q.waitFor('t')).toBe('ok');
    for (const id of ['c', 'g']) {
      const info = await q.getJob(id);
      expect(info).toMatchObject({ state: 'dead', attempts: 0 });
      expect(info!.errors[0]).toMatchObject({ code: 'ERR_DEPENDENCY_FAILED', name: 'DependencyFailedError' });
    }
    expect(ran.sort()).toEqual(['p', 't']);
    // A job added after its parent died is dead at once.
    expect(await q.add({ step: 'late' }, { id: 'late', dependsOn: ['p'] })).toMatchObject({ state: 'dead' });
  });

  it('a completed parent releases at add time; cancelling or removing a parent fails its children', async () => {
    const { q } = setup(() => 'ok');
    const done = await q.add({ step: 'done' });
    await q.waitFor(done.id);
    expect((await q.add({ step: 'x' }, { dependsOn: [done.id] })).state).toBe('waiting');
    const p1 = await q.add({ step: 'p1' }, { delayMs: 60_000 });
    const p2 = await q.add({ step: 'p2' }, { delayMs: 60_000 });
    await q.add({ step: 'c1' }, { id: 'c1', dependsOn: [p1.id] });
    await q.add({ step: 'c2' }, { id: 'c2', dependsOn: [p2.id] });
    await q.cancel(p1.id);
    await q.remove(p2.id);
    expect((await q.getJob('c1'))!.state).toBe('dead');
    expect((await q.getJob('c2'))!.state).toBe('dead');
    expect((await q.counts()).blocked).toBe(0);
  });

  it('bad dependencies are refused before anything is written', async () => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url });
    open.push(q);
    await expect(q.add({}, { dependsOn: ['nope'] })).rejects.toBeInstanceOf(JobNotFoundError);
    await expect(q.add({}, { id: 'me', dependsOn: ['me'] })).rejects.toThrow(/cannot depend on itself/);
    await expect(q.add({}, { dependsOn: 'a' as never })).rejects.toBeInstanceOf(ValidationError);
    await expect(
      q.addBulk([
        { data: {}, opts: { id: 'ok1' } },
        { data: {}, opts: { dependsOn: ['missing'] } },
      ]),
    ).rejects.toBeInstanceOf(JobNotFoundError);
    expect(await fx.redis.keys(`${q.keys.tag}*`)).toEqual([]);
  });

  it('a child removed and added again under its id with another parent is not released by its old parent', async () => {
    const { q } = setup(() => 'ok');
    const old = await q.add({ step: 'old' }, { delayMs: 60_000 });
    const other = await q.add({ step: 'other' }, { delayMs: 60_000 });
    await q.add({ step: 'c' }, { id: 'c', dependsOn: [old.id] });
    await q.remove('c');
    expect((await q.add({ step: 'c2' }, { id: 'c', dependsOn: [other.id] })).state).toBe('blocked');
    await q.promote(old.id);
    await q.waitFor(old.id); // its completion settles its children atomically
    expect((await q.getJob('c'))!.state).toBe('blocked');
    await q.promote(other.id);
    expect(await q.waitFor('c')).toBe('ok');
  });

  it('a blocked child cancelled, removed and added again is not failed by its old parent', async () => {
    const { q } = setup(() => 'ok');
    const old = await q.add({ step: 'old' }, { delayMs: 60_000 });
    const other = await q.add({ step: 'other' }, { delayMs: 60_000 });
    await q.add({ step: 'c' }, { id: 'c', dependsOn: [old.id] });
    await q.cancel('c');
    expect((await q.getJob('c'))!.state).toBe('dead');
    expect(await fx.redis.hget(q.keys.dependents, old.id)).toBeNull(); // the cancelled child left its parent's list
    await q.remove('c');
    await q.add({ step: 'c2' }, { id: 'c', dependsOn: [other.id] });
    await q.cancel(old.id); // a dead parent fails its children: not this one
    expect((await q.getJob('c'))!.state).toBe('blocked');
    await q.promote(other.id);
    expect(await q.waitFor('c')).toBe('ok');
  });

  it('a link left by a trimmed child never counts twice for the job added again under its id', async () => {
    const { q } = setup(() => 'ok');
    const [p1, p2, p3] = await Promise.all(
      ['p1', 'p2', 'p3'].map((step) => q.add({ step }, { delayMs: 60_000 })),
    );
    await q.add({ step: 'c' }, { id: 'c', dependsOn: [p1!.id, p2!.id] });
    await q.cancel(p1!.id); // c dies, p2 still lists it
    expect((await q.getJob('c'))!.state).toBe('dead');
    // Retention (clean) deletes the dead child with its annex, not p2's link to it.
    await waitUntil(
      async () => (await q.clean('dead')).removed > 0 || (await q.getJob('c')) === null,
      'c cleaned',
    );
    await q.add({ step: 'c2' }, { id: 'c', dependsOn: [p2!.id, p3!.id] });
    await q.promote(p2!.id);
    await q.waitFor(p2!.id);
    expect((await q.getJob('c'))!.state).toBe('blocked'); // still waits for p3
    await q.promote(p3!.id);
    expect(await q.waitFor('c')).toBe('ok');
  });
});
