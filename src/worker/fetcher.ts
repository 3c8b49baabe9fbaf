/**
 * The fetch loop: claims jobs for free slots (and the prefetch buffer), with up to two claims in flight
 * so that Redis runs the next claim while the worker processes the current batch. When a claim comes back
 * short, the queue is drained and the loop sleeps until something can have changed:
 * (`x:<id>` messages on the same channel announce cancelled active jobs.)
 *  - a `w` message on the wake channel (a job became claimable: add, retry, recovery, resume),
 *  - a `d` message (an earlier delayed job was added) or the timer set to the next due time that the
 *    claim returned (computed on Redis's clock, so skew cannot start a job early),
 *  - a reconnect of the subscriber (messages may have been missed), or a slow safety poll.
 * No fixed short poll: idle workers cost Redis nothing, and a due job starts within a few ms.
 */
import { untilClosed } from '../in-flight.js';
import type { RedisClient } from '../scripts.js';
import { safeTimeout } from '../timers.js';

export interface ClaimReply {
  now: number;
  nextDue: number | null;
  paused: boolean;
  /** > 0 when the queue's rate limit is reached: its window reopens in that many ms. */
  limitedMs: number;
  /** id, record, id, record... */
  jobs: string[];
}

export interface FetcherDeps {
  subscriber: RedisClient;
  wakeChannel: string;
  pollIntervalMs: number;
  freeSlots(): number;
  claim(count: number): Promise<ClaimReply>;
  onJobs(jobs: string[]): void;
  /** An active job was cancelled (queue.cancel): its worker must abort it. */
  onCancelled(id: string): void;
  onError(err: unknown): void;
  /**
   * A claim came back short (or failed): the slots it had reserved are free again. A worker with
   * several lanes pumps the others, which may have skipped claiming while those slots were reserved.
   */
  onReleased?(): void;
}

const MAX_IN_FLIGHT = 2;

export class Fetcher {
  /** Claims sent and not answered, and the number of jobs they asked for. */
  private inFlight = 0;
  private requested = 0;
  /**
   * Counts wake-ups. A claim remembers the count when it is sent; if it comes back short but a wake-up
   * arrived since (pub/sub messages and claim replies travel on different connections, so a message
   * about a job the claim did not see can arrive before its reply), the queue is not drained.
   */
  private wakes = 0;
  private listening = false;
  private drained = false;
  private stopped = true;
  private failures = 0;
  private dueTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly onMessage = (channel: string, message: string) => {
    if (channel !== this.deps.wakeChannel) return;
    if (message === 'w' || message === 'd') this.wake();
    else if (message.startsWith('x:')) this.deps.onCancelled(message.slice(2));
  };
  private readonly onReady = () => this.wake();

  constructor(private readonly deps: FetcherDeps) {}

  /** Jobs asked for by claims in flight. */
  get requestedCount(): number {
    return this.requested;
  }

  /** True while the last claim came back short and nothing has woken the loop since. */
  get isDrained(): boolean {
    return this.drained;
  }

  /** Subscribes and makes the first claim. Safe to call again after a failure (the worker retries). */
  async start(): Promise<void> {
    this.stopped = false;
    if (!this.listening) {
      this.listening = true;
      this.deps.subscriber.on('smessage', this.onMessage);
      this.deps.subscriber.on('ready', this.onReady);
    }
    await untilClosed(this.deps.subscriber, this.deps.subscriber.ssubscribe(this.deps.wakeChannel));
    this.wake();
  }

  /** Something may be claimable: claim on the next opportunity. */
  wake(): void {
    this.wakes++;
    this.drained = false;
    this.pump();
  }

  /** Claims for the free slots unless the queue is known to be drained or two claims are in flight. */
  pump(): void {
    while (!this.stopped && !this.drained) {
      if (this.inFlight >= MAX_IN_FLIGHT) return;
      const count = this.deps.freeSlots() - this.requested;
      if (count <= 0) return;
      this.inFlight++;
      this.requested += count;
      const epoch = this.wakes;
      this.deps.claim(count).then(
        (reply) => this.onReply(reply, count, epoch),
        (err) => this.onFailure(err, count),
      );
    }
  }

  private onReply(reply: ClaimReply, asked: number, epoch: number): void {
    this.inFlight--;
    this.requested -= asked;
    this.failures = 0;
    const got = reply.jobs.length / 2;
    if (got > 0) this.deps.onJobs(reply.jobs);
    if (got < asked) {
      this.drained = this.wakes === epoch;
      this.armDueTimer(reply);
      this.armPoll();
    } else {
      this.drained = false;
    }
    this.pump();
    if (got < asked) this.deps.onReleased?.();
  }

  private onFailure(err: unknown, asked: number): void {
    this.inFlight--;
    this.requested -= asked;
    if (this.stopped) return;
    this.deps.onError(err);
    this.deps.onReleased?.();
    this.failures++;
    clearTimeout(this.retryTimer);
    this.retryTimer = safeTimeout(() => this.pump(), Math.min(50 * 2 ** this.failures, 2_000));
  }

  private armDueTimer(reply: ClaimReply): void {
    clearTimeout(this.dueTimer);
    if (reply.paused) return;
    // Rate-limited: sleep until the window reopens (or the next due job, if sooner), not in a busy loop.
    let wait = reply.limitedMs > 0 ? reply.limitedMs : Number.POSITIVE_INFINITY;
    if (reply.nextDue !== null) wait = Math.min(wait, Math.max(0, reply.nextDue - reply.now));
    if (wait === Number.POSITIVE_INFINITY) return;
    // A job due in a month wakes this timer after ~24.8 days (safeTimeout's clamp); it then re-arms.
    this.dueTimer = safeTimeout(() => this.wake(), wait);
  }

  private armPoll(): void {
    clearTimeout(this.pollTimer);
    this.pollTimer = safeTimeout(() => this.wake(), this.deps.pollIntervalMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.dueTimer);
    clearTimeout(this.pollTimer);
    clearTimeout(this.retryTimer);
    this.deps.subscriber.off('smessage', this.onMessage);
    this.deps.subscriber.off('ready', this.onReady);
    this.listening = false;
  }
}
