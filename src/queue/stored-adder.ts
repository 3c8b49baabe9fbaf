/**
 * The add side of a Queue alone, for jobs that were checked and serialised when they were stored: the
 * Postgres outbox's relay (src/postgres/relay.ts) adds its rows with it. The name and options are
 * checked as a Queue checks them, the layout is found once (opener.ts), and addStoredJobs
 * (enqueue.ts) takes each job's data as the JSON text it was stored as instead of parsing it and
 * serialising it again. Not exported from the package: a caller's jobs go through Queue.add.
 */
import { type QueueOptions, type ResolvedQueueOptions, resolveQueueOptions } from '../options/queue.js';
import type { Connection } from '../redis/connection.js';
import type { AddedJob } from '../types.js';
import { checkQueueAddress, checkQueueName } from '../validate.js';
import type { QueueContext } from './context.js';
import { addStoredJobs, type StoredJob } from './enqueue.js';
import { LayoutOpener } from './opener.js';

export class StoredJobAdder {
  readonly name: string;
  readonly options: ResolvedQueueOptions;
  private readonly ctx: QueueContext;

  /** Throws the ValidationError a Queue of that name and options would throw. */
  constructor(name: string, opts: QueueOptions, conn: Connection) {
    this.name = checkQueueName(name);
    this.options = resolveQueueOptions(opts);
    checkQueueAddress(this.options.prefix, name);
    const opener = new LayoutOpener(this.name, this.options, conn);
    this.ctx = { name: this.name, options: this.options, client: conn.client, open: () => opener.open() };
  }

  /** As queue.addBulk: in order, at most MAX_BULK, a refused call writes nothing. */
  add(items: readonly StoredJob[]): Promise<AddedJob[]> {
    return addStoredJobs(this.ctx, items);
  }
}
