/**
 * The flow as one thing (docs/workflows.md): queue.flow(id), the dependency graph around a job across
 * queues of the same prefix, and queue.cancel(id, { flow: true }), which cancels a job and every job
 * below it. Reads plus the existing cancel script: no script of its own.
 *
 * Where the edges are recorded (cross-queue.ts, includes/settle_dependents.lua):
 *  - a child names its parents for as long as it exists: annex `id\x01d` (this queue) and `id\x01x`
 *    (other queues, `queue \t partition \t id`);
 *  - a parent names its children only while they wait for it: `dependents` (this queue) and
 *    `xdependents` (other queues); both entries go when the parent ends.
 * So an edge is seen from the child's side whenever the child is reached, and from the parent's side
 * while the child is blocked on it. A parent-side entry is believed only if the child, when read,
 * names the parent too (an id may have been removed and added again), or the child is gone (then it is
 * shown as `missing`). What this cannot see: the children of a finished parent that are reached by no
 * other path (nothing below a finished job names them any more).
 *
 * Reads are breadth-first, level by level, each level's reads in parallel, and bounded by `maxNodes`.
 * They are not atomic, within a queue or across queues: a job that moves during the walk is reported
 * as it was when read.
 */
import { DEFAULT_FLOW_NODES, MAX_FLOW_NODES } from '../defaults.js';
import { InvalidStateError, JobNotFoundError, ValidationError } from '../errors.js';
import { settling } from '../redis/in-flight.js';
import { stateName } from '../states.js';
import { ANNEX_SUFFIX, readHeader } from '../store/job-record.js';
import { type QueueKeys, queueKeys, tagKeys, tagQueue } from '../store/keys.js';
import type { JobState } from '../types.js';
import { checkBool, checkCallOptions, checkInt, checkJobId, show } from '../validate.js';
import { changeJob } from './admin.js';
import type { QueueContext } from './context.js';
import { layoutOf } from './cross-queue.js';

/** A job of some queue of the same prefix. */
export interface FlowRef {
  queue: string;
  id: string;
}

/** A job's state as getJob reports it, or `missing` for a job its neighbours name that no longer exists. */
export type FlowNodeState = JobState | 'missing';

/** One job of a flow and its edges. */
export interface FlowNode extends FlowRef {
  /** The job's name (add option `name`); null when it has none or is missing. */
  name: string | null;
  state: FlowNodeState;
  /** The jobs it depends on (dependsOn), of this queue and others. */
  parents: FlowRef[];
  /**
   * The jobs that depend on it, as far as they are recorded (see docs/workflows.md: the children of a
   * finished job are known only from the children's side, when they are reached another way).
   */
  children: FlowRef[];
}

/** queue.flow's answer. */
export interface Flow {
  /** The job asked about. */
  root: FlowRef;
  /** The jobs reached, breadth-first from the root (the root first). */
  nodes: FlowNode[];
  /** True when `maxNodes` stopped the walk before the whole flow was read: see `cut`. */
  truncated: boolean;
  /**
   * The nodes where the walk stopped: each has a parent or child that is not in `nodes` (named in its
   * `parents` or `children`, not read). Empty when the whole flow is in `nodes`.
   */
  cut: FlowRef[];
}

export interface FlowOptions {
  /** The most jobs to read, root included: an integer from 1 to 10 000, default 500. */
  maxNodes?: number;
}

export interface CancelOptions {
  /**
   * Also cancel every job below it (its dependents, transitively, across queues) that has not ended,
   * children before parents. Default false: the job alone.
   */
  flow?: boolean;
  /** With `flow`: the most jobs to read, as queue.flow's `maxNodes` (default 500, at most 10 000). */
  maxNodes?: number;
}

/** What queue.cancel did. */
export interface CancelOutcome {
  /** The jobs this call cancelled, in the order it cancelled them. */
  cancelled: FlowRef[];
  /**
   * Jobs of the flow that had already ended (completed, or dead: for instance by a DependencyFailedError
   * when a parent was cancelled) or were gone when their turn came: left as they were.
   */
  ended: FlowRef[];
  /** As in queue.flow: the walk below the job stopped at `maxNodes`; the jobs past `cut` were not cancelled. */
  truncated: boolean;
  cut: FlowRef[];
}

type Direction = 'both' | 'down';

/** A job to read, and the keys its link names (a hint: the partition it was in at link time). */
interface Pending extends FlowRef {
  keys: QueueKeys | undefined;
}

/** One job as read: its state and the edges recorded on either side of it. */
interface Read extends FlowRef {
  name: string | null;
  state: FlowNodeState;
  /** Its own parent lists (`\x01d`, `\x01x`). */
  parents: Pending[];
  /** The children its `dependents` and `xdependents` entries name. */
  listed: Pending[];
}

interface Edge {
  parent: FlowRef;
  child: FlowRef;
  /** Named by the child's own parent lists. */
  byChild: boolean;
}

const refKey = (r: FlowRef) => `${r.queue}\n${r.id}`;
const ref = (r: FlowRef): FlowRef => ({ queue: r.queue, id: r.id });

export function checkMaxNodes(value: unknown): number {
  return value === undefined ? DEFAULT_FLOW_NODES : checkInt('maxNodes', value, 1, MAX_FLOW_NODES);
}

/** queue.flow(id, opts). */
export async function readFlow(ctx: QueueContext, id: string, opts: FlowOptions = {}): Promise<Flow> {
  checkJobId(id);
  checkCallOptions('flow options', opts, ['maxNodes']);
  const maxNodes = checkMaxNodes(opts.maxNodes);
  const g = await walk(ctx, id, maxNodes, 'both');
  return { root: { queue: ctx.name, id }, nodes: g.nodes, truncated: g.cut.length > 0, cut: g.cut };
}

/**
 * queue.cancel(id, opts): the job alone through the cancel script, or with `flow` the job and every job
 * below it that has not ended, children before parents, each by the same atomic cancel: a sequence of
 * atomic cancels, not one. Children first, so that a child which runs whatever its parents' end
 * (ignoreDependencyFailure) is not released by its parent's cancel before its own.
 */
export async function cancelJobs(
  ctx: QueueContext,
  id: string,
  opts: CancelOptions = {},
): Promise<CancelOutcome> {
  checkCallOptions('cancel options', opts, ['flow', 'maxNodes']);
  const flow = opts.flow === undefined ? false : checkBool('flow', opts.flow);
  if (!flow) {
    if (opts.maxNodes !== undefined) {
      throw new ValidationError(
        `maxNodes bounds a flow cancel (cancel(id, { flow: true, maxNodes })), got maxNodes ${show(opts.maxNodes)} without flow`,
      );
    }
    await changeJob(ctx, 'cancel', id);
    return { cancelled: [{ queue: ctx.name, id }], ended: [], truncated: false, cut: [] };
  }
  checkJobId(id);
  const g = await walk(ctx, id, checkMaxNodes(opts.maxNodes), 'down');
  const out: CancelOutcome = { cancelled: [], ended: [], truncated: g.cut.length > 0, cut: g.cut };
  for (const node of childrenFirst(g.nodes)) {
    if (node.state === 'completed' || node.state === 'dead' || node.state === 'missing') {
      out.ended.push(ref(node));
      continue;
    }
    try {
      await changeJob(contextOf(ctx, node.queue), 'cancel', node.id);
      out.cancelled.push(ref(node));
    } catch (err) {
      // Ended meanwhile (a parent's cancel failed it with a DependencyFailedError, a worker finished
      // it) or removed: not this call's to cancel.
      if (!(err instanceof InvalidStateError || err instanceof JobNotFoundError)) throw err;
      out.ended.push(ref(node));
    }
  }
  return out;
}

/** The context of another queue of the same prefix, for the admin scripts (its layout read once). */
function contextOf(ctx: QueueContext, queue: string): QueueContext {
  if (queue === ctx.name) return ctx;
  return { name: queue, options: ctx.options, client: ctx.client, open: () => layoutOf(ctx, queue) };
}

/**
 * Reads the flow around job `id` of `ctx`'s queue, breadth-first, at most `maxNodes` jobs: parents
 * and children ('both'), or children only ('down'). Returns the nodes connected to the root by the
 * edges believed, and the cut.
 */
async function walk(
  ctx: QueueContext,
  id: string,
  maxNodes: number,
  direction: Direction,
): Promise<{ nodes: FlowNode[]; cut: FlowRef[] }> {
  const reads = new Map<string, Read>();
  const edges = new Map<string, Edge>();
  const seen = new Set<string>();
  let queue: Pending[] = [{ queue: ctx.name, id, keys: undefined }];
  seen.add(refKey(queue[0]!));
  const addEdge = (parent: FlowRef, child: FlowRef, byChild: boolean) => {
    const key = `${refKey(parent)}\n${refKey(child)}`;
    const known = edges.get(key);
    if (known) known.byChild ||= byChild;
    else edges.set(key, { parent: ref(parent), child: ref(child), byChild });
  };
  const visit = (p: Pending) => {
    const key = refKey(p);
    if (seen.has(key)) return;
    seen.add(key);
    queue.push(p);
  };
  while (queue.length > 0 && reads.size < maxNodes) {
    const level = queue.slice(0, maxNodes - reads.size);
    queue = queue.slice(level.length);
    const got = await Promise.all(level.map((p) => readNode(ctx, p)));
    for (const r of got) {
      if (reads.size === 0 && r.state === 'missing') throw new JobNotFoundError(id);
      reads.set(refKey(r), r);
      for (const p of r.parents) addEdge(p, r, true);
      for (const c of r.listed) addEdge(r, c, false);
      if (direction === 'both') for (const p of r.parents) visit(p);
      for (const c of r.listed) visit(c);
    }
  }
  // A parent-side entry whose child exists but does not name the parent is left from an earlier job
  // of that id: not an edge.
  const kept = [...edges.values()].filter((e) => {
    if (e.byChild) return true;
    const child = reads.get(refKey(e.child));
    return child === undefined || child.state === 'missing';
  });
  const up = new Map<string, FlowRef[]>();
  const down = new Map<string, FlowRef[]>();
  for (const e of kept) {
    push(up, refKey(e.child), e.parent);
    push(down, refKey(e.parent), e.child);
  }
  // The jobs read that the edges believed connect to the root (a stale entry's job does not).
  const rootKey = refKey({ queue: ctx.name, id });
  const connected = new Set([rootKey]);
  const todo = [rootKey];
  for (let key = todo.pop(); key !== undefined; key = todo.pop()) {
    const next = [...(down.get(key) ?? []), ...(direction === 'both' ? (up.get(key) ?? []) : [])];
    for (const n of next) {
      const k = refKey(n);
      if (!connected.has(k) && reads.has(k)) {
        connected.add(k);
        todo.push(k);
      }
    }
  }
  const nodes: FlowNode[] = [];
  const cut: FlowRef[] = [];
  for (const [key, r] of reads) {
    if (!connected.has(key)) continue;
    const node: FlowNode = {
      queue: r.queue,
      id: r.id,
      name: r.name,
      state: r.state,
      parents: up.get(key) ?? [],
      children: down.get(key) ?? [],
    };
    nodes.push(node);
    const onward = direction === 'both' ? [...node.parents, ...node.children] : node.children;
    if (onward.some((n) => !reads.has(refKey(n)))) cut.push(ref(node));
  }
  return { nodes, cut };
}

function push(map: Map<string, FlowRef[]>, key: string, value: FlowRef): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/**
 * Reads one job: its record where its link says (or, for the root and a job not found there, in each
 * partition of its queue), its own parent lists and its parent-side lists of children.
 */
async function readNode(ctx: QueueContext, p: Pending): Promise<Read> {
  const client = settling(ctx.client);
  const tried = new Set<string>();
  const tryAt = async (k: QueueKeys): Promise<Read | null> => {
    tried.add(k.tag);
    const [record, [local, cross, added, addedBy], dependents, xdependents] = await Promise.all([
      client.hget(k.jobs, p.id),
      client.hmget(
        k.annex,
        p.id + ANNEX_SUFFIX.parents,
        p.id + ANNEX_SUFFIX.crossParents,
        p.id + ANNEX_SUFFIX.children,
        p.id + ANNEX_SUFFIX.flowParent,
      ),
      client.hget(k.dependents, p.id),
      client.hget(k.xdependents, p.id),
    ]);
    if (record === null) return null;
    const name = readHeader(record.slice(0, record.indexOf('\n'))).name;
    const parents: Pending[] = lines(local).map((id) => ({ queue: p.queue, id, keys: k }));
    for (const line of lines(cross)) {
      const [queue = '', part = '', ...rest] = line.split('\t');
      const keys = queueKeys(ctx.options.prefix, queue, part === '' ? undefined : Number(part));
      parents.push({ queue, id: rest.join('\t'), keys });
    }
    // job.addChildren: the parent that added it (kept for good on both sides).
    if (addedBy) {
      const tab = addedBy.indexOf('\t');
      parents.push({ queue: addedBy.slice(0, tab), id: addedBy.slice(tab + 1), keys: undefined });
    }
    const listed: Pending[] = lines(dependents).map((id) => ({ queue: p.queue, id, keys: k }));
    for (const line of lines(added)) {
      const [queue = '', childId = ''] = line.split('\t');
      listed.push({ queue, id: childId, keys: undefined });
    }
    for (const line of lines(xdependents)) {
      const [tag = '', childId = ''] = line.split('\t');
      const at = tagQueue(ctx.options.prefix, tag);
      if (at) listed.push({ queue: at.queue, id: childId, keys: tagKeys(tag) });
    }
    return {
      queue: p.queue,
      id: p.id,
      name: name === '' ? null : name,
      state: stateName(record[0] ?? '') ?? 'waiting',
      parents,
      listed,
    };
  };
  if (p.keys) {
    const found = await tryAt(p.keys);
    if (found) return found;
  }
  // Not where its link said (a repartition moved it), or no link: every partition, its home first.
  const layout = p.queue === ctx.name ? await ctx.open() : await layoutOf(ctx, p.queue);
  for (const part of layout.lookupOrder(p.id)) {
    const k = layout.parts[part]!;
    if (tried.has(k.tag)) continue;
    const found = await tryAt(k);
    if (found) return found;
  }
  return { queue: p.queue, id: p.id, name: null, state: 'missing', parents: [], listed: [] };
}

function lines(field: string | null | undefined): string[] {
  return field ? field.split('\n').filter((l) => l !== '') : [];
}

/** The nodes of a downward walk, each after every one of its children among them (bottom-up). */
function childrenFirst(nodes: FlowNode[]): FlowNode[] {
  const byKey = new Map(nodes.map((n) => [refKey(n), n]));
  const waiting = new Map(
    nodes.map((n) => [refKey(n), n.children.filter((c) => byKey.has(refKey(c))).length]),
  );
  const ready = nodes.filter((n) => waiting.get(refKey(n)) === 0);
  const out: FlowNode[] = [];
  const done = new Set<string>();
  for (let n = ready.shift(); n !== undefined; n = ready.shift()) {
    out.push(n);
    done.add(refKey(n));
    for (const p of n.parents) {
      const key = refKey(p);
      const left = waiting.get(key);
      if (left === undefined || done.has(key)) continue;
      waiting.set(key, left - 1);
      if (left - 1 === 0) ready.push(byKey.get(key)!);
    }
  }
  // A cycle cannot be added (parents exist before their children), but ids reused could fake one.
  for (const n of nodes) if (!done.has(refKey(n))) out.push(n);
  return out;
}
