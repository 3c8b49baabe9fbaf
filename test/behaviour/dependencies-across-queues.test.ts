import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import {
  type Job,
  JobNotFoundError,
  Queue,
  UnrecoverableError,
  ValidationError,
  Worker,
} from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

type Step = { step: string; fail?: boolean };

/** A parent queue and a child queue, each with its worker (or none with `workers: false`). */
function pair(
  childFn: (job: Job<Step>) => unknown = () => 'child done',
  opts: { parentPartitions?: number; childPartitions?: number; workers?: boolean } = {},
) {
  const parentName = uniqueName('parents');
  const childName = uniqueName('children');
  const parents = new Queue<Step>(parentName, { connection: fx.url, partitions: opts.parentPartitions ?? 1 });
  const children = new Queue<Step>(childName, { connection: fx.url, partitions: opts.childPartitions ?? 1 });
  open.push(parents, children);
  const startParents = () => {
    const w = new Worker<Step>(
      parentName,
      (job) => {
        if (job.data.fail) throw new UnrecoverableError('parent broke');
        return `${job.data.step} done`;
      },
      { connection: fx.url, partitions: opts.parentPartitions ?? 1, concurrency: 5 },
    );
    open.push(w);
    return w;
  };
  const startChildren = () => {
    const w = new Worker<Step>(childName, childFn, {
      connection: fx.url,
      partitions: opts.childPartitions ?? 1,
      concurrency: 5,
    });
    open.push(w);
    return w;
  };
  if (opts.workers !== false) {
    startParents();
    startChildren();
  }
  return { parents, children, parentName, childName, startParents, startChildren };
}

describe('dependencies across queues', () => {
  it('a child waits for a parent of another queue, then runs and reads its result by queue:id', async () => {
    const seen: Record<string, unknown>[] = [];
    const { parents, children, parentName, startParents, startChildren } = pair(
      async (job) => {
        seen.push(await job.parentResults());
        return `${job.data.step} done`;
      },
      { workers: false },
    );
    const p = await parents.add({ step: 'extract' }, { id: 'extract' });
    const local = await children.add({ step: 'local' }, { id: 'local' });
    const c = await children.add(
      { step: 'load' },
      { id: 'load', dependsOn: [{ queue: parentName, id: p.id }, local.id] },
    );
    expect(c).toEqual({ id: 'load', isNew: true, state: 'blocked' });
    const info = await children.getJob('load');
    expect(info).toMatchObject({ state: 'blocked', dependsOn: ['local'] });
    expect(info!.dependsOnQueues).toEqual([{ queue: parentName, id: 'extract' }]);
    // The children's worker runs `local`; the child still waits for the other queue's parent.
    startChildren();
    await children.waitFor('local');
    expect((await children.getJob('load'))!.state).toBe('blocked');
    startParents();
    expect(await children.waitFor('load', { timeoutMs: 10_000 })).toBe('load done');
    expect(seen.at(-1)).toEqual({ local: 'local done', [`${parentName}:extract`]: 'extract done' });
  });

  it('a dead parent fails the child with DependencyFailedError, cascading in the child queue', async () => {
    const ran: string[] = [];
    const { parents, children, parentName } = pair((job) => {
      ran.push(job.id);
    });
    await parents.add({ step: 'p', fail: true }, { id: 'p', delayMs: 50 });
    await children.add({ step: 'c' }, { id: 'c', dependsOn: [{ queue: parentName, id: 'p' }] });
    await children.add({ step: 'g' }, { id: 'g', dependsOn: ['c'] });
    await expect(children.waitFor('g', { timeoutMs: 10_000 })).rejects.toMatchObject({
      code: 'ERR_JOB_DEAD',
    });
    const c = await children.getJob('c');
    expect(c).toMatchObject({ state: 'dead', attempts: 0 });
    expect(c!.errors[0]).toMatchObject({ code: 'ERR_DEPENDENCY_FAILED', name: 'DependencyFailedError' });
    expect(c!.errors[0]!.message).toContain(`parent job p of queue ${parentName} is dead`);
    expect((await children.getJob('g'))!.state).toBe('dead');
    expect(ran).toEqual([]);
    expect((await children.counts()).blocked).toBe(0);
  });

  it('with ignoreDependencyFailure a dead parent counts as finished', async () => {
    const { parents, children, parentName } = pair(async (job) => job.parentResults());
    await parents.add({ step: 'p', fail: true }, { id: 'p', delayMs: 50 });
    await children.add(
      { step: 't' },
      { id: 't', dependsOn: [{ queue: parentName, id: 'p' }], ignoreDependencyFailure: true },
    );
    expect(await children.waitFor('t', { timeoutMs: 10_000 })).toEqual({ [`${parentName}:p`]: undefined });
  });

  it('a parent completed (or dead) before the add: the child runs at once (or is dead at once)', async () => {
    const { parents, children, parentName, startParents } = pair(() => 'ran', { workers: false });
    const w = startParents();
    await parents.add({ step: 'ok' }, { id: 'ok' });
    await parents.add({ step: 'bad', fail: true }, { id: 'bad' });
    await parents.waitFor('ok');
    await expect(parents.waitFor('bad')).rejects.toMatchObject({ code: 'ERR_JOB_DEAD' });
    await w.close();
    const a = await children.add({ step: 'a' }, { dependsOn: [{ queue: parentName, id: 'ok' }] });
    expect(a.state).toBe('waiting');
    const b = await children.add({ step: 'b' }, { dependsOn: [{ queue: parentName, id: 'bad' }] });
    expect(b.state).toBe('dead');
    expect((await children.getJob(b.id))!.errors[0]).toMatchObject({ code: 'ERR_DEPENDENCY_FAILED' });
    // Nothing was linked in the parents' queue, nothing is left to link in the children's.
    const redis = new Redis(fx.url);
    try {
      expect(
        await redis.exists(`{surety:${parentName}}:xdependents`, `{surety:${children.name}}:xlinks`),
      ).toBe(0);
    } finally {
      redis.disconnect();
    }
  });

  it('a parent that does not exist is refused with a typed error naming its queue, and nothing is written', async () => {
    const { parents, children, parentName } = pair(() => 'ran', { workers: false });
    await parents.add({ step: 'p' }, { id: 'p' });
    const err = await children
      .addBulk([
        { data: { step: 'ok' }, opts: { id: 'fine', dependsOn: [{ queue: parentName, id: 'p' }] } },
        { data: { step: 'x' }, opts: { id: 'x', dependsOn: [{ queue: parentName, id: 'nope' }] } },
      ])
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JobNotFoundError);
    expect(err).toMatchObject({ code: 'ERR_JOB_NOT_FOUND', jobId: 'nope', queue: parentName });
    expect((err as Error).message).toContain(`"nope" of queue "${parentName}"`);
    // A queue that never existed: the same error, and no layout recorded for it.
    await expect(
      children.add({ step: 'y' }, { dependsOn: [{ queue: 'never-made', id: '1' }] }),
    ).rejects.toMatchObject({ code: 'ERR_JOB_NOT_FOUND', queue: 'never-made' });
    expect(await children.counts()).toMatchObject({ waiting: 0, blocked: 0, dead: 0 });
    const redis = new Redis(fx.url);
    try {
      expect(await redis.keys('*never-made*')).toEqual([]);
      expect(await redis.exists(`{surety:${parentName}}:xdependents`)).toBe(0);
    } finally {
      redis.disconnect();
    }
  });

  it('refuses malformed parents with a ValidationError naming the option', async () => {
    const { children } = pair(() => 'ran', { workers: false });
    await expect(
      children.add({ step: 'a' }, { dependsOn: [{ queue: 'bad:name', id: '1' }] }),
    ).rejects.toMatchObject({
      code: 'ERR_INVALID_QUEUE_NAME',
    });
    await expect(
      children.add(
        { step: 'a' },
        { dependsOn: [{ queue: 'q' } as unknown as { queue: string; id: string }] },
      ),
    ).rejects.toThrow(/dependsOn\[0\] must be a job id or \{ queue, id \}/);
    await expect(
      children.add(
        { step: 'a' },
        { dependsOn: [{ queue: 'q', id: '1', extra: 1 } as unknown as { queue: string; id: string }] },
      ),
    ).rejects.toBeInstanceOf(ValidationError);
  });

  it('a { queue, id } of the queue itself is a plain local parent', async () => {
    const { children } = pair(() => 'ran', { workers: false });
    await children.add({ step: 'p' }, { id: 'p', delayMs: 60_000 });
    const c = await children.add({ step: 'c' }, { id: 'c', dependsOn: [{ queue: children.name, id: 'p' }] });
    expect(c.state).toBe('blocked');
    expect(await children.getJob('c')).toMatchObject({ dependsOn: ['p'] });
    expect((await children.getJob('c'))!.dependsOnQueues).toBeUndefined();
  });

  it('cancelling or removing the parent fails the children of the other queue at once', async () => {
    const { parents, children, parentName } = pair(() => 'ran', { workers: false });
    await parents.add({ step: 'p1' }, { id: 'p1', delayMs: 60_000 });
    await parents.add({ step: 'p2' }, { id: 'p2', delayMs: 60_000 });
    await children.add({ step: 'c1' }, { id: 'c1', dependsOn: [{ queue: parentName, id: 'p1' }] });
    await children.add({ step: 'c2' }, { id: 'c2', dependsOn: [{ queue: parentName, id: 'p2' }] });
    await parents.cancel('p1');
    expect((await children.getJob('c1'))!.state).toBe('dead');
    await parents.remove('p2');
    expect((await children.getJob('c2'))!.state).toBe('dead');
  });

  it('partitioned queues: children across partitions wait for parents across partitions', async () => {
    const { parents, children, parentName } = pair(async (job) => job.parentResults(), {
      parentPartitions: 3,
      childPartitions: 2,
    });
    const ps = await parents.addBulk(
      Array.from({ length: 6 }, (_, i) => ({ data: { step: `p${i}` }, opts: { delayMs: 100 } })),
    );
    const cs = await children.addBulk(
      Array.from({ length: 6 }, (_, i) => ({
        data: { step: `c${i}` },
        opts: {
          dependsOn: [
            { queue: parentName, id: ps[i]!.id },
            { queue: parentName, id: ps[(i + 1) % 6]!.id },
          ],
        },
      })),
    );
    expect(cs.every((c) => c.state === 'blocked')).toBe(true);
    for (const [i, c] of cs.entries()) {
      expect(await children.waitFor(c.id, { timeoutMs: 10_000 })).toEqual({
        [`${parentName}:${ps[i]!.id}`]: `p${i} done`,
        [`${parentName}:${ps[(i + 1) % 6]!.id}`]: `p${(i + 1) % 6} done`,
      });
    }
  });

  it('a lost link is made by the recovery pass; a lost notification is delivered by it', async () => {
    const { parents, children, parentName } = pair(() => 'ran', { workers: false });
    await parents.add({ step: 'p' }, { id: 'p', delayMs: 60_000 });
    await children.add({ step: 'c' }, { id: 'c', dependsOn: [{ queue: parentName, id: 'p' }] });
    const redis = new Redis(fx.url);
    try {
      const xdeps = `{surety:${parentName}}:xdependents`;
      const link = await redis.hget(xdeps, 'p');
      // The child's link number: the first line of its pending parents (`#n`).
      const n = (await redis.hget(`{surety:${children.name}}:errors`, 'c\x01y'))!.split('\n')[0]!.slice(1);
      expect(link).toBe(`{surety:${children.name}}\tc\t${parentName}\t\t${n}`);
      // As if the adder had crashed before linking: the link is gone, the entry to make it is back.
      await redis.del(xdeps);
      await redis.zadd(
        `{surety:${children.name}}:xlinks`,
        1,
        `c\t{surety:${parentName}}\t${parentName}\t\tp`,
      );
      expect((await children.recoverExpired()).crossQueue).toBe(1);
      expect(await redis.hget(xdeps, 'p')).toBe(link);
      expect(await redis.exists(`{surety:${children.name}}:xlinks`)).toBe(0);
      // As if the parent's worker had crashed before forwarding: the outbox holds the notification.
      await redis.hdel(xdeps, 'p');
      await redis.zadd(
        `{surety:${parentName}}:xnotify`,
        1,
        `c\t{surety:${children.name}}\tc\t${parentName}\t\t${n}\tp`,
      );
      expect((await children.getJob('c'))!.state).toBe('blocked');
      expect((await parents.recoverExpired()).crossQueue).toBe(1);
      expect((await children.getJob('c'))!.state).toBe('waiting');
      // Delivered twice: counted once.
      await redis.zadd(
        `{surety:${parentName}}:xnotify`,
        1,
        `c\t{surety:${children.name}}\tc\t${parentName}\t\t${n}\tp`,
      );
      await parents.recoverExpired();
      expect((await children.getJob('c'))!.state).toBe('waiting');
      expect(await redis.exists(`{surety:${parentName}}:xnotify`)).toBe(0);
    } finally {
      redis.disconnect();
    }
  });

  it('a chain through three queues completes in order', async () => {
    const a = new Queue(uniqueName('a'), { connection: fx.url });
    const b = new Queue(uniqueName('b'), { connection: fx.url });
    const c = new Queue(uniqueName('c'), { connection: fx.url });
    open.push(a, b, c);
    const order: string[] = [];
    for (const q of [a, b, c]) {
      const w = new Worker(
        q.name,
        (job) => {
          order.push(q.name);
          return job.id;
        },
        { connection: fx.url },
      );
      open.push(w);
    }
    const pa = await a.add({}, { delayMs: 100 });
    const pb = await b.add({}, { dependsOn: [{ queue: a.name, id: pa.id }] });
    const pc = await c.add({}, { dependsOn: [{ queue: b.name, id: pb.id }] });
    await c.waitFor(pc.id, { timeoutMs: 10_000 });
    expect(order).toEqual([a.name, b.name, c.name]);
    expect((await b.counts()).completed).toBe(1);
  });
});
