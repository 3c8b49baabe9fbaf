import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  type CancelOutcome,
  type Flow,
  type FlowNode,
  type FlowRef,
  JobNotFoundError,
  Queue,
  ValidationError,
  Worker,
} from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

function queue(label: string, partitions = 1): Queue {
  const q = new Queue(uniqueName(label), { connection: fx.url, partitions });
  open.push(q);
  return q;
}

/** The flow's nodes by `queue:id`, edges as `queue:id` lists, for comparing with toEqual. */
function shape(flow: Flow): Record<string, { state: string; parents: string[]; children: string[] }> {
  const name = (r: FlowRef) => `${r.queue}:${r.id}`;
  return Object.fromEntries(
    flow.nodes.map((n) => [
      name(n),
      { state: n.state, parents: n.parents.map(name).sort(), children: n.children.map(name).sort() },
    ]),
  );
}

describe('queue.flow', () => {
  it('follows parents and children across two queues, each node with its name and state', async () => {
    const a = queue('fa');
    const b = queue('fb');
    await a.add({}, { id: 'extract', name: 'extract' });
    await b.add({}, { id: 'transform', name: 'transform', dependsOn: [{ queue: a.name, id: 'extract' }] });
    await a.add({}, { id: 'load', dependsOn: [{ queue: b.name, id: 'transform' }] });
    const flow = await b.flow('transform');
    expect(flow.root).toEqual({ queue: b.name, id: 'transform' });
    expect(flow.truncated).toBe(false);
    expect(flow.cut).toEqual([]);
    expect(flow.nodes[0]).toEqual({
      queue: b.name,
      id: 'transform',
      name: 'transform',
      state: 'blocked',
      parents: [{ queue: a.name, id: 'extract' }],
      children: [{ queue: a.name, id: 'load' }],
    });
    expect(shape(flow)).toEqual({
      [`${a.name}:extract`]: { state: 'waiting', parents: [], children: [`${b.name}:transform`] },
      [`${b.name}:transform`]: {
        state: 'blocked',
        parents: [`${a.name}:extract`],
        children: [`${a.name}:load`],
      },
      [`${a.name}:load`]: { state: 'blocked', parents: [`${b.name}:transform`], children: [] },
    });
    expect(flow.nodes.find((n) => n.id === 'load')!.name).toBeNull();
    // The same flow, asked from its other end.
    expect(shape(await a.flow('extract'))).toEqual(shape(flow));
  });

  it('lists a diamond once: the join has two parents, the fork two children', async () => {
    const q = queue('diamond');
    await q.add({}, { id: 'a' });
    await q.add({}, { id: 'b', dependsOn: ['a'] });
    await q.add({}, { id: 'c', dependsOn: ['a'] });
    await q.add({}, { id: 'd', dependsOn: ['b', 'c'] });
    // From a side branch: the other branch is reached too (the flow, not only the job's ancestry).
    const flow = await q.flow('b');
    expect(flow.nodes.map((n) => n.id).sort()).toEqual(['a', 'b', 'c', 'd']);
    const n = (id: string) => `${q.name}:${id}`;
    expect(shape(flow)).toEqual({
      [n('a')]: { state: 'waiting', parents: [], children: [n('b'), n('c')] },
      [n('b')]: { state: 'blocked', parents: [n('a')], children: [n('d')] },
      [n('c')]: { state: 'blocked', parents: [n('a')], children: [n('d')] },
      [n('d')]: { state: 'blocked', parents: [n('b'), n('c')], children: [] },
    });
  });

  it('finds jobs in every partition of a partitioned queue, and across to an unpartitioned one', async () => {
    const p = queue('parts', 4);
    const other = queue('single');
    // Parents with ids of different home partitions; a child goes to its first parent's partition.
    const ids = ['p1', 'p2', 'p3', 'p4', 'p5', 'p6'];
    for (const id of ids) await p.add({}, { id });
    await p.add({}, { id: 'join', dependsOn: ['p1'] });
    await other.add({}, { id: 'x', dependsOn: ids.map((id) => ({ queue: p.name, id })) });
    await p.add({}, { id: 'after', dependsOn: [{ queue: other.name, id: 'x' }] });
    const flow = await p.flow('join');
    expect(flow.nodes).toHaveLength(9);
    expect(flow.truncated).toBe(false);
    const x = flow.nodes.find((node) => node.id === 'x')!;
    expect(x.parents.map((r) => r.id).sort()).toEqual(ids);
    expect(x.children).toEqual([{ queue: p.name, id: 'after' }]);
    expect(flow.nodes.every((node) => node.state !== 'missing')).toBe(true);
  });

  it("sees a finished parent's children from their side: reached from a child, not from the parent", async () => {
    const q = queue('done');
    const w = new Worker(q.name, () => 'ok', { connection: fx.url });
    open.push(w);
    await q.add({}, { id: 'first' });
    await q.waitFor('first');
    await q.add({}, { id: 'second', dependsOn: ['first'] });
    await q.add({}, { id: 'gate', delayMs: 3_600_000 });
    await q.add({}, { id: 'third', dependsOn: ['second', 'gate'] });
    await q.waitFor('second');
    // `first` ended before `second` was added, and `second` before this read: their parent-side
    // entries are gone, but `third` names `second`, which names `first`.
    const flow = await q.flow('third');
    const n = (id: string) => `${q.name}:${id}`;
    expect(shape(flow)).toEqual({
      [n('first')]: { state: 'completed', parents: [], children: [n('second')] },
      [n('second')]: { state: 'completed', parents: [n('first')], children: [n('third')] },
      [n('gate')]: { state: 'delayed', parents: [], children: [n('third')] },
      [n('third')]: { state: 'blocked', parents: [n('gate'), n('second')], children: [] },
    });
    // From the finished parent alone nothing names its children any more (docs/workflows.md).
    expect(shape(await q.flow('first'))).toEqual({
      [n('first')]: { state: 'completed', parents: [], children: [] },
    });
  });

  it('shows a parent that is gone as missing', async () => {
    const q = queue('gone');
    const w = new Worker(q.name, () => 'ok', { connection: fx.url });
    open.push(w);
    await q.add({}, { id: 'parent' });
    await q.add({}, { id: 'child', dependsOn: ['parent'] });
    await q.waitFor('child');
    await q.remove('parent');
    const flow = await q.flow('child');
    expect(flow.nodes).toContainEqual({
      queue: q.name,
      id: 'parent',
      name: null,
      state: 'missing',
      parents: [],
      children: [{ queue: q.name, id: 'child' }],
    });
  });

  it('refuses an unknown job with JobNotFoundError', async () => {
    const q = queue('nf');
    await expect(q.flow('nope')).rejects.toBeInstanceOf(JobNotFoundError);
  });

  it('reads a whole flow at maxNodes 10 000, and refuses 0 and 10 001 naming the option', async () => {
    const q = queue('max');
    await q.add({}, { id: 'root' });
    await q.addBulk(
      Array.from({ length: 30 }, (_, i) => ({ data: {}, opts: { id: `c${i}`, dependsOn: ['root'] } })),
    );
    const flow = await q.flow('root', { maxNodes: 10_000 });
    expect(flow.nodes).toHaveLength(31);
    expect(flow.truncated).toBe(false);
    await expect(q.flow('root', { maxNodes: 10_001 })).rejects.toThrow(
      new ValidationError('maxNodes must be an integer from 1 to 10000, got 10001'),
    );
    await expect(q.flow('root', { maxNodes: 0 })).rejects.toBeInstanceOf(ValidationError);
    await expect(q.flow('root', { maxNodes: 1.5 })).rejects.toThrow(/maxNodes .* got 1\.5/);
    await expect(q.flow('root', { maxNodes: '5' as unknown as number })).rejects.toBeInstanceOf(
      ValidationError,
    );
    await expect(q.flow('root', { depth: 2 } as never)).rejects.toBeInstanceOf(ValidationError);
  });

  it('stops at maxNodes and names the nodes where the flow goes on', async () => {
    const q = queue('cut');
    // root -> a0..a9 -> each two children: 31 jobs.
    await q.add({}, { id: 'root' });
    for (let i = 0; i < 10; i++) {
      await q.add({}, { id: `a${i}`, dependsOn: ['root'] });
      await q.add({}, { id: `a${i}x`, dependsOn: [`a${i}`] });
      await q.add({}, { id: `a${i}y`, dependsOn: [`a${i}`] });
    }
    const flow = await q.flow('root', { maxNodes: 5 });
    expect(flow.nodes).toHaveLength(5);
    expect(flow.truncated).toBe(true);
    const inFlow = new Set(flow.nodes.map((n) => n.id));
    // The root's ten children are known (it was read), only four of them are in the flow.
    expect(flow.cut).toContainEqual({ queue: q.name, id: 'root' });
    for (const c of flow.cut) {
      const node = flow.nodes.find((n) => n.id === c.id)!;
      expect([...node.parents, ...node.children].some((r) => !inFlow.has(r.id))).toBe(true);
    }
    // Every node not cut has all its neighbours in the flow.
    for (const node of flow.nodes.filter((n) => !flow.cut.some((c) => c.id === n.id))) {
      expect([...node.parents, ...node.children].every((r) => inFlow.has(r.id))).toBe(true);
    }
    expect((await q.flow('root', { maxNodes: 1 })).nodes.map((n) => n.id)).toEqual(['root']);
  });

  it('is typed', () => {
    expectTypeOf<Queue['flow']>().returns.resolves.toEqualTypeOf<Flow>();
    expectTypeOf<FlowNode['state']>().toEqualTypeOf<
      'waiting' | 'delayed' | 'blocked' | 'active' | 'completed' | 'dead' | 'missing'
    >();
    // Types only: cancel without options keeps its old type, with options it says what it did.
    const typed = (q: Queue) => {
      expectTypeOf(q.cancel('1')).resolves.toEqualTypeOf<void>();
      expectTypeOf(q.cancel('1', { flow: true })).resolves.toEqualTypeOf<CancelOutcome>();
    };
    expect(typed).toBeTypeOf('function');
  });
});

describe('queue.cancel with flow', () => {
  it('cancels the job and every job below it across queues, children first', async () => {
    const a = queue('ca');
    const b = queue('cb');
    await a.add({}, { id: 'root' });
    await b.add({}, { id: 'mid', dependsOn: [{ queue: a.name, id: 'root' }] });
    await a.add({}, { id: 'leaf', dependsOn: [{ queue: b.name, id: 'mid' }] });
    await a.add({}, { id: 'side', dependsOn: ['root'] });
    // Outside the flow below root: its parent.
    await a.add({}, { id: 'up' });
    await b.add({}, { id: 'under-up', dependsOn: [{ queue: a.name, id: 'up' }] });
    const out = await a.cancel('root', { flow: true });
    expect(out.truncated).toBe(false);
    expect(out.ended).toEqual([]);
    const order = out.cancelled.map((r) => `${r.queue === a.name ? 'a' : 'b'}:${r.id}`);
    expect(order.sort()).toEqual(['a:leaf', 'a:root', 'a:side', 'b:mid']);
    const at = (id: string) => out.cancelled.findIndex((r) => r.id === id);
    expect(at('leaf')).toBeLessThan(at('mid'));
    expect(at('mid')).toBeLessThan(at('root'));
    expect(at('side')).toBeLessThan(at('root'));
    for (const [q, id] of [
      [a, 'root'],
      [b, 'mid'],
      [a, 'leaf'],
      [a, 'side'],
    ] as const) {
      const job = await q.getJob(id);
      expect(job).toMatchObject({ state: 'dead' });
      expect(job!.errors.at(-1)!.name).toBe('CancelledError');
    }
    expect((await a.getJob('up'))!.state).toBe('waiting');
    expect((await b.getJob('under-up'))!.state).toBe('blocked');
  });

  it('tells the worker of a running job below to abort, and counts jobs already dead as ended', async () => {
    const a = queue('ra');
    const b = queue('rb');
    const aborted: string[] = [];
    let started = false;
    const w = new Worker(
      b.name,
      (job) =>
        new Promise((_, reject) => {
          started = true;
          job.signal.addEventListener('abort', () => {
            aborted.push(job.id);
            reject(new Error('aborted'));
          });
        }),
      { connection: fx.url },
    );
    open.push(w);
    // `gate` never runs (no worker for queue a). `run` waits for it, until an operator cancels and
    // retries it: a retry runs a job whatever its parents, and `gate` still lists it as a child.
    await a.add({}, { id: 'gate' });
    await b.add({}, { id: 'run', dependsOn: [{ queue: a.name, id: 'gate' }] });
    await b.add({}, { id: 'guard' });
    await b.add({}, { id: 'doomed', dependsOn: [{ queue: a.name, id: 'gate' }, 'guard'] });
    await b.cancel('guard'); // `doomed` dies with a DependencyFailedError
    await b.cancel('run');
    await b.retry('run');
    await waitUntil(async () => started && (await b.getJob('run'))!.state === 'active', 'run to start');
    const out = await a.cancel('gate', { flow: true });
    expect(out.cancelled).toEqual([
      { queue: b.name, id: 'run' },
      { queue: a.name, id: 'gate' },
    ]);
    expect(out.ended).toEqual([{ queue: b.name, id: 'doomed' }]);
    await waitUntil(() => aborted.includes('run'), "run's abort");
    const run = await b.getJob('run');
    expect(run!.state).toBe('dead');
    expect(run!.errors.at(-1)!.name).toBe('CancelledError');
    expect((await b.getJob('doomed'))!.errors.at(-1)!.name).toBe('DependencyFailedError');
  });

  it('reports an ended root as ended and cancels nothing; an unknown root is JobNotFoundError', async () => {
    const q = queue('ended');
    await q.add({}, { id: 'r' });
    await q.cancel('r');
    expect(await q.cancel('r', { flow: true })).toEqual({
      cancelled: [],
      ended: [{ queue: q.name, id: 'r' }],
      truncated: false,
      cut: [],
    });
    await expect(q.cancel('zz', { flow: true })).rejects.toBeInstanceOf(JobNotFoundError);
  });

  it('is bounded like flow: stops at maxNodes, says where, and checks the option', async () => {
    const q = queue('cbound');
    await q.add({}, { id: 'root' });
    for (let i = 0; i < 6; i++) await q.add({}, { id: `c${i}`, dependsOn: ['root'] });
    await expect(q.cancel('root', { flow: true, maxNodes: 10_001 })).rejects.toThrow(
      'maxNodes must be an integer from 1 to 10000, got 10001',
    );
    await expect(q.cancel('root', { maxNodes: 5 })).rejects.toThrow(/maxNodes bounds a flow cancel/);
    const out = await q.cancel('root', { flow: true, maxNodes: 3 });
    expect(out.truncated).toBe(true);
    expect(out.cut).toEqual([{ queue: q.name, id: 'root' }]);
    expect(out.cancelled).toHaveLength(3);
    // The root's cancel failed the children past the cut with a DependencyFailedError.
    const counts = await q.counts();
    expect(counts.dead).toBe(7);
    const all = await q.cancel('root', { flow: true, maxNodes: 10_000 });
    expect(all.cancelled).toEqual([]);
    expect(all.ended).toEqual([{ queue: q.name, id: 'root' }]);
  });

  it('without options resolves with nothing, as before; with { flow: false } with the job', async () => {
    const q = queue('plain');
    await q.add({}, { id: 'one' });
    await q.add({}, { id: 'two' });
    expect(await q.cancel('one')).toBeUndefined();
    expect(await q.cancel('two', { flow: false })).toEqual({
      cancelled: [{ queue: q.name, id: 'two' }],
      ended: [],
      truncated: false,
      cut: [],
    });
  });
});
