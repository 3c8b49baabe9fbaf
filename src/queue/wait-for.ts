/**
 * queue.waitFor: resolves with a job's result once it completes. A job's end is announced on its
 * partition's `done` channel (complete, fail, recover, cancel, remove publish the ids), so a waiter
 * sleeps until then instead of polling; it reads the job once subscribed, so an end that came first is
 * not missed. One subscriber connection per Queue, made at the first waitFor.
 */

import { JobFailedError, JobNotFoundError, ValidationError, WaitTimeoutError } from '../errors.js';
import { closeConnection, duplicate } from '../redis/connection.js';
import type { RedisClient } from '../scripts/specs.js';
import { checkCallOptions, checkJobId, checkTimerMs, show } from '../validate.js';
import type { QueueContext } from './context.js';
import { DoneListener } from './done-listener.js';
import { readJob } from './reads.js';

export interface WaitOptions {
  /** How long to wait, in ms (default 60 000). */
  timeoutMs?: number;
  /** Stops the wait when it aborts: waitFor rejects with the signal's reason. */
  signal?: AbortSignal;
}

export class JobWaiter {
  private subscriber: RedisClient | null = null;
  private listener: DoneListener | null = null;

  constructor(private readonly ctx: QueueContext) {}

  /**
   * Resolves with the job's result once it completes; rejects with JobFailedError (every attempt's
   * error) if it ends dead, WaitTimeoutError after `timeoutMs`, JobNotFoundError if it does not exist;
   * with the `signal`'s reason once it aborts (the wait stops; the job is not touched).
   */
  async wait(id: string, opts: WaitOptions): Promise<unknown> {
    checkJobId(id);
    checkCallOptions('waitFor options', opts, ['timeoutMs', 'signal']);
    const timeoutMs = checkTimerMs('timeoutMs', opts.timeoutMs ?? 60_000, 1);
    const signal = opts.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal))
      throw new ValidationError(`waitFor options.signal must be an AbortSignal, got ${show(signal)}`);
    signal?.throwIfAborted();
    const layout = await this.ctx.open();
    if (!this.listener) {
      this.subscriber = duplicate(this.ctx.client);
      this.listener = new DoneListener(
        this.subscriber,
        layout.parts.map((k) => k.doneChannel),
      );
    }
    const listener = this.listener;
    const read = async () => readJob(this.ctx.client, await this.ctx.open(), id);
    return new Promise<unknown>((resolve, reject) => {
      let settled = false;
      let unwatch: () => void = () => {};
      let timer: NodeJS.Timeout | undefined;
      const aborted = () => finish(() => reject(signal!.reason));
      const finish = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', aborted);
        unwatch();
        fn();
      };
      // An abort frees the wait at once: its timer, and its entry in the done listener.
      signal?.addEventListener('abort', aborted, { once: true });
      if (signal?.aborted) aborted(); // aborted while the queue was opening
      const check = () => {
        // Through open(): after close() a check rejects with ClosedError, as getJob does.
        read().then(
          (job) => {
            if (!job) finish(() => reject(new JobNotFoundError(id)));
            else if (job.state === 'completed') finish(() => resolve(job.result));
            else if (job.state === 'dead') finish(() => reject(new JobFailedError(id, job.errors)));
          },
          (err) => finish(() => reject(err)),
        );
      };
      timer = setTimeout(() => finish(() => reject(new WaitTimeoutError(id, timeoutMs))), timeoutMs);
      listener.watch(id, check).then(
        (u) => {
          unwatch = u;
          if (settled) u();
          else check();
        },
        (err) => finish(() => reject(err)),
      );
    });
  }

  async close(): Promise<void> {
    if (this.subscriber) await closeConnection({ client: this.subscriber, owned: true });
  }
}
