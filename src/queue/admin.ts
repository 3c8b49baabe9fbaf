/**
 * The queue's admin writes: per-job changes (retry, remove, promote, cancel, a log line), clean, pause
 * and resume, the global concurrency limit, and a recovery pass. Every write goes through a script, and in a
 * partitioned queue applies to the partition that holds the job (per-job) or to every partition.
 * Bulk operations over many jobs are in bulk.ts.
 */
import { DEFAULT_RETENTION, MAX_LOG_LINE_CHARS, MAX_LOG_LINES, SCRIPT_BATCH_LIMIT } from '../defaults.js';
import { ValidationError } from '../errors.js';
import { resolveRetentionRule } from '../options/retention.js';
import { settling } from '../redis/in-flight.js';
import { serverNow } from '../redis/server-clock.js';
import { type Refusal, refusalError } from '../scripts/refusals.js';
import { type ArgValue, callScript, type ScriptSpec, scripts } from '../scripts/specs.js';
import type { QueueKeys } from '../store/keys.js';
import type { RetentionRule } from '../types.js';
import { checkCallOptions, checkInt, checkJobId, show } from '../validate.js';
import type { QueueContext } from './context.js';
import { forwardCross } from './cross-queue.js';
import { setPausedAll } from './partitions.js';
import { locate } from './reads.js';
import { type RecoveredJobs, recoverExpired } from './recovery.js';

export type JobChange = 'retry' | 'remove' | 'promote' | 'cancel';
const CHANGE_SCRIPTS = {
  retry: scripts.retry,
  remove: scripts.remove,
  promote: scripts.promote,
  cancel: scripts.cancel,
} as const;

/** Runs a single-job admin script in the partition that holds the job; unknown ids fail in their home. */
export async function changeJob(ctx: QueueContext, change: JobChange, id: string): Promise<void> {
  const k = await runJobScript(ctx, CHANGE_SCRIPTS[change], change, id);
  // A removed or cancelled job's children in other queues fail with it: told now (cross-queue.ts).
  if (change === 'remove' || change === 'cancel') await forwardCross(ctx.client, k, ctx.options.eventsMaxLen);
}

/**
 * Runs `spec`, a script about one job answering 'OK' or a refusal (NOT_FOUND, INVALID_STATE), in the
 * partition that holds job `id`, with the usual arguments (now, id, channels, events cap) and `args`;
 * a refusal is thrown as its typed error, naming `operation`. Also used by job-edits.ts.
 */
export async function runJobScript(
  ctx: QueueContext,
  spec: ScriptSpec<string, never, Refusal | null>,
  operation: string,
  id: string,
  args: Record<string, ArgValue> = {},
): Promise<QueueKeys> {
  const k = await jobPartition(ctx, id);
  const refusal = await callScript(ctx.client, spec, k, {
    now: '',
    id,
    wakeChannel: k.wakeChannel,
    doneChannel: k.doneChannel,
    eventsMaxLen: ctx.options.eventsMaxLen,
    ...args,
  });
  if (refusal) throw refusalError(refusal, { operation, jobId: id });
  return k;
}

/** The keys of the partition that holds job `id` (its home when none does: the script answers NOT_FOUND). */
export async function jobPartition(ctx: QueueContext, id: string): Promise<QueueKeys> {
  checkJobId(id);
  const layout = await ctx.open();
  // One partition: the script itself answers NOT_FOUND, no lookup needed.
  const found = layout.partitioned ? await locate(ctx.client, layout, id) : 0;
  return layout.parts[found < 0 ? layout.home(id) : found]!;
}

/**
 * Appends `line` to job `id`'s log, as a processor's job.log does (add-log.lua: the same annex field,
 * cut at MAX_LOG_LINE_CHARS, the last MAX_LOG_LINES kept), in any state; resolves with the number of
 * lines the log holds now. JobNotFoundError for an unknown id.
 */
export async function addJobLog(ctx: QueueContext, id: string, line: string): Promise<number> {
  checkJobId(id);
  if (typeof line !== 'string') {
    throw new ValidationError(`addJobLog takes a log line as a string, got ${show(line)}`);
  }
  const k = await jobPartition(ctx, id);
  const r = await callScript(ctx.client, scripts.addLog, k, {
    id,
    maxLines: MAX_LOG_LINES,
    line: JSON.stringify(line.slice(0, MAX_LOG_LINE_CHARS)),
  });
  if (typeof r !== 'number') throw refusalError(r, { operation: 'add a log line to', jobId: id });
  return r;
}

/**
 * Deletes completed or dead jobs that finished more than `olderThanMs` ago (Redis clock; 0: all),
 * oldest first, atomically per batch of up to 1 000, at most `limit` in all (default 10 000).
 */
export type CleanOptions = { olderThanMs?: number; limit?: number };
export type CleanOutcome = { removed: number; more: boolean };

export async function cleanJobs(
  ctx: QueueContext,
  state: 'completed' | 'dead',
  opts: CleanOptions,
): Promise<CleanOutcome> {
  if (state !== 'completed' && state !== 'dead') {
    throw new ValidationError(`clean takes the state 'completed' or 'dead', got ${show(state)}`);
  }
  checkCallOptions('clean options', opts, ['olderThanMs', 'limit']);
  const olderThanMs = checkInt('olderThanMs', opts.olderThanMs ?? 0, 0);
  const limit = checkInt('limit', opts.limit ?? 10_000, 1, 1_000_000);
  const layout = await ctx.open();
  const cutoff = (await serverNow(ctx.client)) - olderThanMs;
  let removed = 0;
  for (const part of layout.parts) {
    const keys = { ...part, finished: state === 'completed' ? part.completed : part.dead };
    for (;;) {
      if (removed >= limit) return { removed, more: true };
      const batch = Math.min(SCRIPT_BATCH_LIMIT, limit - removed);
      const r = await callScript(ctx.client, scripts.clean, keys, {
        cutoff,
        limit: batch,
        state,
        eventsMaxLen: ctx.options.eventsMaxLen,
      });
      removed += r.removed;
      if (!r.more) break;
    }
  }
  return { removed, more: false };
}

/**
 * Pauses or resumes claiming in every partition (resume wakes idle workers); each partition whose
 * state changes appends `paused` or `resumed` to its event stream.
 */
export async function setPaused(ctx: QueueContext, paused: boolean): Promise<void> {
  await setPausedAll(ctx.client, (await ctx.open()).parts, paused, ctx.options.eventsMaxLen);
}

/** True when the queue is paused (in a partitioned queue: when any partition is). */
export async function isPaused(ctx: QueueContext): Promise<boolean> {
  const layout = await ctx.open();
  const reads = settling(ctx.client);
  const flags = await Promise.all(layout.parts.map((k) => reads.hexists(k.meta, 'paused')));
  return flags.includes(1);
}

/** Sets (or with null removes) the cap on active jobs, in every partition (set-concurrency.lua). */
export async function setGlobalConcurrency(ctx: QueueContext, limit: number | null): Promise<void> {
  const checked = limit === null ? '' : checkInt('globalConcurrency', limit, 1, 1_000_000);
  const layout = await ctx.open();
  await Promise.all(
    layout.parts.map((k) =>
      callScript(ctx.client, scripts.setConcurrency, k, { concurrency: checked, wakeChannel: k.wakeChannel }),
    ),
  );
}

export async function getGlobalConcurrency(ctx: QueueContext): Promise<number | null> {
  const layout = await ctx.open();
  const v = await settling(ctx.client).hget(layout.parts[0]!.meta, 'concurrency');
  return v === null ? null : Number(v);
}

/** One recovery pass over every partition (what every worker does every recoverIntervalMs). */
export async function recoverAll(
  ctx: QueueContext,
  opts: { deadRetention?: RetentionRule },
): Promise<RecoveredJobs> {
  checkCallOptions('recoverExpired options', opts, ['deadRetention']);
  const deadRetention =
    opts.deadRetention === undefined
      ? undefined
      : resolveRetentionRule('deadRetention', opts.deadRetention, DEFAULT_RETENTION.dead);
  const layout = await ctx.open();
  const out: RecoveredJobs = { requeued: [], dead: [], expired: [], repairedSchedules: 0, crossQueue: 0 };
  for (const k of layout.parts) {
    const r = await recoverExpired(ctx.client, k, deadRetention, ctx.options.eventsMaxLen);
    out.requeued.push(...r.requeued);
    out.dead.push(...r.dead);
    out.expired.push(...r.expired);
    out.repairedSchedules += r.repairedSchedules;
    out.crossQueue += r.crossQueue;
  }
  return out;
}
