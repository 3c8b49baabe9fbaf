/**
 * The add path: options and data validated into rows, each row routed to its partition, one atomic
 * add.lua call per partition (all partitions checked first when a call spans several), and, with
 * `durability.waitReplicas`, a WAIT for replicas.
 */
import { DEFAULT_LEASE_MS, MAX_BULK } from '../defaults.js';
import { CrossPartitionError, DurabilityError, ValidationError } from '../errors.js';
import { type ResolvedAdd, resolveAddOptions } from '../options/job.js';
import { asConnectionError, untilClosed } from '../redis/in-flight.js';
import type { AddedRow } from '../scripts/replies.js';
import { callScript, scripts } from '../scripts/specs.js';
import { encodeOptionTail, type ResolvedJobOptions } from '../store/job-record.js';
import type { QueueKeys } from '../store/keys.js';
import type { AddedJob, JobOptions } from '../types.js';
import { checkKnownKeys, checkObject, toJson } from '../validate.js';
import type { QueueContext } from './context.js';
import { linkCrossParents, readCrossParents } from './cross-queue.js';
import type { Layout } from './partitions.js';

type AddRow = Record<
  | 'id'
  | 'priority'
  | 'delayMs'
  | 'runAt'
  | 'optionTail'
  | 'data'
  | 'dependsOn'
  | 'depMode'
  | 'group'
  | 'dedupeKey'
  | 'dedupeMode'
  | 'dedupeTtlMs'
  | 'ttlMs'
  | 'xDependsOn'
  | 'waiter',
  string | number
>;
export type RoutedRow = AddRow & { partitionKey: string; crossDependsOn: string };

/** add.lua's batch arguments (queue.addBatch, batches.ts); NO_BATCH for every other add. */
export type BatchArgs = Record<
  'batch' | 'cbId' | 'cbPriority' | 'cbDelayMs' | 'cbRunAt' | 'cbTail' | 'cbData',
  string | number
>;
const NO_BATCH: BatchArgs = {
  batch: '',
  cbId: '',
  cbPriority: 0,
  cbDelayMs: '',
  cbRunAt: '',
  cbTail: '',
  cbData: '',
};

/** Adds one job. With an `id` that exists, returns that job (`isNew: false`) and enqueues nothing. */
export async function addJob(
  ctx: QueueContext,
  data: unknown,
  opts: JobOptions | undefined,
): Promise<AddedJob> {
  return ctx.options.tracing.produce(
    ctx.name,
    'add',
    {},
    async (trace) => {
      const row = toRow(ctx, data, opts, 'job data', '', trace);
      const layout = await ctx.open();
      if (row.crossDependsOn !== '') await readCrossParents(ctx, [row]);
      const p = route(layout, row);
      if (!isPlain(row)) return (await runAdd(ctx, layout, [row], [p]))[0]!;
      const [added] = await addOneScript(ctx, layout, p, row);
      await waitReplicas(ctx, layout.parts[p]!);
      return added!;
    },
    (added) => added.id,
  );
}

/**
 * Adds up to MAX_BULK (10 000) jobs (queue.addBulk), in order; an id given twice (or one that exists)
 * is reported with `isNew: false` and written once. Each partition's share is one atomic script call.
 *
 * A refused call writes nothing: every item is validated (options, data, routing) before anything is
 * sent, and each partition's script checks every parent and the queue's layout before its first
 * write. In a partitioned queue with jobs in more than one partition, every partition is checked
 * first and written only when all passed. What remains in that case: a parent removed (or trimmed by
 * retention), or a repartition started, between the check and the writes makes that partition's
 * write fail after the others succeeded; as after an `ERR_CONNECTION`, calling again with the same
 * explicit ids is safe (ids that exist are not written twice).
 */
export async function addJobs(
  ctx: QueueContext,
  items: readonly { data: unknown; opts?: JobOptions }[],
): Promise<AddedJob[]> {
  if (!Array.isArray(items)) throw new ValidationError('addBulk expects an array of { data, opts }');
  if (items.length > MAX_BULK) {
    throw new ValidationError(`addBulk takes at most ${MAX_BULK} jobs per call, got ${items.length}`);
  }
  // One span for the call: every job of it carries its context.
  const count = { 'messaging.batch.message_count': items.length };
  return ctx.options.tracing.produce(ctx.name, 'add', count, async (trace) => {
    const rows = items.map((item, i) => {
      checkKnownKeys(`item ${i}`, checkObject(`item ${i}`, item), ['data', 'opts']);
      return toRow(ctx, item.data, item.opts, `item ${i} data`, '', trace);
    });
    const layout = await ctx.open();
    // Parents in other queues are read first: a missing one is refused before anything is written.
    await readCrossParents(ctx, rows);
    // Route every item before sending anything: one refused (CrossPartitionError) writes nothing.
    const parts = rows.map((row) => route(layout, row));
    return runAdd(ctx, layout, rows, parts);
  });
}

/**
 * Rows for children of job.addChildren (src/worker/children.ts), checked as addBulk checks its
 * items, before the parent plans them; a dedupe key is refused (a child taken by a dedupe key would
 * be another job, which the parent would wait for in vain). The caller sets each row's id.
 */
export function childRows(
  ctx: QueueContext,
  items: readonly { data: unknown; opts?: JobOptions | undefined }[],
): RoutedRow[] {
  return items.map((item, i) => {
    if (item.opts?.dedupe !== undefined)
      throw new ValidationError(`child ${i}: a child job cannot take a dedupe key`);
    return toRow(ctx, item.data, item.opts, `child ${i} data`);
  });
}

/**
 * Runs add.lua's checks for children's rows (ids set) without writing: a child of another parent
 * (SURETY_CHILD_TAKEN), an unknown parent, a stale layout are refused before the parent plans them.
 */
export async function checkChildRows(ctx: QueueContext, rows: RoutedRow[], waiter: string): Promise<void> {
  const layout = await ctx.open();
  const checked = rows.map((row) => ({ ...row, data: '', waiter }));
  await readCrossParents(ctx, checked);
  const groups = new Map<number, AddRow[]>();
  for (const row of checked) {
    const p = route(layout, row);
    groups.set(p, [...(groups.get(p) ?? []), row]);
  }
  await Promise.all([...groups].map(([p, group]) => addScript(ctx, layout, p, group, true)));
}

/**
 * Adds children's rows (childRows, ids set) on addBulk's path, each carrying its parent (`waiter`:
 * `parent tag \t parent id \t parent queue \t parent createdAt \t this queue`), which add.lua keeps with the job so its end reaches
 * the parent.
 */
export async function addChildRows(
  ctx: QueueContext,
  rows: RoutedRow[],
  waiter: string,
): Promise<AddedJob[]> {
  for (const row of rows) row.waiter = waiter;
  const layout = await ctx.open();
  await readCrossParents(ctx, rows);
  const parts = rows.map((row) => route(layout, row));
  return runAdd(ctx, layout, rows, parts);
}

/** The row of an add without options (its data and id left empty), made once per queue defaults. */
export function plainRow(ctx: QueueContext): RoutedRow {
  let plain = plainRows.get(ctx.options.defaults);
  if (plain === undefined) {
    plain = Object.freeze(rowOf(resolveAddOptions(undefined, ctx.options.defaults), '', '', ''));
    plainRows.set(ctx.options.defaults, plain);
  }
  return plain;
}

export function toRow(
  ctx: QueueContext,
  data: unknown,
  opts: JobOptions | undefined,
  what: string,
  batch = '',
  /** The add span's trace field (src/telemetry/trace-field.ts; '' = none). */
  trace = '',
): RoutedRow {
  if (opts === undefined && batch === '' && trace === '') {
    // An add without options: the same row each time but for its data (the interactive path's usual
    // call, where resolving and encoding the defaults again showed in profiles).
    const row = Object.assign({}, plainRow(ctx));
    row.data = toJson(what, data, ctx.options.maxPayloadBytes);
    return row;
  }
  // Options are checked before the data, so a call wrong in both is refused for its options.
  const o = resolveAddOptions(opts, ctx.options.defaults);
  return rowOf(o, batch, trace, toJson(what, data, ctx.options.maxPayloadBytes));
}

/** The row of an add without options, per queue defaults (resolved options are frozen). */
const plainRows = new WeakMap<ResolvedJobOptions, RoutedRow>();

export function rowOf(o: ResolvedAdd, batch: string, trace: string, data: string): RoutedRow {
  return {
    id: o.id,
    priority: o.priority,
    delayMs: o.delayMs,
    runAt: o.runAt,
    // The record names its dedupe key: the job frees it when it ends, or (a key with a ttl) when it is
    // removed, drained or cancelled before it started (includes/release_dedupe.lua).
    optionTail: encodeOptionTail(o, {
      group: o.group,
      dedupe: o.dedupeKey,
      name: o.name,
      expireAt: o.expireAt,
      keep: o.keep,
      batch,
      trace,
      lifo: o.lifo,
    }),
    data,
    dependsOn: o.dependsOn,
    crossDependsOn: o.crossDependsOn,
    xDependsOn: '',
    waiter: '',
    depMode: o.depMode,
    group: o.group,
    dedupeKey: o.dedupeKey,
    dedupeMode: o.dedupeMode,
    dedupeTtlMs: o.dedupeTtlMs,
    ttlMs: o.ttlMs,
    partitionKey: o.partitionKey,
  };
}

/** The partition a new job goes to; a job's parents must share one partition. */
export function route(layout: Layout, row: RoutedRow): number {
  const parents = row.dependsOn === '' ? [] : String(row.dependsOn).split('\n');
  // A group lives in one partition (its limits and rotation are per partition), and so does a dedupe
  // key (its check is atomic only there).
  const key = row.partitionKey !== '' ? row.partitionKey : String(row.group || row.dedupeKey);
  const p = layout.route(String(row.id), key, parents);
  if (row.partitionKey === '' && parents.some((parent) => layout.home(parent) !== p)) {
    throw new CrossPartitionError(
      `job ${row.id === '' ? '(new)' : JSON.stringify(row.id)} depends on jobs in different partitions (${parents
        .map((x) => `${x}: ${layout.home(x)}`)
        .join(', ')}); give the parents and the child one partitionKey (or one group)`,
    );
  }
  return p;
}

/**
 * add.lua's outbox arguments of the call on partition p, whose rows are `indexes` of the caller's
 * (the relay's marks, src/queue/stored-adder.ts); NO_OUTBOX for every other add.
 */
export type OutboxArgs = (
  p: number,
  indexes: readonly number[],
) => Record<'outboxMarks' | 'outboxForget', string>;
const NO_OUTBOX: OutboxArgs = () => ({ outboxMarks: '', outboxForget: '' });

/** Sends routed rows (`parts[i]` is row i's partition): one atomic script call per partition. */
export async function runAdd(
  ctx: QueueContext,
  layout: Layout,
  rows: AddRow[],
  parts: number[],
  outbox: OutboxArgs = NO_OUTBOX,
): Promise<AddedJob[]> {
  // Group by partition (one atomic call per partition), keeping each job's place in the answer.
  const groups = new Map<number, number[]>();
  parts.forEach((p, i) => {
    const g = groups.get(p);
    if (g) g.push(i);
    else groups.set(p, [i]);
  });
  if (groups.size > 1) {
    // Check every partition (layout, parents) before writing to any, so that a refusal writes
    // nothing anywhere. Only the rows the check reads go, without their data.
    await Promise.all(
      [...groups].map(([p, indexes]) => {
        const checked = indexes
          .map((i) => rows[i]!)
          .filter((r) => r.id !== '' || r.dependsOn !== '' || r.xDependsOn !== '')
          .map((r) => ({ ...r, data: '' }));
        return addScript(ctx, layout, p, checked, true);
      }),
    );
  }
  const out: AddedJob[] = new Array(rows.length);
  await Promise.all(
    [...groups].map(async ([p, indexes]) => {
      const added = await addScript(
        ctx,
        layout,
        p,
        indexes.map((i) => rows[i]!),
        false,
        NO_BATCH,
        outbox(p, indexes),
      );
      indexes.forEach((rowIndex, j) => {
        out[rowIndex] = added[j]!;
      });
      await waitReplicas(ctx, layout.parts[p]!);
      const crossRows = indexes.map((i) => rows[i]!);
      if (crossRows.some((r) => r.xDependsOn !== '')) {
        // After the add (and its replicas): the links in the parents' queues (src/queue/cross-queue.ts).
        const childKeys = indexes.map(() => layout.parts[p]!);
        await linkCrossParents(ctx.client, crossRows, childKeys, added, ctx.options.eventsMaxLen);
      }
    }),
  );
  return out;
}

/** An add.lua call of no job that deletes outbox marks on partition p (src/queue/stored-adder.ts). */
export async function forgetMarks(
  ctx: QueueContext,
  layout: Layout,
  p: number,
  marks: string,
): Promise<void> {
  await addScript(ctx, layout, p, [], false, NO_BATCH, { outboxMarks: '', outboxForget: marks });
}

/** A batch's rows and its record, in one add.lua call on partition p (queue.addBatch). */
export async function addBatchRows(
  ctx: QueueContext,
  layout: Layout,
  p: number,
  rows: AddRow[],
  batch: BatchArgs,
): Promise<AddedJob[]> {
  const added = await addScript(ctx, layout, p, rows, false, batch);
  await waitReplicas(ctx, layout.parts[p]!);
  return added;
}

/**
 * A job add-one.lua can add: no parents, group, dedupe key or priority (those need add.lua's
 * checks and structures). A lifo job is plain: add-one.lua reads it from the option tail.
 */
function isPlain(row: AddRow): boolean {
  return (
    row.dependsOn === '' &&
    row.xDependsOn === '' &&
    row.waiter === '' &&
    row.group === '' &&
    row.dedupeKey === '' &&
    Number(row.priority) === 0
  );
}

/** The arguments add.lua and add-one.lua share: the partition's channel, the layout, the events cap. */
function partitionArgs(ctx: QueueContext, layout: Layout, p: number) {
  return {
    now: '',
    wakeChannel: layout.parts[p]!.wakeChannel,
    eventsMaxLen: ctx.options.eventsMaxLen,
    partitions: layout.count,
    idSuffix: layout.idSuffix(p),
  };
}

/** How a refused add is named (its typed error): the queue and its partition count. */
function addContext(ctx: QueueContext, layout: Layout) {
  return { operation: 'add', queue: ctx.name, partitions: layout.count };
}

/** add-one.lua on partition p (the interactive path: one plain job, see isPlain). */
function addOneScript(ctx: QueueContext, layout: Layout, p: number, row: AddRow): Promise<AddedRow[]> {
  const part = layout.parts[p]!;
  // Object.assign, not a spread: `{ ...partitionArgs(), id, ... }` cost ~12 us per add here (profiled).
  const args = Object.assign(partitionArgs(ctx, layout, p), {
    id: row.id,
    delayMs: row.delayMs,
    runAt: row.runAt,
    optionTail: row.optionTail,
    data: row.data,
    ttlMs: row.ttlMs,
    leaseMs: DEFAULT_LEASE_MS,
  });
  return callScript(ctx.client, scripts.addOne, part, args, [], addContext(ctx, layout));
}

/** add.lua on partition p; a refusal (unknown parent, stale layout) is thrown as its typed error. */
function addScript(
  ctx: QueueContext,
  layout: Layout,
  p: number,
  rows: AddRow[],
  checkOnly = false,
  batch: BatchArgs = NO_BATCH,
  outbox = NO_OUTBOX(p, []),
): Promise<AddedRow[]> {
  const args = { ...partitionArgs(ctx, layout, p), checkOnly: checkOnly ? '1' : '', ...batch, ...outbox };
  return callScript(ctx.client, scripts.add, layout.parts[p]!, args, rows, addContext(ctx, layout));
}

/**
 * With `durability.waitReplicas`, blocks until that many replicas have every write sent so far on the
 * connection to this partition's master (Redis WAIT). On a Cluster, WAIT rides in a pipeline with a
 * read of the partition's keys, so it reaches the master that ran the add.
 */
async function waitReplicas(ctx: QueueContext, k: QueueKeys): Promise<void> {
  const { waitReplicas, timeoutMs } = ctx.options.durability;
  if (waitReplicas === 0) return;
  const client = ctx.client;
  // untilClosed: a pipeline whose replies are all lost with the connection would never settle; one
  // cut halfway reports an untyped AbortError for WAIT. Both become a ConnectionError.
  const replies = await untilClosed(
    client,
    client.pipeline().exists(k.jobs).wait(waitReplicas, timeoutMs).exec(),
  );
  const [err, acked] = replies?.[1] ?? [new Error('no reply to WAIT'), 0];
  if (err) throw asConnectionError(err);
  if (Number(acked) < waitReplicas) {
    throw new DurabilityError(
      `only ${acked} of ${waitReplicas} replica(s) confirmed the add within ${timeoutMs} ms; the job is on the master but may be lost if it fails now`,
      Number(acked),
      waitReplicas,
    );
  }
}
