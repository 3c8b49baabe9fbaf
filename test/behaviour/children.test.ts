/**
 * Children (issue 36): job.addChildren adds jobs as children of a running job, once across its runs;
 * job.waitForChildren parks it (no slot, lease or attempt held) until every child has ended, then it
 * runs again from the top and the wait resolves with the children's results, across queues and
 * partitions, whatever the children's retention.
 */
import { fork } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { type Job, ParkedError, Queue, ValidationError, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
const processes: ReturnType<typeof fork>[] = [];
afterEach(() => {
  for (const c of processes.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
});

function queue<D = unknown>(name = uniqueName(), partitions?: number) {
  const q = new Queue<D>(name, { connection: fx.url, ...(partitions ? { partitions } : {}) });
  open.push(q);
  return q;
}

function worker<D = unknown>(name: string, fn: (job: Job<D>) => unknown, opts: Record<string, unknown> = {}) {
  const w = new Worker<D>(name, fn, { connection: fx.url, ...opts });
  open.push(w);
  return w;
}

describe('job.addChildren and job.waitForChildren', () => {
  it('parks the parent until its children end, then resolves with their results; nothing runs twice', async () => {
    const q = queue();
    const runs = { parent: 0, child: new Map<number, number>() };
    const parked: string[] = [];
    const w = worker<{ role: string; n?: number }>(q.name, async (job) => {
      if (job.data.role === 'child') {
        runs.child.set(job.data.n!, (runs.child.get(job.data.n!) ?? 0) + 1);
        return job.data.n! * 10;
      }
      runs.parent++;
      const kids = await job.addChildren([1, 2, 3].map((n) => ({ data: { role: 'child', n } })));
      const results = await job.waitForChildren<number>();
      return kids.map((k) => results[k.id]);
    });
    w.on('parked', (job) => parked.push(job.id));
    const { id } = await q.add({ role: 'parent' }, { maxAttempts: 1 });
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toEqual([10, 20, 30]);
    expect([...runs.child.values()]).toEqual([1, 1, 1]);
    expect(runs.parent).toBe(2);
    expect(parked).toEqual([id]);
    const info = (await q.getJob(id))!;
    expect(info).toMatchObject({ state: 'completed', attempts: 2, errors: [] });
    expect(info.children).toHaveLength(3);
  });

  it('children in another queue and in a partitioned queue reach their parent, keyed queue:id', async () => {
    const parents = queue();
    const other = queue();
    const parted = queue(uniqueName(), 3);
    worker(other.name, (job) => `other ${String(job.data)}`);
    worker(parted.name, (job) => `parted ${String(job.data)}`, { partitions: 3 });
    worker(parents.name, async (job) => {
      if (job.data === 'self') return 'own';
      const kids = await job.addChildren<unknown>([
        { queue: other.name, data: 'a' },
        ...[1, 2, 3, 4].map((n) => ({ queue: parted.name, data: n })),
        { data: 'self', opts: { id: `${job.id}-own`, delayMs: 20 } },
      ]);
      const results = await job.waitForChildren();
      return kids.map((k) => results[k.queue === parents.name ? k.id : `${k.queue}:${k.id}`]);
    });
    const { id } = await parents.add('root');
    expect(await parents.waitFor(id, { timeoutMs: 10_000 })).toEqual([
      'other a',
      'parted 1',
      'parted 2',
      'parted 3',
      'parted 4',
      'own',
    ]);
  });

  it("adds children under the worker's events option: with events off, no child writes any", async () => {
    const name = uniqueName();
    const q = new Queue<string>(name, { connection: fx.url, events: false });
    const other = new Queue<string>(uniqueName(), { connection: fx.url, events: false });
    open.push(q, other);
    worker<string>(other.name, (job) => job.data, { events: false });
    worker<string>(
      name,
      async (job) => {
        if (job.data === 'kid') return 'own';
        await job.addChildren([{ data: 'kid' }, { queue: other.name, data: 'x' }]);
        return Object.values(await job.waitForChildren()).sort();
      },
      { events: false },
    );
    const { id } = await q.add('root');
    await waitUntil(async () => (await q.getJob(id))?.state === 'completed', 'the parent completes');
    expect((await q.getJob(id))!.result).toEqual(['own', 'x']);
    expect(await fx.redis.xlen(q.keys.events)).toBe(0);
    expect(await fx.redis.xlen(other.keys.events)).toBe(0);
  });

  it('keeps the results of children deleted at completion (retention 0)', async () => {
    const q = queue();
    const kids = queue();
    worker(kids.name, (job) => ({ got: job.data }), { retention: { completed: { maxCount: 0 } } });
    worker(q.name, async (job) => {
      const kids2 = await job.addChildren([
        { queue: kids.name, data: 1 },
        { queue: kids.name, data: 2 },
      ]);
      const results = await job.waitForChildren();
      // In the order added (the results object is in the order the ends arrived).
      return kids2.map((k) => results[`${kids.name}:${k.id}`]);
    });
    const { id } = await q.add({});
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toEqual([{ got: 1 }, { got: 2 }]);
    expect(await kids.counts()).toMatchObject({ completed: 0 });
  });

  it('a dead child fails the wait with DependencyFailedError (the parent ends dead at once) unless ignored', async () => {
    const q = queue();
    const kids = queue();
    worker(kids.name, (job) => {
      if (job.data === 'bad') throw new Error('no stock');
      return 'ok';
    });
    worker(q.name, async (job) => {
      const added = await job.addChildren([
        {
          queue: kids.name,
          data: 'bad',
          opts: { maxAttempts: 1, ignoreDependencyFailure: job.data === 'lenient' },
        },
        { queue: kids.name, data: 'good' },
      ]);
      const results = await job.waitForChildren();
      return added.map((k) => results[`${kids.name}:${k.id}`] ?? null);
    });
    const strict = await q.add('strict', { maxAttempts: 5 });
    const lenient = await q.add('lenient');
    expect(await q.waitFor(lenient.id, { timeoutMs: 10_000 })).toEqual([null, 'ok']);
    await expect(q.waitFor(strict.id, { timeoutMs: 10_000 })).rejects.toThrow(/child job .* is dead/);
    const info = (await q.getJob(strict.id))!;
    expect(info.state).toBe('dead');
    expect(info.errors.map((e) => e.code)).toEqual(['ERR_DEPENDENCY_FAILED']);
  });

  it('a parent retried after addChildren adds no child twice, and waits for the same ones', async () => {
    const q = queue();
    const kids = queue();
    let childRuns = 0;
    worker(kids.name, () => ++childRuns, { retention: { completed: { maxCount: 0 } } });
    worker(
      q.name,
      async (job) => {
        const added = await job.addChildren([
          { queue: kids.name, data: 1 },
          { queue: kids.name, data: 2 },
        ]);
        if (job.attempt === 1) throw new Error('crash after adding');
        await job.waitForChildren();
        return added.map((a) => a.id);
      },
      { backoffStrategies: {} },
    );
    const { id } = await q.add({}, { backoff: { type: 'fixed', delayMs: 300 } });
    const ids = (await q.waitFor(id, { timeoutMs: 10_000 })) as string[];
    expect(new Set(ids).size).toBe(2);
    expect(childRuns).toBe(2);
  });

  it('waitForChildren with no open child resolves at once; a parked parent frees its slot', async () => {
    const q = queue();
    const kids = queue();
    const thrown: unknown[] = [];
    worker(
      q.name,
      async (job) => {
        if (job.data === 'none') return job.waitForChildren();
        await job.addChildren([{ queue: kids.name, data: 1 }]);
        try {
          return await job.waitForChildren();
        } catch (e) {
          thrown.push(e);
          throw e;
        }
      },
      { concurrency: 1 },
    );
    const parent = await q.add('wait');
    await waitUntil(() => thrown.length === 1, 'the parent parked');
    expect(thrown[0]).toBeInstanceOf(ParkedError);
    const none = await q.add('none');
    expect(await q.waitFor(none.id, { timeoutMs: 10_000 })).toEqual({});
    expect((await q.getJob(parent.id))!.state).toBe('blocked');
    const [reason] = (await q.explain(parent.id)).reasons;
    expect(reason).toMatchObject({ code: 'WAITING_FOR_CHILDREN' });
    worker(kids.name, () => 'done');
    expect(await q.waitFor(parent.id, { timeoutMs: 10_000 })).toEqual({
      [`${kids.name}:${(await q.getJob(parent.id))!.children![0]!.id}`]: 'done',
    });
  });

  it('a parent whose worker is killed (kill -9) between addChildren and waitForChildren waits for the same children', async () => {
    const q = queue();
    const kids = queue();
    const leaseMs = 500;
    const child = fork(
      new URL('../fixtures/children-child.ts', import.meta.url).pathname,
      [fx.url, q.name, kids.name, String(leaseMs)],
      { execArgv: ['--import', 'tsx'], stdio: 'pipe' },
    );
    processes.push(child);
    const added = new Promise<{ id: string }[]>((resolve) =>
      child.on('message', (m: { kids?: { id: string }[] }) => {
        if (m.kids) resolve(m.kids);
      }),
    );
    const { id } = await q.add({}, { leaseMs });
    const first = await added;
    child.kill('SIGKILL');
    const ran = new Map<string, number>();
    worker(kids.name, (job) => {
      ran.set(job.id, (ran.get(job.id) ?? 0) + 1);
      return job.data;
    });
    worker(
      q.name,
      async (job) => {
        const again = await job.addChildren([1, 2, 3].map((n) => ({ queue: kids.name, data: n })));
        const results = await job.waitForChildren();
        return again.map((k) => [k.id, results[`${kids.name}:${k.id}`]]);
      },
      { recoverIntervalMs: 100 },
    );
    const result = (await q.waitFor(id, { timeoutMs: 15_000 })) as [string, number][];
    expect(result.map(([kid]) => kid)).toEqual(first.map((k) => k.id));
    expect(result.map(([, r]) => r)).toEqual([1, 2, 3]);
    expect([...ran.values()]).toEqual([1, 1, 1]);
    expect(await kids.counts()).toMatchObject({ completed: 3, waiting: 0 });
  });

  it('the flow shows the children and their parent, and a flow cancel stops the open children', async () => {
    const q = queue();
    const kids = queue();
    worker(q.name, async (job) => {
      await job.addChildren<unknown>([
        { queue: kids.name, data: 1 },
        { data: 'own', opts: { delayMs: 60_000 } },
      ]);
      return job.waitForChildren();
    });
    const { id } = await q.add('root');
    await waitUntil(async () => (await q.getJob(id))?.state === 'blocked', 'the parent parks');
    const children = (await q.getJob(id))!.children!;
    expect(children.map((c) => c.queue)).toEqual([kids.name, q.name]);
    const child = (await kids.getJob(children[0]!.id))!;
    expect(child.parent).toEqual({ queue: q.name, id });
    const flow = await kids.flow(children[0]!.id);
    const root = flow.nodes.find((n) => n.id === id)!;
    expect(root.children).toEqual(expect.arrayContaining(children.map(({ queue, id }) => ({ queue, id }))));
    expect(flow.nodes).toHaveLength(3);
    const cancelled = await q.cancel(id, { flow: true });
    expect(cancelled.cancelled).toHaveLength(3);
    expect((await kids.getJob(children[0]!.id))!.state).toBe('dead');
    expect((await q.getJob(id))!.state).toBe('dead');
  });

  it('adopts an existing job as a child by id, and refuses a child of another parent', async () => {
    const q = queue();
    const kids = queue();
    await kids.add('early', { id: 'done-before' });
    await kids.add('waiting', { id: 'open-before' });
    const errors: unknown[] = [];
    worker(kids.name, (job) => `ran ${String(job.data)}`);
    await kids.waitFor('done-before', { timeoutMs: 10_000 });
    worker(q.name, async (job) => {
      if (job.data === 'second') {
        await job
          .addChildren([{ queue: kids.name, data: 'x', opts: { id: 'open-before' } }])
          .catch((e) => errors.push(e));
        return 'second done';
      }
      await job.addChildren([
        { queue: kids.name, data: 'ignored', opts: { id: 'done-before' } },
        { queue: kids.name, data: 'ignored', opts: { id: 'open-before' } },
      ]);
      return job.waitForChildren();
    });
    const first = await q.add('first');
    expect(await q.waitFor(first.id, { timeoutMs: 10_000 })).toEqual({
      [`${kids.name}:done-before`]: 'ran early',
      [`${kids.name}:open-before`]: 'ran waiting',
    });
    const second = await q.add('second');
    expect(await q.waitFor(second.id, { timeoutMs: 10_000 })).toBe('second done');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(ValidationError);
    expect(String(errors[0])).toMatch(/is a child of another job already/);
  });

  it('takes 1 000 children, the most a job may have, and refuses one more', async () => {
    const q = queue();
    const errors: unknown[] = [];
    worker(
      q.name,
      async (job) => {
        if (job.data !== 'root') return job.data;
        await job.addChildren(Array.from({ length: 999 }, (_, i) => ({ data: i })));
        await job.addChildren([{ data: 999 }]);
        await job.addChildren([{ data: 1_000 }]).catch((e) => errors.push(e));
        const results = await job.waitForChildren<number>();
        return Object.values(results).reduce((a, b) => a + b, 0);
      },
      { concurrency: 50 },
    );
    const { id } = await q.add('root');
    expect(await q.waitFor(id, { timeoutMs: 60_000 })).toBe((999 * 1_000) / 2);
    // Refused in each of its two runs (the one that parks, the one that resumes): nothing planned.
    expect(errors).toHaveLength(2);
    for (const e of errors) expect(String(e)).toMatch(/at most 1000 children per job/);
    expect((await q.getJob(id))!.children).toHaveLength(1_000);
  }, 60_000);

  it('refuses bad children before anything is planned', async () => {
    const q = queue();
    const errors: unknown[] = [];
    worker(q.name, async (job) => {
      for (const bad of [
        [],
        'x',
        [{ data: () => 1 }],
        [{ data: 1, opts: { dedupe: { key: 'k' } } }],
        [{ queue: 'a:b', data: 1 }],
        [{ data: 1, extra: 1 }],
      ]) {
        await job.addChildren(bad as never).catch((e) => errors.push(e));
      }
      return job.waitForChildren();
    });
    const { id } = await q.add({});
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toEqual({});
    expect(errors).toHaveLength(6);
    for (const e of errors)
      expect((e as { code: string }).code).toMatch(
        /^ERR_(INVALID_OPTION|NOT_SERIALIZABLE|INVALID_QUEUE_NAME)$/,
      );
    expect(errors[0]).toBeInstanceOf(ValidationError);
  });
});
