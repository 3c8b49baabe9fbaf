/**
 * Dependencies across queues: `dependsOn: [{ queue, id }]`, a parent in another queue of the same
 * prefix. The two queues have different hash tags (different Cluster slots), so no script touches
 * both; the dependency is carried by a few atomic steps, each one script in one queue, every one of
 * them idempotent so that any step may run again after a crash:
 *
 *  1. add (child's queue A): the parent's state is read in its queue B first (a missing parent is
 *     refused before anything is written); add.lua writes the child blocked, counts the unfinished
 *     parent in `deps`, keeps it pending in the child's annex and lists the link to make in A's
 *     `xlinks`, all in one script.
 *  2. link (B): cross-link.lua adds the child to the parent's `xdependents`, unless the parent has
 *     finished meanwhile, in which case the child is resolved at once (step 4); then the `xlinks`
 *     entry goes. A crash before that leaves the entry, which the recovery pass links again.
 *  3. the parent ends (B): complete, fail, recover, cancel, remove, expire or drain moves each line of
 *     its `xdependents` into B's `xnotify` outbox, atomically with its end (settle_dependents).
 *  4. forward: cross-resolve.lua in A resolves the child (a removal from its pending parents counts
 *     once: waiting when none is left, dead with a DependencyFailedError for a dead parent unless
 *     ignored), then the outbox entry goes. The worker that ended the parent forwards at once (its
 *     complete or fail reply says when there is something to forward); the recovery pass forwards
 *     what a crash left behind.
 */
import { SCRIPT_BATCH_LIMIT } from '../defaults.js';
import { JobNotFoundError, ValidationError } from '../errors.js';
import { untilClosed } from '../redis/in-flight.js';
import type { CrossResolveAnswer } from '../scripts/replies.js';
import { callScript, type RedisClient, scripts } from '../scripts/specs.js';
import { ANNEX_SUFFIX, resultOf } from '../store/job-record.js';
import { type QueueKeys, queueKeys, tagKeys } from '../store/keys.js';
import type { AddedJob } from '../types.js';
import { forwardChildEnds } from './children.js';
import type { QueueContext } from './context.js';
import { type Layout, resolveLayout } from './partitions.js';

/** What enqueue.ts's rows carry for this module: parents as given, and as add.lua wants them. */
export interface CrossRow {
  id: string | number;
  /** Local parent ids, newline-separated. */
  dependsOn: string | number;
  /** `{ queue, id }` parents as given: lines `queue \t id` ('' = none). */
  crossDependsOn: string | number;
  /** add.lua's column: lines `state \t parent tag \t queue \t partition \t id` ('' = none). */
  xDependsOn: string | number;
}

/** Other queues' layouts, read once per Queue (never recorded: a queue with no record has one partition). */
const layouts = new WeakMap<QueueContext, Map<string, Promise<Layout>>>();

/** The layout of `queue` (same prefix), read once per Queue; flow.ts reads other queues with it too. */
export function layoutOf(ctx: QueueContext, queue: string): Promise<Layout> {
  let known = layouts.get(ctx);
  if (!known) {
    known = new Map();
    layouts.set(ctx, known);
  }
  let layout = known.get(queue);
  if (!layout) {
    layout = resolveLayout(ctx.client, ctx.options.prefix, queue, 0);
    // A failed read is not kept: the next add asks again.
    layout.catch(() => known.delete(queue));
    known.set(queue, layout);
  }
  return layout;
}

/**
 * Reads each `{ queue, id }` parent of `rows` in its queue and fills their `xDependsOn` (state letter,
 * hash tag, queue, partition, id). A parent of this very queue becomes a local parent. A parent that
 * does not exist throws JobNotFoundError naming its queue: nothing has been written yet.
 */
export async function readCrossParents(ctx: QueueContext, rows: CrossRow[]): Promise<void> {
  const found = new Map<string, Promise<string>>();
  const look = (queue: string, id: string) => {
    const key = `${queue}\t${id}`;
    let line = found.get(key);
    if (!line) {
      line = findParent(ctx, queue, id);
      found.set(key, line);
    }
    return line;
  };
  await Promise.all(
    rows.map(async (row) => {
      if (row.crossDependsOn === '') return;
      const local = row.dependsOn === '' ? [] : String(row.dependsOn).split('\n');
      const cross: [string, string][] = [];
      for (const line of String(row.crossDependsOn).split('\n')) {
        const [queue, id] = line.split('\t') as [string, string];
        if (queue === ctx.name) {
          if (!local.includes(id)) local.push(id);
        } else cross.push([queue, id]);
      }
      if (row.id !== '' && local.includes(String(row.id))) {
        throw new ValidationError(`job ${JSON.stringify(row.id)} cannot depend on itself`);
      }
      for (const [queue, id] of cross) {
        // job.parentResults() names a parent of another queue `queue:id`: a local parent of that very
        // id would be the same key.
        if (local.includes(`${queue}:${id}`)) {
          throw new ValidationError(
            `dependsOn names both the job ${JSON.stringify(`${queue}:${id}`)} of this queue and { queue: ${JSON.stringify(queue)}, id: ${JSON.stringify(id)} }: job.parentResults() could not tell them apart`,
          );
        }
      }
      row.dependsOn = local.join('\n');
      row.xDependsOn = (await Promise.all(cross.map(([queue, id]) => look(queue, id)))).join('\n');
    }),
  );
}

/** One parent's line for add.lua: `state \t tag \t queue \t partition \t id`. */
async function findParent(ctx: QueueContext, queue: string, id: string): Promise<string> {
  const layout = await layoutOf(ctx, queue);
  for (const p of layout.lookupOrder(id)) {
    const k = layout.parts[p]!;
    const rec = await untilClosed(ctx.client, ctx.client.hget(k.jobs, id));
    if (rec) return `${rec[0]}\t${k.tag}\t${queue}\t${layout.partitioned ? p : ''}\t${id}`;
  }
  throw new JobNotFoundError(id, queue);
}

/**
 * After add.lua: links each new blocked child to its unfinished parents of other queues (step 2).
 * `added[i]` answers `rows[i]`, added to `childKeys[i]`.
 */
export async function linkCrossParents(
  client: RedisClient,
  rows: readonly Pick<CrossRow, 'xDependsOn'>[],
  childKeys: readonly QueueKeys[],
  added: readonly AddedJob[],
  eventsMaxLen: number,
): Promise<void> {
  const links: Promise<void>[] = [];
  rows.forEach((row, i) => {
    const job = added[i];
    if (row.xDependsOn === '' || !job?.isNew || job.state !== 'blocked') return;
    for (const line of String(row.xDependsOn).split('\n')) {
      const state = line[0];
      if (state === 'c' || state === 'x') continue;
      const [, tag, ...ref] = line.split('\t');
      links.push(linkOne(client, childKeys[i]!, job.id, tag!, ref.join('\t'), eventsMaxLen));
    }
  });
  await Promise.all(links);
}

/**
 * Links child `childId` of `childKeys` to its parent `ref` (`queue \t partition \t id`) in the queue of
 * hash tag `parentTag`, resolves the child at once if the parent has finished (or is gone: as dead),
 * then drops the `xlinks` entry. Every step is idempotent.
 */
async function linkOne(
  client: RedisClient,
  childKeys: QueueKeys,
  childId: string,
  parentTag: string,
  ref: string,
  eventsMaxLen: number,
): Promise<void> {
  const [queue, part, parentId] = ref.split('\t') as [string, string, string];
  // The child's link number (the first line of its pending parents, `#n`): a notification carries it,
  // so one meant for an earlier job of this id is told apart. None: nothing left to link.
  const pending = await untilClosed(
    client,
    client.hget(childKeys.annex, `${childId}${ANNEX_SUFFIX.crossPending}`),
  );
  const [first, ...refs] = (pending ?? '').split('\n');
  const link = first?.startsWith('#') ? first.slice(1) : undefined;
  if (link !== undefined && refs.includes(ref)) {
    const state = await callScript(client, scripts.crossLink, tagKeys(parentTag), {
      parent: parentId,
      link: `${childKeys.tag}\t${childId}\t${queue}\t${part}\t${link}`,
    });
    if (state === 'c' || state === 'x' || state === '') {
      const outcome = state === 'c' ? 'c' : 'x';
      const r = await resolve(client, childKeys, childId, ref, outcome, link, eventsMaxLen);
      if (r.notified) await forwardCross(client, childKeys, eventsMaxLen);
    }
  }
  await untilClosed(client, client.zrem(childKeys.xlinks, `${childId}\t${parentTag}\t${ref}`));
}

function resolve(
  client: RedisClient,
  k: QueueKeys,
  child: string,
  parent: string,
  outcome: 'c' | 'x',
  link: string,
  eventsMaxLen: number,
): Promise<CrossResolveAnswer> {
  return callScript(client, scripts.crossResolve, k, {
    now: '',
    wakeChannel: k.wakeChannel,
    doneChannel: k.doneChannel,
    eventsMaxLen,
    child,
    parent,
    outcome,
    link,
  });
}

/**
 * Delivers the `xnotify` outbox of `keys` (step 4): each notification resolves its child in the
 * child's queue, then leaves the outbox; a child that dies and has children in other queues has its
 * own queue's outbox delivered too. Then the `wnotify` outbox: ends of job.addChildren's children for
 * parents in other hash tags (children.ts). Returns how many were delivered. Safe to run anywhere at
 * once: a notification delivered twice counts once.
 */
export async function forwardCross(
  client: RedisClient,
  keys: QueueKeys,
  eventsMaxLen: number,
  limit = SCRIPT_BATCH_LIMIT,
): Promise<number> {
  return (
    (await forwardDependents(client, keys, eventsMaxLen, limit)) +
    (await forwardChildEnds(client, keys, limit))
  );
}

async function forwardDependents(
  client: RedisClient,
  keys: QueueKeys,
  eventsMaxLen: number,
  limit: number,
): Promise<number> {
  let total = 0;
  for (;;) {
    const members = await untilClosed(client, client.zrange(keys.xnotify, 0, limit - 1));
    if (members.length === 0) return total;
    const onward = new Map<string, QueueKeys>();
    await Promise.all(
      members.map(async (m) => {
        // `outcome \t child tag \t child id \t queue \t partition \t link number \t parent id`
        const [outcome, childTag, childId, queue, part, link, ...parentId] = m.split('\t') as string[];
        const childKeys = tagKeys(childTag!);
        const ref = `${queue}\t${part}\t${parentId.join('\t')}`;
        const r = await resolve(
          client,
          childKeys,
          childId!,
          ref,
          outcome === 'c' ? 'c' : 'x',
          link ?? '',
          eventsMaxLen,
        );
        if (r.notified) onward.set(childTag!, childKeys);
      }),
    );
    await untilClosed(client, client.zrem(keys.xnotify, ...members));
    for (const k of onward.values()) await forwardCross(client, k, eventsMaxLen, limit);
    total += members.length;
    if (members.length < limit) return total;
  }
}

/**
 * Makes the links a crash left in the `xlinks` of `keys` (step 2 again, up to `limit`): the recovery
 * pass runs it. Returns how many entries it linked.
 */
export async function relinkCross(
  client: RedisClient,
  keys: QueueKeys,
  eventsMaxLen: number,
  limit = SCRIPT_BATCH_LIMIT,
): Promise<number> {
  const members = await untilClosed(client, client.zrange(keys.xlinks, 0, limit - 1));
  await Promise.all(
    members.map((m) => {
      const [childId, parentTag, ...ref] = m.split('\t') as [string, string, ...string[]];
      return linkOne(client, keys, childId, parentTag, ref.join('\t'), eventsMaxLen);
    }),
  );
  return members.length;
}

/**
 * The stored results of a job's parents in other queues (its annex field `crossParents`), keyed
 * `queue:id`; undefined for a parent gone or not completed. Reads each parent's queue: not atomic.
 */
export async function crossParentResults(
  client: RedisClient,
  prefix: string,
  lines: string,
): Promise<Record<string, unknown>> {
  const refs = lines.split('\n').map((line) => line.split('\t') as [string, string, string]);
  const records = await Promise.all(
    refs.map(([queue, part, id]) =>
      untilClosed(
        client,
        client.hget(queueKeys(prefix, queue, part === '' ? undefined : Number(part)).jobs, id),
      ),
    ),
  );
  const out: Record<string, unknown> = {};
  refs.forEach(([queue, , id], i) => {
    const rec = records[i];
    out[`${queue}:${id}`] = rec ? resultOf(rec) : undefined;
  });
  return out;
}
