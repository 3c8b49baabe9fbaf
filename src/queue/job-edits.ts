/**
 * An operator's edits of jobs that have not started, and the two queue-wide deletions:
 *
 *   updateData      update-data.lua      any job but an active one: new data (validated like add)
 *   changePriority  change-priority.lua  waiting / delayed / blocked: new priority (and place in line)
 *   changeDelay     change-delay.lua     waiting / delayed / blocked: due delayMs from now
 *   drain           drain.lua            delete every waiting job, delayed ones (unless kept), blocked ones if asked
 *   obliterate      obliterate.lua       delete every key of the queue, in bounded steps
 *
 * Per-job edits run in the partition that holds the job (admin.ts runJobScript: unknown ids throw
 * JobNotFoundError, a job in a refused state InvalidStateError); queue-wide calls visit every
 * partition. docs/admin.md describes what each one does and does not do.
 */

import { MAX_PRIORITY, SCRIPT_BATCH_LIMIT } from '../defaults.js';
import { QueueActiveError } from '../errors.js';
import { MAX_DELAY_MS } from '../options/backoff.js';
import { callScript, scripts } from '../scripts/specs.js';
import type { QueueKeys } from '../store/keys.js';
import { checkBool, checkCallOptions, checkInt, toJson } from '../validate.js';
import { runJobScript } from './admin.js';
import type { QueueContext } from './context.js';
import { forwardCross } from './cross-queue.js';
import { countJobs } from './reads.js';

/** Replaces the data of a job that is not active (an active one: job.updateData, from its attempt). */
export async function updateData(ctx: QueueContext, id: string, data: unknown): Promise<void> {
  const json = toJson(`data of job ${JSON.stringify(id)}`, data, ctx.options.maxPayloadBytes);
  await runJobScript(ctx, scripts.updateData, 'update the data of', id, { data: json });
}

/** New priority for a waiting, delayed or blocked job; a waiting one goes to the back of that priority. */
export async function changePriority(ctx: QueueContext, id: string, priority: number): Promise<void> {
  const p = checkInt('priority', priority, -MAX_PRIORITY, MAX_PRIORITY);
  await runJobScript(ctx, scripts.changePriority, 'change the priority of', id, { priority: p });
}

/** A waiting, delayed or blocked job becomes due `delayMs` from now (Redis clock); 0: waiting at once. */
export async function changeDelay(ctx: QueueContext, id: string, delayMs: number): Promise<void> {
  const ms = checkInt('delayMs', delayMs, 0, MAX_DELAY_MS);
  await runJobScript(ctx, scripts.changeDelay, 'change the delay of', id, { delayMs: ms });
}

/** Options of queue.drain. */
export interface DrainOptions {
  /** Delete blocked jobs too (default false). */
  blocked?: boolean;
  /** Delete delayed jobs too (default true; false keeps them, due or not). */
  delayed?: boolean;
}

/**
 * Deletes every waiting job, and delayed ones (unless `delayed: false`) and blocked ones (with
 * `blocked: true`), of every partition, at most SCRIPT_BATCH_LIMIT per script call; returns how many
 * went. The first call's count of what is left bounds the calls per partition, so producers adding
 * meanwhile cannot keep a drain going.
 */
export async function drain(ctx: QueueContext, opts: DrainOptions = {}): Promise<number> {
  checkCallOptions('drain options', opts, ['blocked', 'delayed']);
  const blocked = checkBool('blocked', opts.blocked ?? false);
  const delayed = checkBool('delayed', opts.delayed ?? true);
  const layout = await ctx.open();
  let removed = 0;
  for (const k of layout.parts) {
    let calls = Number.POSITIVE_INFINITY;
    let before = Number.POSITIVE_INFINITY;
    for (let n = 0; n < calls; n++) {
      const r = await callScript(ctx.client, scripts.drain, k, {
        now: '',
        limit: SCRIPT_BATCH_LIMIT,
        blocked: blocked ? '1' : '',
        delayed: delayed ? '1' : '',
        eventsMaxLen: ctx.options.eventsMaxLen,
        wakeChannel: k.wakeChannel,
        doneChannel: k.doneChannel,
      });
      removed += r.removed;
      // Done, or no progress (only entries of jobs that moved on meanwhile were left).
      if (r.left === 0 || (r.removed === 0 && r.left >= before)) break;
      if (n === 0) calls = 2 + Math.ceil(r.left / SCRIPT_BATCH_LIMIT);
      before = r.left;
    }
    // Children in other queues of the jobs drained (they fail with them): told now.
    await forwardCross(ctx.client, k, ctx.options.eventsMaxLen);
  }
  return removed;
}

/**
 * Deletes every key of the queue: each partition's tag, then the unpartitioned one (whose meta records
 * the partition count, so a run cut off halfway is found again by a Queue with partitions: 'auto').
 * Refused with QueueActiveError while jobs are active, unless `force`.
 */
export async function obliterate(ctx: QueueContext, opts: { force?: boolean } = {}): Promise<void> {
  checkCallOptions('obliterate options', opts, ['force']);
  const force = checkBool('force', opts.force ?? false);
  const layout = await ctx.open();
  if (!force) {
    // Every partition is checked before any is deleted; each script call checks its own again.
    const { active } = await countJobs(ctx.client, layout);
    if (active > 0) throw new QueueActiveError(ctx.name, active);
  }
  const tags = layout.partitioned ? [...layout.parts, layout.base] : [layout.base];
  for (const k of tags) await obliterateTag(ctx, k, force);
}

async function obliterateTag(ctx: QueueContext, k: QueueKeys, force: boolean): Promise<void> {
  let cursor = '0';
  do {
    const r = await callScript(ctx.client, scripts.obliterate, k, {
      cursor,
      force: force ? '1' : '',
      count: SCRIPT_BATCH_LIMIT,
    });
    if (r.active > 0) throw new QueueActiveError(ctx.name, r.active);
    cursor = r.cursor;
  } while (cursor !== '0');
}
