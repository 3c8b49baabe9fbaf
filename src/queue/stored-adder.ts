/**
 * The add side of a Queue alone, for jobs that were checked and serialised when they were stored: the
 * Postgres outbox's relay (src/postgres/relay.ts) adds its rows with it. The name and options are
 * checked as a Queue checks them, the layout is found once (opener.ts), and each job's data is taken
 * as the JSON text it was stored as instead of being parsed and serialised again. Not exported from
 * the package: a caller's jobs go through Queue.add.
 *
 * Outbox marks: each job is added with its mark (`<outbox row id>:<job id>`, add.lua's `outboxed`),
 * written with the job, so a row added again after its relay died before committing (the add
 * happened, the delete did not) is not created again even when its job has since run and been
 * deleted. The relay says when a row's delete committed (forget); the mark goes with the next call to
 * that partition, or at flush().
 */
import { MAX_BULK } from '../defaults.js';
import { ValidationError } from '../errors.js';
import { checkOwnJobId, resolveAddOptions } from '../options/job.js';
import { type QueueOptions, type ResolvedQueueOptions, resolveQueueOptions } from '../options/queue.js';
import type { Connection } from '../redis/connection.js';
import type { AddedJob, JobOptions } from '../types.js';
import { checkQueueAddress, checkQueueName, storedJson } from '../validate.js';
import type { QueueContext } from './context.js';
import { readCrossParents } from './cross-queue.js';
import { forgetMarks, plainRow, type RoutedRow, route, rowOf, runAdd } from './enqueue.js';
import { LayoutOpener } from './opener.js';

/**
 * A job stored checked and serialised (by the Postgres outbox's add, src/postgres/outbox-job.ts), as
 * its relay reads it back: the id, the data as that JSON text, the options as stored (undefined when
 * they held nothing but the id), and the outbox row it came from.
 */
export interface StoredJob {
  id: string;
  data: string;
  opts: JobOptions | undefined;
  /** The outbox row's id (digits): with the job's id, its mark. */
  row: string;
}

/** What became of a stored job: as queue.addBulk answers, and the partition it went to. */
export interface StoredAdd extends AddedJob {
  partition: number;
}

/** A row whose delete committed: its mark can go. */
export interface Forget {
  job: StoredJob;
  partition: number;
}

export class StoredJobAdder {
  readonly name: string;
  readonly options: ResolvedQueueOptions;
  private readonly ctx: QueueContext;
  /** Per partition, the marks to delete with its next call. */
  private readonly forgetting = new Map<number, string[]>();

  /** Throws the ValidationError a Queue of that name and options would throw. */
  constructor(name: string, opts: QueueOptions, conn: Connection) {
    this.name = checkQueueName(name);
    this.options = resolveQueueOptions(opts);
    checkQueueAddress(this.options.prefix, name);
    const opener = new LayoutOpener(this.name, this.options, conn);
    this.ctx = { name: this.name, options: this.options, client: conn.client, open: () => opener.open() };
  }

  /**
   * As queue.addBulk (in order, at most MAX_BULK, a refused call writes nothing), with the same checks
   * and errors (item i's options, then its data); a job whose options are only its id takes the
   * queue's resolved defaults as an add without options does.
   */
  async add(items: readonly StoredJob[]): Promise<StoredAdd[]> {
    const ctx = this.ctx;
    if (items.length > MAX_BULK) {
      throw new ValidationError(`addBulk takes at most ${MAX_BULK} jobs per call, got ${items.length}`);
    }
    const count = { 'messaging.batch.message_count': items.length };
    return ctx.options.tracing.produce(ctx.name, 'add', count, async (trace) => {
      const rows = items.map((item, i) => storedRow(ctx, item, `item ${i} data`, trace));
      const layout = await ctx.open();
      await readCrossParents(ctx, rows);
      const parts = rows.map((row) => route(layout, row));
      const taken = new Map<number, string[]>();
      let added: AddedJob[];
      try {
        added = await runAdd(ctx, layout, rows, parts, (p, indexes) => ({
          outboxMarks: indexes.map((i) => mark(items[i]!)).join('\n'),
          outboxForget: this.take(p, taken),
        }));
      } catch (err) {
        // The call may not have run: its marks to forget go with the next one (forgetting twice is
        // harmless), not left to expire.
        for (const [p, list] of taken) this.keep(p, list);
        throw err;
      }
      return added.map((a, i) => ({ ...a, partition: parts[i]! }));
    });
  }

  /** Rows whose delete committed: their marks go with the next call to their partition. */
  forget(rows: readonly Forget[]): void {
    for (const { job, partition } of rows) {
      const list = this.forgetting.get(partition);
      if (list) list.push(mark(job));
      else this.forgetting.set(partition, [mark(job)]);
    }
  }

  /** Deletes the marks still to forget now (the relay closing), one call per partition. */
  async flush(): Promise<void> {
    if (this.forgetting.size === 0) return;
    const layout = await this.ctx.open();
    // The relay is closing: marks a failed call leaves are left to expire.
    const taken = new Map<number, string[]>();
    await Promise.all(
      [...this.forgetting.keys()].map((p) => forgetMarks(this.ctx, layout, p, this.take(p, taken))),
    );
  }

  /** Marks taken for a call that failed: they go with the next call to partition p. */
  private keep(p: number, marks: readonly string[]): void {
    const list = this.forgetting.get(p);
    this.forgetting.set(p, list ? list.concat(marks) : [...marks]);
  }

  /** Partition p's marks to forget, as one argument; `taken` records them, to keep them if the call fails. */
  private take(p: number, taken: Map<number, string[]>): string {
    const list = this.forgetting.get(p);
    if (!list) return '';
    this.forgetting.delete(p);
    taken.set(p, list);
    return list.join('\n');
  }
}

function mark(job: StoredJob): string {
  return `${job.row}:${job.id}`;
}

function storedRow(ctx: QueueContext, item: StoredJob, what: string, trace: string): RoutedRow {
  const max = ctx.options.maxPayloadBytes;
  if (item.opts === undefined && trace === '') {
    const row = Object.assign({}, plainRow(ctx));
    row.id = checkOwnJobId(item.id);
    row.data = storedJson(what, item.data, max);
    return row;
  }
  // Not `??`: stored options may be JSON null (a row written by hand), refused as add refuses it.
  const o = resolveAddOptions(item.opts === undefined ? { id: item.id } : item.opts, ctx.options.defaults);
  return rowOf(o, '', trace, storedJson(what, item.data, max));
}
