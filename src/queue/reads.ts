/**
 * The Queue's read-only admin calls (inspect, list, count, metrics, workers), over every partition of
 * a queue: each reads the partitions' keys and merges the answers, so callers see one queue.
 * Each goes through a settling() view of the client, so a read whose reply is lost with its
 * connection rejects with ConnectionError instead of waiting forever.
 */

import { ValidationError } from '../errors.js';
import { settling } from '../in-flight.js';
import { annexFields, annexOf, decodeRecord } from '../job-record.js';
import { groupKeys, type QueueKeys, storedKeys } from '../keys.js';
import type { Layout } from '../partitions.js';
import { serverNow } from '../redis-clock.js';
import type { RedisClient } from '../scripts.js';
import { isJobState, JOB_STATES } from '../states.js';
import type { JobCounts, JobInfo, JobState, QueueMetrics, WorkerDescription } from '../types.js';
import { checkCallOptions, checkInt, checkLabel } from '../validate.js';
import type { QueueContext } from './context.js';

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

/**
 * Waiting ids of one pool (the queue's list and prio zset, or a group's) in claim order: priorities
 * < 0 (prio scores < 0), then the list, then priorities > 0. Each part is read from its own offset, so
 * a page replies n ids whatever the offset (never the ids before it). `total`: the pool's size.
 */
async function poolIds(
  client: RedisClient,
  waiting: string,
  prio: string,
  offset: number,
  n: number,
): Promise<{ list: string[]; total: number }> {
  const [urgent, listed, all] = await Promise.all([
    client.zcount(prio, '-inf', '(0'),
    client.llen(waiting),
    client.zcard(prio),
  ]);
  const list: string[] = [];
  let skip = offset;
  if (skip < urgent) list.push(...(await client.zrangebyscore(prio, '-inf', '(0', 'LIMIT', skip, n)));
  skip = Math.max(0, skip - urgent);
  if (list.length < n && skip < listed)
    list.push(...(await client.lrange(waiting, skip, skip + n - list.length - 1)));
  skip = Math.max(0, skip - listed);
  if (list.length < n)
    list.push(...(await client.zrangebyscore(prio, 0, '+inf', 'LIMIT', skip, n - list.length)));
  return { list: list.slice(0, n), total: listed + all };
}

/** Ids (with sort scores) of one state in one partition: the first `n`, in listing order. */
async function idsOf(
  client: RedisClient,
  k: QueueKeys,
  state: JobState,
  offset: number,
  n: number,
): Promise<[string, number][]> {
  if (state === 'waiting') {
    // Ungrouped jobs first, then each group's, groups with the most waiting first (claims interleave
    // the two, so this is an order to page through, not the exact claim order).
    const ids = await poolIds(client, k.waiting, k.prio, offset, n);
    let skip = Math.max(0, offset - ids.total);
    for (let from = 0; ids.list.length < n; from += 100) {
      const flat = await client.zrevrange(k.groupBacklog, from, from + 99, 'WITHSCORES');
      if (flat.length === 0) break;
      for (let i = 0; i < flat.length && ids.list.length < n; i += 2) {
        const size = Number(flat[i + 1]);
        if (skip >= size) {
          skip -= size;
          continue;
        }
        const g = groupKeys(k, flat[i] as string);
        ids.list.push(...(await poolIds(client, g.waiting, g.prio, skip, n - ids.list.length)).list);
        skip = 0;
      }
    }
    // The position is the score, so partitions interleave.
    return ids.list.slice(0, n).map((id, i) => [id, offset + i]);
  }
  if (state === 'blocked') {
    // A hash has no order: blocked jobs are listed in id order.
    return (await client.hkeys(k.deps))
      .sort()
      .slice(offset, offset + n)
      .map((id) => [id, 0]);
  }
  const set = { delayed: k.delayed, active: k.active, completed: k.completed, dead: k.dead }[state];
  // Scores below +inf: skips the active set's sentinel member.
  const flat = await client.zrangebyscore(set, '-inf', '(+inf', 'WITHSCORES', 'LIMIT', offset, n);
  const out: [string, number][] = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i] as string, Number(flat[i + 1])]);
  return out;
}

async function readMany<D, R>(client: RedisClient, k: QueueKeys, ids: string[]): Promise<JobInfo<D, R>[]> {
  if (ids.length === 0) return [];
  const [records, annex] = await Promise.all([
    client.hmget(k.jobs, ...ids),
    client.hmget(k.annex, ...ids.flatMap(annexFields)),
  ]);
  return ids.flatMap((id, i) => {
    const rec = records[i];
    return rec ? [decodeRecord<D, R>(id, rec, annexOf(annex, i))] : [];
  });
}

/** Jobs in one state, oldest first (waiting: in claim order), paged, merged over the partitions. */
export async function listJobs<D, R>(
  ctx: QueueContext,
  state: JobState,
  opts: { offset?: number; limit?: number; group?: string },
): Promise<JobInfo<D, R>[]> {
  checkCallOptions('getJobs options', opts, ['offset', 'limit', 'group']);
  const offset = checkInt('offset', opts.offset ?? 0, 0);
  const limit = checkInt('limit', opts.limit ?? 100, 1, 10_000);
  const group = opts.group === undefined ? undefined : checkLabel('group', opts.group);
  if (group !== undefined && state !== 'waiting') {
    throw new ValidationError(`getJobs lists a group's jobs in state waiting only, got ${String(state)}`);
  }
  const layout = await ctx.open();
  if (!isJobState(state)) {
    throw new ValidationError(`state must be one of ${JOB_STATES.join(', ')}, got ${String(state)}`);
  }
  const client = settling(ctx.client);
  if (group !== undefined) {
    // One group lives in one partition: its waiting jobs in claim order.
    const k = layout.parts[layout.route('', group, [])]!;
    const g = groupKeys(k, group);
    const { list } = await poolIds(client, g.waiting, g.prio, offset, limit);
    return readMany<D, R>(client, k, list);
  }
  // One partition pages in Redis; several must each give their first offset+limit, merged here.
  const perPart = await Promise.all(
    layout.parts.map((k) =>
      layout.partitioned
        ? idsOf(client, k, state, 0, offset + limit)
        : idsOf(client, k, state, offset, limit),
    ),
  );
  const merged = perPart
    .flatMap((rows, p) => rows.map(([id, score]) => ({ id, score, p })))
    .sort((a, b) => a.score - b.score || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const page = layout.partitioned ? merged.slice(offset, offset + limit) : merged;
  const found = new Map<string, JobInfo<D, R>>();
  for (let p = 0; p < layout.count; p++) {
    const ids = page.filter((r) => r.p === p).map((r) => r.id);
    for (const job of await readMany<D, R>(client, layout.parts[p]!, ids)) found.set(`${p}\n${job.id}`, job);
  }
  return page.flatMap((r) => found.get(`${r.p}\n${r.id}`) ?? []);
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

/** Completed, failed and dead per minute over the last `windowMs` (at most an hour), Redis clock. */
export async function readMetrics(ctx: QueueContext, opts: { windowMs?: number }): Promise<QueueMetrics> {
  checkCallOptions('metrics options', opts, ['windowMs']);
  const windowMs = checkInt('windowMs', opts.windowMs ?? 3_600_000, 60_000, 3_600_000);
  const layout = await ctx.open();
  const client = settling(ctx.client);
  const nowMinute = Math.floor((await serverNow(client)) / 60_000);
  const n = Math.ceil(windowMs / 60_000);
  const minutes = Array.from({ length: n }, (_, i) => nowMinute - n + 1 + i);
  const fields = minutes.flatMap((m) => [`${m}:c`, `${m}:f`, `${m}:x`]);
  const perPart = await Promise.all(layout.parts.map((k) => client.hmget(k.stats, ...fields)));
  const out: QueueMetrics = { bucketMs: 60_000, buckets: [], completed: 0, failed: 0, dead: 0 };
  const sum = (i: number) => perPart.reduce((s, values) => s + Number(values[i] ?? 0), 0);
  minutes.forEach((m, i) => {
    const b = { at: m * 60_000, completed: sum(i * 3), failed: sum(i * 3 + 1), dead: sum(i * 3 + 2) };
    out.buckets.push(b);
    out.completed += b.completed;
    out.failed += b.failed;
    out.dead += b.dead;
  });
  return out;
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
