/**
 * `surety repartition`: changes a queue's partition count, from 1 to N or from N to 1 (to go from N to
 * M, go through 1: the two layouts then never share a hash tag, so no job is both source and target).
 *
 *  1. Pause the old partitions; wait (up to `waitMs`) until none of their jobs is active, and refuse
 *     while any is blocked on a parent (a dependency graph cannot be split across the move).
 *  2. Switch: the old partitions are marked `moved` (add.lua refuses producers still on the old count
 *     with PartitionMismatchError) and the new count is recorded. From here new-layout producers and
 *     workers run normally.
 *  3. Copy the stored rate limit and group limits. Move waiting (grouped ones to their group's new
 *     partition), delayed, completed and dead jobs, then schedules, one batch at a time: copy into the
 *     new partition (move-in.lua skips ids already there), then delete from the old one (remove.lua).
 *  4. Clear the in-progress mark. A run cut off anywhere can be started again with the same count.
 *
 * Stats history and event streams of the old layout are not carried over.
 */

import { DEFAULT_PREFIX } from '../defaults.js';
import { RepartitionError, ValidationError } from '../errors.js';
import { settling } from '../redis/in-flight.js';
import { callScript, type RedisClient, scripts } from '../scripts/specs.js';
import { type AnnexPart, annexFields, annexOf, readHeader } from '../store/job-record.js';
import { groupKeys, type QueueKeys, queueKeys } from '../store/keys.js';
import { occurrenceId } from '../store/occurrence-id.js';
import {
  checkCallOptions,
  checkInt,
  checkPartitions,
  checkPrefix,
  checkQueueName,
  show,
} from '../validate.js';
import { writeGroupLimits } from './flow-control.js';
import { Layout, setPausedAll } from './partitions.js';
import { countJobs } from './reads.js';

export interface RepartitionOptions {
  /** The new partition count. */
  to: number;
  prefix?: string;
  /** How long to wait for active jobs of the old partitions to finish. Default 60 000 ms. */
  waitMs?: number;
  onProgress?: (message: string) => void;
}

export interface RepartitionResult {
  from: number;
  to: number;
  /** Jobs copied into the new layout (ids already there are not counted). */
  moved: number;
  schedules: number;
}

const BATCH = 100;

export async function repartition(
  rawClient: RedisClient,
  name: string,
  opts: RepartitionOptions,
): Promise<RepartitionResult> {
  // Every step is resumable: a call whose reply is lost rejects (ConnectionError) instead of hanging.
  const client = settling(rawClient);
  checkQueueName(name);
  // Everything is checked before the first write: a bad onProgress used to fail mid-migration.
  checkCallOptions('repartition options', opts ?? null, ['to', 'prefix', 'waitMs', 'onProgress']);
  if (opts.to === undefined) throw new ValidationError('repartition needs the new partition count (to)');
  if (opts.onProgress !== undefined && typeof opts.onProgress !== 'function') {
    throw new ValidationError(`onProgress must be a function, got ${show(opts.onProgress)}`);
  }
  const to = checkPartitions(opts.to);
  if (to === 0) throw new ValidationError("repartition needs a partition count, not 'auto'");
  const prefix = opts.prefix === undefined ? DEFAULT_PREFIX : checkPrefix(opts.prefix);
  const waitMs = checkInt('waitMs', opts.waitMs ?? 60_000, 0, 24 * 3_600_000);
  const say = opts.onProgress ?? (() => {});
  const base = queueKeys(prefix, name);
  const [recorded, moved, movedFrom] = await client.hmget(base.meta, 'partitions', 'moved', 'movedFrom');
  let from: number;
  if (movedFrom !== null) {
    from = Number(movedFrom);
    const target = Number(moved ?? recorded ?? 1);
    if (target !== to) {
      throw new RepartitionError(
        `a repartition of ${name} from ${from} to ${target} partition(s) was cut off: run it again with --to ${target}`,
      );
    }
    say(`resuming the repartition of ${name} from ${from} to ${to} partition(s)`);
  } else {
    from = Number(moved ?? recorded ?? 1);
    if (from === to) return { from, to, moved: 0, schedules: 0 };
  }
  if (from !== 1 && to !== 1) {
    throw new RepartitionError(
      `${name} has ${from} partitions: repartition to 1 first, then to ${to} (the two layouts must not share partitions)`,
    );
  }
  const old = new Layout(prefix, name, from);
  const target = new Layout(prefix, name, to);

  const wasPaused = (await Promise.all(old.parts.map((k) => client.hget(k.meta, 'paused')))).some(
    (v) => v !== null,
  );
  // The move's own pause and its restoring are no lifecycle events (eventsMaxLen 0).
  await setPausedAll(client, old.parts, true, 0);
  await waitIdle(client, old, waitMs, say);

  // Switch. The mark `movedFrom` says a move is under way, so a cut-off run can be resumed. The old
  // partitions (other hash tags) are marked first, one command each: a run cut off before the base
  // tag's switch finds the old count still recorded and does it all again.
  if (to === 1) for (const k of old.parts) await client.hset(k.meta, 'moved', 1);
  await callScript(client, scripts.switchPartitions, base, { to, from });
  await setPausedAll(client, target.parts, wasPaused, 0);
  say(`recorded ${to} partition(s); producers and workers on ${from} are now refused`);

  await moveFlowControl(client, old, target);
  let count = 0;
  for (const k of old.parts) count += await moveJobs(client, k, target, say);
  let schedules = 0;
  for (const k of old.parts) schedules += await moveSchedules(client, k, target);
  await callScript(client, scripts.switchPartitions, base, { to, from: '' });
  say(`moved ${count} job(s) and ${schedules} schedule(s) of ${name} to ${to} partition(s)`);
  return { from, to, moved: count, schedules };
}

async function waitIdle(
  client: RedisClient,
  old: Layout,
  waitMs: number,
  say: (m: string) => void,
): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (let said = false; ; ) {
    const { active, blocked } = await countJobs(client, old);
    if (blocked > 0) {
      throw new RepartitionError(
        `${blocked} job(s) are blocked on parents: let them run (or cancel them) before repartitioning; the old partitions stay paused`,
      );
    }
    if (active === 0) return;
    if (Date.now() > deadline) {
      throw new RepartitionError(
        `${active} job(s) are still active after ${waitMs} ms; the old partitions stay paused: run again once they finish`,
      );
    }
    if (!said) say(`waiting for ${active} active job(s) to finish (the old partitions are paused)`);
    said = true;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Ids of one old partition still to move, a batch at a time, with their sort scores. */
async function nextBatch(client: RedisClient, k: QueueKeys): Promise<{ id: string; score: string }[]> {
  const listed = await client.lrange(k.waiting, 0, BATCH - 1);
  if (listed.length > 0) return listed.map((id) => ({ id, score: '' }));
  const prio = await client.zrange(k.prio, 0, BATCH - 1);
  if (prio.length > 0) return prio.map((id) => ({ id, score: '' }));
  // Then the groups' waiting jobs, a group at a time, in their claim order (remove.lua keeps the
  // group's bookkeeping right as they leave).
  const [group] = await client.zrange(k.groupBacklog, 0, 0);
  if (group !== undefined) {
    const g = groupKeys(k, group);
    const ids = [
      ...(await client.zrangebyscore(g.prio, '-inf', '(0', 'LIMIT', 0, BATCH)),
      ...(await client.lrange(g.waiting, 0, BATCH - 1)),
      ...(await client.zrangebyscore(g.prio, 0, '+inf', 'LIMIT', 0, BATCH)),
    ].slice(0, BATCH);
    if (ids.length > 0) return ids.map((id) => ({ id, score: '' }));
  }
  for (const set of [k.delayed, k.completed, k.dead]) {
    const flat = await client.zrange(set, 0, BATCH - 1, 'WITHSCORES');
    if (flat.length > 0) {
      const out: { id: string; score: string }[] = [];
      for (let i = 0; i < flat.length; i += 2) out.push({ id: flat[i]!, score: flat[i + 1]! });
      return out;
    }
  }
  return [];
}

/** A job as move-in.lua copies it: its record, its score in its set, and every annex part. */
type MoveInRow = Record<
  'id' | 'record' | 'score' | Exclude<AnnexPart, 'errorLines'> | 'errors' | 'waiter',
  string
>;

async function moveJobs(
  client: RedisClient,
  k: QueueKeys,
  target: Layout,
  say: (m: string) => void,
): Promise<number> {
  let moved = 0;
  for (;;) {
    const batch = await nextBatch(client, k);
    if (batch.length === 0) return moved;
    const records = await client.hmget(k.jobs, ...batch.map((b) => b.id));
    const annexes = await client.hmget(k.annex, ...batch.flatMap((b) => annexFields(b.id)));
    const waiters = await client.hmget(k.waiters, ...batch.map((b) => b.id));
    const byPartition = new Map<number, MoveInRow[]>();
    batch.forEach((b, i) => {
      const record = records[i];
      if (record == null) return; // a stale index entry: remove.lua below cleans it
      const a = annexOf(annexes, i);
      const parents = a.parents ?? '';
      // A group lives in one partition: its jobs go where new jobs of the group are routed.
      const group = readHeader(record.slice(0, record.indexOf('\n'))).group;
      const p = parents
        ? target.home(parents.split('\n')[0]!)
        : group !== ''
          ? target.route('', group, [])
          : target.home(b.id);
      const rows = byPartition.get(p) ?? [];
      rows.push({
        id: b.id,
        record,
        score: b.score,
        errors: a.errorLines ?? '',
        progress: a.progress ?? '',
        logs: a.logs ?? '',
        parents,
        body: a.body ?? '',
        steps: a.steps ?? '',
        crossParents: a.crossParents ?? '',
        crossPending: a.crossPending ?? '',
        signals: a.signals ?? '',
        signalWait: a.signalWait ?? '',
        children: a.children ?? '',
        childEnds: a.childEnds ?? '',
        flowParent: a.flowParent ?? '',
        waiter: waiters[i] ?? '',
      });
      byPartition.set(p, rows);
    });
    for (const [p, rows] of byPartition) {
      const tk = target.parts[p]!;
      moved += await callScript(client, scripts.moveIn, tk, { wakeChannel: tk.wakeChannel }, rows, {
        operation: 'repartition',
      });
    }
    // Copied (or already there): delete from the old partition. A job no longer there (NOT_FOUND) is fine.
    await Promise.all(
      batch.map((b) =>
        callScript(client, scripts.remove, k, {
          id: b.id,
          eventsMaxLen: 0,
          wakeChannel: k.wakeChannel,
          doneChannel: k.doneChannel,
          now: '',
        }),
      ),
    );
    say(`moved ${moved} job(s) so far`);
  }
}

/**
 * The stored rate limit and group limits follow the queue: the default group limits and the rate limit
 * (split anew over the new count) to every new partition, each group's override to its group's new
 * partition. Written by the same scripts as setRateLimit and setGroupLimits.
 */
async function moveFlowControl(client: RedisClient, old: Layout, target: Layout): Promise<void> {
  const from = old.parts[0]!;
  const [defaults, rate] = await client.hmget(from.meta, 'glimits', 'rate');
  const overrides = await Promise.all(old.parts.map((k) => client.hgetall(k.groupLimits)));
  const [perPart = 0, windowMs = 0] = (rate ?? '').split('|').map(Number);
  const split = rate ? `${Math.ceil((perPart * old.count) / target.count)}|${windowMs}` : '';
  for (const tk of target.parts) {
    await callScript(client, scripts.setRateLimit, tk, { rate: split, wakeChannel: tk.wakeChannel });
    await writeGroupLimits(client, tk, '', defaults ?? '');
  }
  for (const [group, limits] of overrides.flatMap((o) => Object.entries(o))) {
    await writeGroupLimits(client, target.parts[target.route('', group, [])]!, group, limits);
  }
}

async function moveSchedules(client: RedisClient, k: QueueKeys, target: Layout): Promise<number> {
  const [specs, pending] = await Promise.all([
    client.hgetall(k.schedules),
    client.hgetall(k.schedulePending),
  ]);
  let n = 0;
  for (const [key, spec] of Object.entries(specs)) {
    const tk = target.parts[target.home(occurrenceId(key, 0))]!;
    await client.hset(tk.schedules, key, spec);
    const pend = pending[key];
    if (pend !== undefined) await client.hset(tk.schedulePending, key, pend);
    await client.hdel(k.schedules, key);
    await client.hdel(k.schedulePending, key);
    n++;
  }
  return n;
}
