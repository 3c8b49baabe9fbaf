/**
 * The Queue's read-only admin calls (inspect, list, count, metrics, workers), over every partition of
 * a queue: each reads the partitions' keys and merges the answers, so callers see one queue.
 * Each goes through a settling() view of the client, so a read whose reply is lost with its
 * connection rejects with ConnectionError instead of waiting forever.
 */

import { ValidationError } from '../errors.js';
import { settling } from '../redis/in-flight.js';
import { serverNow } from '../redis/server-clock.js';
import type { RedisClient } from '../scripts/specs.js';
import { isJobState, JOB_STATES } from '../states.js';
import { annexFields, annexOf, decodeRecord } from '../store/job-record.js';
import { groupKeys, storedKeys } from '../store/keys.js';
import type { JobCounts, JobInfo, JobState, WorkerDescription } from '../types.js';
import { checkCallOptions, checkInt, checkLabel, show } from '../validate.js';
import type { QueueContext } from './context.js';
import { idsOf, mergedPage, poolIds, readMany } from './job-ids.js';
import type { Layout } from './partitions.js';
import { listNewest } from './reads-newest.js';

/** The partition holding job `id` (its home first, then the others), or -1 if none does. */
export async function locate(rawClient: RedisClient, layout: Layout, id: string): Promise<number> {
  const client = settling(rawClient);
  const [home, ...others] = layout.lookupOrder(id);
  if ((await client.hexists(layout.parts[home as number]!.jobs, id)) === 1) return home as number;
  if (others.length === 0) return -1;
  const found = await Promise.all(others.map((p) => client.hexists(layout.parts[p]!.jobs, id)));
  const i = found.indexOf(1);
  return i < 0 ? -1 : (others[i] as number);
}

/**
 * True when any key of the queue exists, in any partition: what its first add, schedule, pause or
 * worker heartbeat writes, and what stays after its jobs are cleaned (counters, events). False only
 * for a name nothing has used (or one obliterated), which the CLI reports as an unknown queue.
 */
export async function queueExists(rawClient: RedisClient, layout: Layout): Promise<boolean> {
  const client = settling(rawClient);
  const sets = layout.partitioned ? [layout.base, ...layout.parts] : [layout.base];
  const found = await Promise.all(sets.map((k) => client.exists(...storedKeys(k))));
  return found.some((n) => n > 0);
}

export async function readJob<D, R>(
  rawClient: RedisClient,
  layout: Layout,
  id: string,
): Promise<JobInfo<D, R> | null> {
  const client = settling(rawClient);
  for (const p of layout.lookupOrder(id)) {
    const k = layout.parts[p]!;
    const [record, annex] = await Promise.all([
      client.hget(k.jobs, id),
      client.hmget(k.annex, ...annexFields(id)),
    ]);
    if (record !== null) return decodeRecord<D, R>(id, record, annexOf(annex, 0));
  }
  return null;
}

/** Options of queue.getJobs. */
export interface ListOptions {
  offset?: number;
  limit?: number;
  /** One group's waiting jobs (state waiting only). */
  group?: string;
  /**
   * 'asc' (default): oldest first, waiting in claim order (with groups: ungrouped jobs in claim order,
   * then each group's in its own, not the order of claims across groups); 'desc': the reverse. With
   * several states, each state's list in this order; the states stay in the order given.
   */
  order?: 'asc' | 'desc';
}

/**
 * Jobs in one state or several, paged, merged over the partitions. One state: oldest first (waiting:
 * in claim order) or the reverse. Several: the states' lists one after another, in the order given,
 * each in its own order; offset and limit apply to that concatenation (the states' sizes, read first,
 * say where it starts).
 */
export async function listJobs<D, R>(
  ctx: QueueContext,
  state: JobState | readonly JobState[],
  opts: ListOptions,
): Promise<JobInfo<D, R>[]> {
  checkCallOptions('getJobs options', opts, ['offset', 'limit', 'group', 'order']);
  const offset = checkInt('offset', opts.offset ?? 0, 0);
  const limit = checkInt('limit', opts.limit ?? 100, 1, 10_000);
  const group = opts.group === undefined ? undefined : checkLabel('group', opts.group);
  const states = checkStates(state);
  if (group !== undefined && (states.length !== 1 || states[0] !== 'waiting')) {
    throw new ValidationError(`getJobs lists a group's jobs in state waiting only, got ${show(state)}`);
  }
  const order = opts.order ?? 'asc';
  if (order !== 'asc' && order !== 'desc') {
    throw new ValidationError(`order must be 'asc' or 'desc', got ${show(order)}`);
  }
  if (states.length === 1) return listState<D, R>(ctx, states[0]!, offset, limit, group, order);
  const sizes = await countJobs(ctx.client, await ctx.open());
  const out: JobInfo<D, R>[] = [];
  let skip = offset;
  for (const s of states) {
    if (out.length >= limit) break;
    if (skip >= sizes[s]) {
      skip -= sizes[s];
      continue;
    }
    out.push(...(await listState<D, R>(ctx, s, skip, limit - out.length, undefined, order)));
    skip = 0;
  }
  return out;
}

/** getJobs' `state`: one state, or a list of 1 to 6 different states. */
function checkStates(state: unknown): JobState[] {
  const list: unknown[] = Array.isArray(state) ? state : [state];
  const allowed = `one of ${JOB_STATES.join(', ')}`;
  if (list.length === 0) throw new ValidationError(`getJobs needs at least one state (${allowed}), got []`);
  for (const s of list) {
    if (!isJobState(s)) throw new ValidationError(`state must be ${allowed}, got ${show(s)}`);
  }
  if (new Set(list).size !== list.length) {
    throw new ValidationError(`getJobs takes each state at most once, got ${show(state)}`);
  }
  return list as JobState[];
}

/** One state's page: oldest first (waiting: in claim order), or newest first with order 'desc'. */
async function listState<D, R>(
  ctx: QueueContext,
  state: JobState,
  offset: number,
  limit: number,
  group: string | undefined,
  order: 'asc' | 'desc',
): Promise<JobInfo<D, R>[]> {
  if (order === 'desc') return listNewest<D, R>(ctx, state, offset, limit, group);
  const layout = await ctx.open();
  const client = settling(ctx.client);
  if (group !== undefined) {
    // One group lives in one partition: its waiting jobs in claim order.
    const k = layout.parts[layout.route('', group, [])]!;
    const g = groupKeys(k, group);
    const { list } = await poolIds(client, g.waiting, g.prio, offset, limit);
    return readMany<D, R>(client, k, list);
  }
  return mergedPage<D, R>(
    client,
    layout,
    (k, from, n) => idsOf(client, k, state, from, n),
    offset,
    limit,
    false,
  );
}

export async function countJobs(rawClient: RedisClient, layout: Layout): Promise<JobCounts> {
  const client = settling(rawClient);
  const total: JobCounts = { waiting: 0, delayed: 0, blocked: 0, active: 0, completed: 0, dead: 0 };
  const parts = await Promise.all(
    layout.parts.map((k) =>
      Promise.all([
        client.llen(k.waiting),
        client.zcard(k.prio),
        client.zcard(k.delayed),
        client.hlen(k.deps),
        client.zcard(k.active),
        client.zcard(k.completed),
        client.zcard(k.dead),
        client.get(k.groupWaiting).then(Number),
      ]),
    ),
  );
  for (const [waiting, prio, delayed, blocked, active, completed, dead, grouped] of parts) {
    // Jobs of a group wait in their group's list, counted in groupWaiting.
    total.waiting += waiting + prio + grouped;
    total.delayed += delayed;
    total.blocked += blocked;
    // `active` holds a sentinel member besides the jobs (see includes/active_sentinel.lua).
    total.active += Math.max(active - 1, 0);
    total.completed += completed;
    total.dead += dead;
  }
  return total;
}

/** Workers whose heartbeat has not expired (every worker beats in partition 0, see worker.ts). */
export async function listWorkers(rawClient: RedisClient, layout: Layout): Promise<WorkerDescription[]> {
  const client = settling(rawClient);
  const k = layout.parts[0]!;
  const now = await serverNow(client);
  const ids = await client.zrangebyscore(k.workers, now, '+inf');
  if (ids.length === 0) return [];
  const infos = await client.hmget(k.workerInfo, ...ids);
  const out: WorkerDescription[] = [];
  ids.forEach((id, i) => {
    const info = infos[i];
    if (info) out.push({ id, ...(JSON.parse(info) as Omit<WorkerDescription, 'id'>) });
  });
  return out;
}
