/**
 * job.addChildren and job.waitForChildren (docs/workflows.md#children), written once for the worker's
 * Job (a sandbox's job calls them over its channel).
 *
 * addChildren is three steps, each safe to repeat: plan (add-children.lua, fenced: the children's
 * refs join the parent's annex and the call's durable step `~children:<n>`, so every later run adds
 * the same ids), add (add.lua, per child queue, each child carrying its parent: ids that exist are
 * not added twice, and a child that ended is not created again), then the step is marked added, so
 * later runs skip the adds. waitForChildren answers the children's ends at once when all have ended,
 * or parks the job until the last one does (wait-children.lua).
 */
import { randomUUID } from 'node:crypto';
import { MAX_BULK } from '../defaults.js';
import {
  DependencyFailedError,
  LeaseExpiredError,
  ParkedError,
  PayloadTooLargeError,
  ValidationError,
} from '../errors.js';
import { forwardChildEnds } from '../queue/children.js';
import { addChildRows, checkChildRows, childRows } from '../queue/enqueue.js';
import { contextOf, Queue } from '../queue/queue.js';
import type { WaitChildrenAnswer } from '../scripts/replies.js';
import type { RedisClient } from '../scripts/specs.js';
import type { ChildJob, ChildRef, JobOptions } from '../types.js';
import { checkCallOptions, checkJobId, checkObject, checkQueueName, show } from '../validate.js';

/** Step names of the n-th addChildren call of a run. */
export const CHILDREN_STEP = '~children:';
/**
 * The most children one job may have, over all its addChildren calls. Their refs and their ends are
 * kept in one annex string each (rewritten and searched as each child ends), so the work of a
 * parent's children grows with the square of their number: bounded here.
 */
export const MAX_CHILDREN = 1_000;

/**
 * The Queues a worker adds children through, one per queue, on the worker's own connection, with the
 * worker's `events` option (its cap, or off): a child's add writes the events the worker would.
 */
export class ChildQueues {
  private readonly queues = new Map<string, Queue>();

  constructor(
    private readonly client: RedisClient,
    private readonly prefix: string,
    /** The worker's events.maxLen; 0: events off. */
    private readonly eventsMaxLen: number,
  ) {}

  of(name: string): Queue {
    let q = this.queues.get(name);
    if (!q) {
      q = new Queue(name, {
        connection: this.client,
        prefix: this.prefix,
        partitions: 'auto',
        events: this.eventsMaxLen === 0 ? false : { maxLen: this.eventsMaxLen },
      });
      this.queues.set(name, q);
    }
    return q;
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    this.queues.clear();
  }
}

/** How a running attempt reaches Redis for its children (the worker's lane); absent on a hand-built job. */
export interface ChildrenStore {
  /** The hash tag of the parent's partition: children name it to find their parent. */
  readonly tag: string;
  readonly queues: ChildQueues;
  /** add-children.lua: 1 stored, 0 lease lost, -1 steps over their bound, -2 too many children. */
  plan(step: string, valueJson: string, children: string): Promise<number>;
  wait(): Promise<WaitChildrenAnswer>;
  /** The children's ends the job has recorded (annex `\x01k`, '' when none). */
  ends(): Promise<string>;
}

/** What the two calls need of the parent job. */
export interface ChildrenParent {
  readonly id: string;
  readonly queueName: string;
  /** Its creation time: a later job of the same id is another parent. */
  readonly createdAt: number;
  readStep(name: string): Promise<{ found: boolean; value?: unknown }>;
  writeStep(name: string, value: unknown): Promise<boolean>;
  readonly children: ChildrenStore | undefined;
  /** The job parked: its worker lets it go. */
  parked(err: Error): void;
}

interface Planned {
  refs: ChildRef[];
  added?: boolean;
}

function checkChildren(items: unknown): ChildJob[] {
  if (!Array.isArray(items) || items.length === 0 || items.length > MAX_BULK)
    throw new ValidationError(
      `addChildren takes an array of 1 to ${MAX_BULK} children { queue?, data, opts? }, got ${show(items)}`,
    );
  return items.map((item, i) => {
    checkCallOptions(`child ${i}`, checkObject(`child ${i}`, item), ['queue', 'data', 'opts']);
    const child = item as ChildJob;
    if (child.queue !== undefined) checkQueueName(child.queue);
    if (child.opts !== undefined) checkObject(`child ${i} opts`, child.opts);
    if (child.opts?.id !== undefined) checkJobId(child.opts.id);
    return child;
  });
}

/**
 * The children whose end a parent has recorded (its `\x01k` lines, `queue \t id \t outcome \t
 * result`), as `queue \t id` refs: a replayed call does not add them again. Their tombstones in
 * `waiters` would stop add.lua from creating them again, but only for an hour (purge-waiters.lua),
 * and retention may have deleted the children: past that, an add would create a child that ran.
 */
export function endedRefs(ends: string): Set<string> {
  const refs = new Set<string>();
  for (const line of ends.split('\n')) {
    const [queue, id] = line.split('\t');
    if (line !== '' && id !== undefined) refs.add(`${queue}\t${id}`);
  }
  return refs;
}

export async function addChildren(p: ChildrenParent, n: number, items: unknown): Promise<ChildRef[]> {
  const list = checkChildren(items);
  const store = p.children;
  if (!store)
    throw new ValidationError(`job ${p.id}: addChildren needs a Worker (this job was built by hand)`);
  const queueOf = (c: ChildJob) => c.queue ?? p.queueName;
  // Checked before anything is planned: a child Redis would refuse must not be planned for ever.
  const rows = list.map(
    (c) => childRows(contextOf(store.queues.of(queueOf(c)) as Queue<unknown, unknown>), [c])[0]!,
  );
  const step = `${CHILDREN_STEP}${n}`;
  const found = await p.readStep(step);
  let refs: ChildRef[];
  // A replay leaves out the children whose end the job recorded (endedRefs).
  let ended = new Set<string>();
  if (found.found) {
    const planned = found.value as Planned;
    if (planned.added) return planned.refs;
    if (planned.refs.length !== list.length)
      throw new ValidationError(
        `job ${p.id}: addChildren call ${n} names ${list.length} children, but an earlier run of it planned ${planned.refs.length}; keep the calls the same from run to run`,
      );
    refs = planned.refs;
    ended = endedRefs(await store.ends());
  } else {
    refs = list.map((c) => ({ queue: queueOf(c), id: c.opts?.id ?? randomUUID() }));
    const seen = new Set<string>();
    for (const r of refs) {
      const key = `${r.queue}\t${r.id}`;
      if (seen.has(key))
        throw new ValidationError(`job ${p.id}: addChildren names child ${r.queue}/${r.id} twice`);
      seen.add(key);
    }
    // add.lua's checks first (a child of another parent is refused): nothing is planned that cannot
    // be added.
    for (const [queue, indexes] of groupByQueue(refs, ended)) {
      const ctx = contextOf(store.queues.of(queue) as Queue<unknown, unknown>);
      const queueRows = indexes.map((i) => Object.assign(rows[i]!, { id: refs[i]!.id }));
      await checkChildRows(ctx, queueRows, waiterOf(store, p, queue));
    }
    const lines = refs.map(
      (r, i) => `${r.queue}\t${r.id}\t${list[i]!.opts?.ignoreDependencyFailure ? 'i' : 's'}`,
    );
    const r = await store.plan(step, JSON.stringify({ refs } satisfies Planned), lines.join('\n'));
    if (r === 0) throw new LeaseExpiredError(`job ${p.id}: the lease was lost; its children were not added`);
    if (r === -1) throw new PayloadTooLargeError(`job ${p.id}: step ${step} would take its steps past 1 MiB`);
    if (r === -2)
      throw new ValidationError(
        `job ${p.id}: at most ${MAX_CHILDREN} children per job; these were not added`,
      );
  }
  for (const [queue, indexes] of groupByQueue(refs, ended)) {
    const ctx = contextOf(store.queues.of(queue) as Queue<unknown, unknown>);
    const queueRows = indexes.map((i) => Object.assign(rows[i]!, { id: refs[i]!.id }));
    await addChildRows(ctx, queueRows, waiterOf(store, p, queue));
    // A child added dead at once (a dead parent of its own) or one that had ended already: its end
    // went to the outbox; deliver it now rather than at the next recovery pass.
    const layout = await ctx.open();
    await Promise.all(layout.parts.map((k) => forwardChildEnds(ctx.client, k)));
  }
  await p.writeStep(step, { refs, added: true } satisfies Planned);
  return refs;
}

/** The indexes of `refs` per child queue, leaving out those in `ended`. */
function groupByQueue(refs: readonly ChildRef[], ended: ReadonlySet<string>): Map<string, number[]> {
  const byQueue = new Map<string, number[]>();
  refs.forEach((r, i) => {
    if (ended.has(`${r.queue}\t${r.id}`)) return;
    byQueue.set(r.queue, [...(byQueue.get(r.queue) ?? []), i]);
  });
  return byQueue;
}

/** What a child of `p` in `queue` carries: `parent tag \t parent id \t parent queue \t createdAt \t queue`. */
function waiterOf(store: ChildrenStore, p: ChildrenParent, queue: string): string {
  return `${store.tag}\t${p.id}\t${p.queueName}\t${p.createdAt}\t${queue}`;
}

/** The children's results by id (`queue:id` for a child of another queue), or why the wait cannot end. */
export async function waitForChildren(p: ChildrenParent): Promise<Record<string, unknown>> {
  const store = p.children;
  if (!store)
    throw new ValidationError(`job ${p.id}: waitForChildren needs a Worker (this job was built by hand)`);
  const r = await store.wait();
  if (r.outcome === 'stale')
    throw new LeaseExpiredError(`job ${p.id}: the lease was lost; it does not wait for its children`);
  if (r.outcome === 'parked') {
    const err = new ParkedError(p.id, `${r.open} child job${r.open === 1 ? '' : 's'}`);
    p.parked(err);
    throw err;
  }
  const ignores = new Map<string, boolean>();
  for (const line of r.children.split('\n')) {
    if (line === '') continue;
    const [queue, id, flag] = line.split('\t') as [string, string, string];
    ignores.set(`${queue}\t${id}`, flag === 'i');
  }
  const out: Record<string, unknown> = {};
  for (const line of r.ends.split('\n')) {
    if (line === '') continue;
    const [queue, id, outcome, ...json] = line.split('\t') as [string, string, string, ...string[]];
    const key = queue === p.queueName ? id : `${queue}:${id}`;
    if (outcome === 'x') {
      if (!ignores.get(`${queue}\t${id}`)) throw new DependencyFailedError(p.id, key, 'child');
      out[key] = undefined;
    } else {
      const result = json.join('\t');
      out[key] = result === '' ? undefined : JSON.parse(result);
    }
  }
  return out;
}

export type { ChildJob, ChildRef, JobOptions };
