/**
 * Batches (queue.addBatch, queue.batch): jobs added together under one batch id, counted as they
 * finish, with one callback job added when the last one has finished (docs/batches.md).
 *
 * The whole batch, its members and its record `{tag}:b:<id>` are written by one atomic add.lua call, in
 * one partition (chosen by the batch id, like a group), so the batch hash shares the members' hash tag.
 * The counting lives in the scripts that finish jobs (includes/batch_settle.lua).
 */
import { randomUUID } from 'node:crypto';
import { MAX_BULK } from '../defaults.js';
import { ValidationError } from '../errors.js';
import { batchKey } from '../store/keys.js';
import type { AddedBatch, BatchInfo, BatchOptions, JobOptions } from '../types.js';
import { checkJobId, checkKnownKeys, checkObject, show } from '../validate.js';
import type { QueueContext } from './context.js';
import { addBatchRows, type BatchArgs, type RoutedRow, toRow } from './enqueue.js';

/** Options a member or the callback may not use: they would move it out of the batch's partition or call. */
const NOT_IN_BATCH = ['dedupe', 'dependsOn', 'partitionKey'] as const;

/** Adds the batch: validated whole before anything is sent; one add.lua call writes it all. */
export async function addBatch(
  ctx: QueueContext,
  items: readonly { data: unknown; opts?: JobOptions }[],
  opts: BatchOptions | undefined,
): Promise<AddedBatch> {
  if (!Array.isArray(items) || items.length === 0) {
    throw new ValidationError(`addBatch expects a non-empty array of { data, opts }, got ${show(items)}`);
  }
  if (items.length > MAX_BULK) {
    throw new ValidationError(`addBatch takes at most ${MAX_BULK} jobs per call, got ${items.length}`);
  }
  // One span for the call: every member and the callback job carry its context.
  const attributes = { 'messaging.batch.message_count': items.length };
  return ctx.options.tracing.produce(ctx.name, 'add', attributes, (trace) => addIn(ctx, items, opts, trace));
}

async function addIn(
  ctx: QueueContext,
  items: readonly { data: unknown; opts?: JobOptions }[],
  opts: BatchOptions | undefined,
  trace: string,
): Promise<AddedBatch> {
  const o = checkObject('addBatch options', opts ?? {});
  checkKnownKeys('addBatch options', o, ['onComplete', 'id']);
  const id = o.id === undefined ? randomUUID() : checkJobId(o.id);
  const rows = items.map((item, i) => {
    checkKnownKeys(`item ${i}`, checkObject(`item ${i}`, item), ['data', 'opts']);
    const row = toRow(ctx, item.data, item.opts, `item ${i} data`, id, trace);
    if (row.dedupeKey !== '') throw new ValidationError(`item ${i}: dedupe cannot be used in a batch`);
    return row;
  });
  const callback = o.onComplete === undefined ? null : callbackArgs(ctx, o.onComplete, trace);
  const layout = await ctx.open();
  const p = layout.route('', id, []);
  const jobs = await addBatchRows(ctx, layout, p, rows, {
    batch: id,
    ...(callback ?? { cbId: '', cbPriority: 0, cbDelayMs: '', cbRunAt: '', cbTail: '', cbData: '' }),
  });
  return { id, jobs };
}

/** The callback's add.lua arguments, from onComplete `{ data?, opts? }`. */
function callbackArgs(ctx: QueueContext, value: unknown, trace: string): Omit<BatchArgs, 'batch'> {
  const cb = checkObject('onComplete', value);
  checkKnownKeys('onComplete', cb, ['data', 'opts']);
  const opts = cb.opts === undefined ? undefined : checkObject('onComplete.opts', cb.opts);
  for (const name of NOT_IN_BATCH) {
    if (opts?.[name] !== undefined) throw new ValidationError(`onComplete.opts.${name} is not allowed`);
  }
  // Data may be undefined (the callback's data then has no `data`); anything else must be plain JSON.
  const row: RoutedRow = toRow(
    ctx,
    cb.data ?? null,
    opts as JobOptions | undefined,
    'onComplete.data',
    '',
    trace,
  );
  return {
    cbId: row.id,
    cbPriority: row.priority,
    cbDelayMs: row.delayMs,
    cbRunAt: row.runAt,
    cbTail: row.optionTail,
    cbData: cb.data === undefined ? '' : row.data,
  };
}

/** The batch's progress, or null when it does not exist (never added, or expired after finishing). */
export async function readBatch(ctx: QueueContext, id: string): Promise<BatchInfo | null> {
  checkJobId(id);
  const layout = await ctx.open();
  const k = layout.parts[layout.route('', id, [])]!;
  const h = await ctx.client.hgetall(batchKey(k, id));
  if (h.total === undefined) return null;
  const info: BatchInfo = {
    id,
    total: Number(h.total),
    pending: Number(h.pending),
    completed: Number(h.completed),
    dead: Number(h.dead),
    deadIds: h.deadIds ? h.deadIds.split('\n') : [],
    createdAt: Number(h.createdAt),
  };
  if (h.callbackId !== undefined) info.callbackId = h.callbackId;
  if (h.finishedAt !== undefined) info.finishedAt = Number(h.finishedAt);
  return info;
}
