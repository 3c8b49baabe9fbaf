/**
 * queue.getJobs(state, { order: 'desc' }): the newest jobs first, what an operator looks at first.
 * Sorted sets (delayed, active, completed, dead) are read backwards in Redis, so a page costs
 * O(limit) whatever the offset (per partition: O(offset + limit), as in ascending order). Waiting jobs
 * (claim order) and blocked jobs (id order) have no score: the page is the matching slice counted
 * from the end, read with the ascending reader and reversed.
 */
import { settling } from '../redis/in-flight.js';
import type { RedisClient } from '../scripts/specs.js';
import { groupKeys, type QueueKeys } from '../store/keys.js';
import type { JobInfo, JobState } from '../types.js';
import type { QueueContext } from './context.js';
import { idsOf, mergedPage, poolIds, readMany } from './job-ids.js';

/** How many jobs of `state` one partition holds (as counts() counts them). */
async function sizeOf(client: RedisClient, k: QueueKeys, state: 'waiting' | 'blocked'): Promise<number> {
  if (state === 'blocked') return client.hlen(k.deps);
  const [listed, prio, grouped] = await Promise.all([
    client.llen(k.waiting),
    client.zcard(k.prio),
    client.get(k.groupWaiting),
  ]);
  return listed + prio + Number(grouped ?? 0);
}

/** The `n` ids after skipping `skip` from the newest end of one partition, newest first, with sort scores. */
async function newestIds(
  client: RedisClient,
  k: QueueKeys,
  state: JobState,
  skip: number,
  n: number,
): Promise<[string, number][]> {
  if (state === 'waiting' || state === 'blocked') {
    const size = await sizeOf(client, k, state);
    const end = size - skip; // exclusive, in ascending positions
    const start = Math.max(0, end - n);
    if (end <= 0) return [];
    const rows = await idsOf(client, k, state, start, end - start);
    // Scores: the position in ascending order, so merged partitions come in the exact reverse of it.
    // Blocked jobs are in id order (score 0, ties by id), as in ascending order.
    return rows.map(([id], i): [string, number] => [id, state === 'blocked' ? 0 : start + i]).reverse();
  }
  const set = { delayed: k.delayed, active: k.active, completed: k.completed, dead: k.dead }[state];
  // Scores below +inf: skips the active set's sentinel member.
  const flat = await client.zrevrangebyscore(set, '(+inf', '-inf', 'WITHSCORES', 'LIMIT', skip, n);
  const out: [string, number][] = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i] as string, Number(flat[i + 1])]);
  return out;
}

export async function listNewest<D, R>(
  ctx: QueueContext,
  state: JobState,
  offset: number,
  limit: number,
  group: string | undefined,
): Promise<JobInfo<D, R>[]> {
  const layout = await ctx.open();
  const client = settling(ctx.client);
  if (group !== undefined) {
    const k = layout.parts[layout.route('', group, [])]!;
    const g = groupKeys(k, group);
    const [listed, prio] = await Promise.all([client.llen(g.waiting), client.zcard(g.prio)]);
    const end = listed + prio - offset;
    if (end <= 0) return [];
    const start = Math.max(0, end - limit);
    const { list } = await poolIds(client, g.waiting, g.prio, start, end - start);
    return readMany<D, R>(client, k, list.reverse());
  }
  return mergedPage<D, R>(
    client,
    layout,
    (k, from, n) => newestIds(client, k, state, from, n),
    offset,
    limit,
    true,
  );
}
