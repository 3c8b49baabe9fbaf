/**
 * queue.getCountsPerPriority: how many jobs wait at each priority asked for, over every partition,
 * grouped jobs included (so the counts of every priority add up to counts().waiting). Priority 0
 * waits in a list (LLEN); other priorities in a zset, by score band (ZCOUNT, store/priority-score.ts).
 * Plain reads, not a snapshot: jobs claimed or added meanwhile may or may not be counted.
 */
import { MAX_PRIORITY } from '../defaults.js';
import { ValidationError } from '../errors.js';
import { settling } from '../redis/in-flight.js';
import type { RedisClient } from '../scripts/specs.js';
import { groupKeys, type QueueKeys } from '../store/keys.js';
import { priorityScoreRange } from '../store/priority-score.js';
import { checkInt, show } from '../validate.js';
import type { QueueContext } from './context.js';

/** The most priorities one call counts (each costs a command per partition, and per group that has prioritised jobs). */
export const MAX_PRIORITIES_PER_CALL = 1_000;
/** Groups read per page of the backlog. */
const GROUP_PAGE = 100;

export async function countPerPriority(
  ctx: QueueContext,
  priorities: readonly number[],
): Promise<Record<number, number>> {
  if (!Array.isArray(priorities) || priorities.length > MAX_PRIORITIES_PER_CALL) {
    const got = Array.isArray(priorities) ? `an array of ${priorities.length}` : show(priorities);
    throw new ValidationError(
      `priorities must be an array of at most ${MAX_PRIORITIES_PER_CALL} integers from -${MAX_PRIORITY} to ${MAX_PRIORITY}, got ${got}`,
    );
  }
  const wanted = [
    ...new Set(priorities.map((p, i) => checkInt(`priorities[${i}]`, p, -MAX_PRIORITY, MAX_PRIORITY))),
  ];
  const counts: Record<number, number> = {};
  for (const p of wanted) counts[p] = 0;
  if (wanted.length === 0) return counts;
  const layout = await ctx.open();
  const client = settling(ctx.client);
  const perPartition = await Promise.all(layout.parts.map((k) => countPartition(client, k, wanted)));
  for (const found of perPartition) {
    for (let i = 0; i < wanted.length; i++) counts[wanted[i] as number]! += found[i] as number;
  }
  return counts;
}

/** Adds `found` into `total`, position by position. */
function addInto(total: number[], found: number[]): void {
  for (let i = 0; i < total.length; i++) total[i]! += found[i] as number;
}

/** One partition's counts, in `wanted` order: its own waiting jobs, then each group's. */
async function countPartition(client: RedisClient, k: QueueKeys, wanted: number[]): Promise<number[]> {
  const total = await countPool(client, k.waiting, k.prio, wanted);
  for (let from = 0; ; from += GROUP_PAGE) {
    // Groups with jobs waiting, scored by how many.
    const flat = await client.zrangebyscore(
      k.groupBacklog,
      '(0',
      '+inf',
      'WITHSCORES',
      'LIMIT',
      from,
      GROUP_PAGE,
    );
    const pages = [];
    for (let i = 0; i < flat.length; i += 2) {
      const g = groupKeys(k, flat[i] as string);
      pages.push(countPool(client, g.waiting, g.prio, wanted, Number(flat[i + 1])));
    }
    for (const found of await Promise.all(pages)) addInto(total, found);
    if (flat.length < 2 * GROUP_PAGE) return total;
  }
}

/**
 * One pool's counts (a list for priority 0, a zset for the others), in `wanted` order. `size`: the
 * pool's waiting jobs, when known (a group's backlog): when the list holds them all, no ZCOUNT is sent.
 */
async function countPool(
  client: RedisClient,
  list: string,
  prio: string,
  wanted: number[],
  size?: number,
): Promise<number[]> {
  const listed = await client.llen(list);
  const prioritised = size === undefined || size > listed;
  return Promise.all(
    wanted.map((p) => (p === 0 ? listed : prioritised ? client.zcount(prio, ...priorityScoreRange(p)) : 0)),
  );
}
