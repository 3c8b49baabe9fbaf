/**
 * queue.waitFor: resolves with a job's result once it completes. A job's end is announced on its
 * partition's `done` channel (complete, fail, recover, cancel, remove publish the ids), so a waiter
 * sleeps until then instead of polling; it reads the job once subscribed, so an end that came first is
 * not missed. One subscriber connection per Queue, made at the first waitFor.
 */
import { closeConnection, duplicate } from '../connection.js';
import { JobFailedError, JobNotFoundError, WaitTimeoutError } from '../errors.js';
import type { RedisClient } from '../scripts.js';
import { checkCallOptions, checkJobId, checkTimerMs } from '../validate.js';
import type { QueueContext } from './context.js';
import { DoneListener } from './done-listener.js';
import { readJob } from './reads.js';

export class JobWaiter {
  private subscriber: RedisClient | null = null;
  private listener: DoneListener | null = null;

  constructor(private readonly ctx: QueueContext) {}

  /**
   * Resolves with the job's result once it completes; rejects with JobFailedError (every attempt's
   * error) if it ends dead, WaitTimeoutError after `timeoutMs`, JobNotFoundError if it does not exist.
   */
  async wait(id: string, opts: { timeoutMs?: number }): Promise<unknown> {
    checkJobId(id);
    checkCallOptions('waitFor options', opts, ['timeoutMs']);
    const timeoutMs = checkTimerMs('timeoutMs', opts.timeoutMs ?? 60_000, 1);
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
      const finish = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        unwatch();
        fn();
      };
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
