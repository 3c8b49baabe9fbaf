/**
 * Reading job ids in listing order and their records, for queue.getJobs (reads.ts, ascending) and
 * its newest-first reader (reads-newest.ts).
 */

import type { RedisClient } from '../scripts/specs.js';
import { annexFields, annexOf, decodeRecord } from '../store/job-record.js';
import { groupKeys, type QueueKeys } from '../store/keys.js';
import type { JobInfo, JobState } from '../types.js';
import type { Layout } from './partitions.js';

/**
 * Waiting ids of one pool (the queue's list and prio zset, or a group's) in claim order: priorities
 * < 0 (prio scores < 0), then the list, then priorities > 0. Each part is read from its own offset, so
 * a page replies n ids whatever the offset (never the ids before it). `total`: the pool's size.
 */
export async function poolIds(
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
export async function idsOf(
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

export async function readMany<D, R>(
  client: RedisClient,
  k: QueueKeys,
  ids: string[],
): Promise<JobInfo<D, R>[]> {
  if (ids.length === 0) return [];
  if (ids.length > READ_CHUNK) {
    // In chunks: a spread of every annex field of tens of thousands of ids overflows the call stack.
    const parts: Promise<JobInfo<D, R>[]>[] = [];
    for (let from = 0; from < ids.length; from += READ_CHUNK) {
      parts.push(readMany<D, R>(client, k, ids.slice(from, from + READ_CHUNK)));
    }
    return (await Promise.all(parts)).flat();
  }
  const [records, annex] = await Promise.all([
    client.hmget(k.jobs, ...ids),
    client.hmget(k.annex, ...ids.flatMap(annexFields)),
  ]);
  return ids.flatMap((id, i) => {
    const rec = records[i];
    return rec ? [decodeRecord<D, R>(id, rec, annexOf(annex, i))] : [];
  });
}

/** Most jobs one readMany round trip reads (8 annex fields each). */
const READ_CHUNK = 1_000;

/**
 * One page of jobs over every partition. `idsAt(k, offset, n)` reads one partition's `[id, score]`
 * rows: one partition pages in Redis; several each give their first offset+limit, merged here by
 * score, ties by id, `newest` first or oldest first. Then the records, read per partition, in page order.
 */
export async function mergedPage<D, R>(
  client: RedisClient,
  layout: Layout,
  idsAt: (k: QueueKeys, offset: number, n: number) => Promise<(readonly [string, number])[]>,
  offset: number,
  limit: number,
  newest: boolean,
): Promise<JobInfo<D, R>[]> {
  const perPart = await Promise.all(
    layout.parts.map((k) => (layout.partitioned ? idsAt(k, 0, offset + limit) : idsAt(k, offset, limit))),
  );
  const dir = newest ? -1 : 1;
  const merged = perPart
    .flatMap((rows, p) => rows.map(([id, score]) => ({ id, score, p })))
    .sort((a, b) => dir * (a.score - b.score) || (a.id < b.id ? -dir : a.id > b.id ? dir : 0));
  const page = layout.partitioned ? merged.slice(offset, offset + limit) : merged;
  const found = new Map<string, JobInfo<D, R>>();
  for (let p = 0; p < layout.count; p++) {
    const ids = page.filter((r) => r.p === p).map((r) => r.id);
    for (const job of await readMany<D, R>(client, layout.parts[p]!, ids)) found.set(`${p}\n${job.id}`, job);
  }
  return page.flatMap((r) => found.get(`${r.p}\n${r.id}`) ?? []);
}
