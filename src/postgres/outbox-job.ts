/**
 * A job as the outbox stores it: checked at outbox.add exactly as queue.add checks it (the queue name,
 * the options through resolveAddOptions, the data through toJson and its size limit), so a job Redis
 * would refuse is refused in the caller's transaction with the same typed ValidationError, and its id
 * fixed there (the caller's, else a UUID), so the relay's add is idempotent.
 */
import { randomUUID } from 'node:crypto';
import { MAX_BULK } from '../defaults.js';
import { ValidationError } from '../errors.js';
import { LIBRARY_JOB_DEFAULTS, resolveAddOptions } from '../options/job.js';
import type { JobOptions } from '../types.js';
import { checkKnownKeys, checkObject, checkQueueName, toJson } from '../validate.js';

/** One outbox row to insert: the job's id, its data and options as JSON text. */
export interface StoredJob {
  id: string;
  data: string;
  opts: string;
}

/**
 * `data` and `opts` checked as queue.add checks them (options first, as there), the id fixed.
 * A Queue's `defaults` only fill options left out, so checking against the library's defaults refuses
 * exactly what any Queue would; the relay's Queues apply their own defaults when they add.
 */
export function storedJob(
  data: unknown,
  opts: JobOptions | undefined,
  what: string,
  maxBytes: number,
): StoredJob {
  const resolved = resolveAddOptions(opts, LIBRARY_JOB_DEFAULTS);
  const json = toJson(what, data, maxBytes);
  const id = resolved.id === '' ? randomUUID() : resolved.id;
  const stored: JobOptions = { ...opts, id };
  // JSON would turn a Date into an ISO string, which add() refuses: store the epoch ms it stands for.
  if (stored.runAt instanceof Date) stored.runAt = stored.runAt.getTime();
  if (stored.expireAt instanceof Date) stored.expireAt = stored.expireAt.getTime();
  return { id, data: json, opts: JSON.stringify(stored) };
}

export function storedJobs(
  queue: unknown,
  items: readonly { data: unknown; opts?: JobOptions }[],
  maxBytes: number,
): StoredJob[] {
  checkQueueName(queue);
  if (!Array.isArray(items)) throw new ValidationError('addBulk expects an array of { data, opts }');
  if (items.length > MAX_BULK) {
    throw new ValidationError(`addBulk takes at most ${MAX_BULK} jobs per call, got ${items.length}`);
  }
  return items.map((item, i) => {
    checkKnownKeys(`item ${i}`, checkObject(`item ${i}`, item), ['data', 'opts']);
    return storedJob(item.data, item.opts, `item ${i} data`, maxBytes);
  });
}
