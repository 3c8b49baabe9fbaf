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
 *
 * A claim that fails (connection lost after it was sent, so it may have run and leased jobs whose reply
 * is gone) is sent again with the same ticket before any new claim: claim.lua recognises the ticket and
 * returns the jobs that claim leased, still under their leases, instead of claiming again. Each claim in
 * flight has a slot of its own (a field in the queue's `claims` hash), so two lost claims both come back.
 *
 * Handoffs (worker/handoff.ts): a claim that leaves free slots registers the fetcher as idle for up to
 * that many jobs, and plain adds then lease their jobs to it directly, on the fetcher's own channel.
 * The fetcher claims again (so registers anew) once half of the registration is used. Each claim
 * withdraws the registration that may stand; so does stop(), whose reply returns jobs handed off
 * meanwhile whose message has not arrived.
 */
import { randomBytes } from 'node:crypto';
import { type Clock, REAL_TIMERS } from '../clock.js';
import { untilClosed } from '../redis/in-flight.js';
import type { ClaimAnswer, ClaimedJob } from '../scripts/replies.js';
import type { RedisClient } from '../scripts/specs.js';
import { reconnectDelayMs, safeTimeout } from '../timers.js';
import { HandoffState, MAX_HANDOFF_UNITS, parseHandoff, type Registration } from './handoff.js';

/** What claim.lua answers (decoded in replies.ts). */
export type ClaimReply = ClaimAnswer;

/** Names a claim: sent again after a failure, the same ticket returns that claim's jobs if it ran. */
export interface ClaimTicket {
  /** The claim slot's field in the queue's `claims` hash: `<fetcher id>.<slot>`. */
  claimer: string;
  /**
   * Counts this fetcher's claims; a retry carries the nonce of the claim it repeats, prefixed `r` (only
   * a retry makes claim.lua read the recorded claim).
   */
  nonce: string;
}

/** What a claim says about handoffs (claim.lua ARGV fetcher .. received). */
export interface HandoffArgs {
  fetcher: string;
  /** The nonce of a registration that may stand ('' none): the claim withdraws it. */
  withdraw: string;
  /** > 0: register the fetcher for that long if the claim leaves free slots. */
  registerMs: number;
  /** The most jobs a registration made by this claim may be handed. */
  registerUnits: number;
  /** The units of the registration withdrawn. */
  withdrawUnits: number;
  /** Jobs of the registration withdrawn that arrived by message. */
  received: number;
}

/** A claim in flight, or failed and waiting to be sent again. */
interface Claim {
  slot: number;
  nonce: number;
  count: number;
  /** The wake-up count when it was sent (see `wakes`). */
  epoch: number;
  retry: boolean;
  /** The registration this claim withdraws (null: none). */
  withdraw: Registration | null;
}

export interface FetcherDeps {
  subscriber: RedisClient;
  wakeChannel: string;
  /**
   * Handoffs: the channel of `fetcher` (keys.ts handoffChannel); absent, this fetcher takes none (a
   * worker whose own rate limiter must count every start, which only a claim does). A registration
   * lasts two safety polls: an idle fetcher claims, so registers again, at every poll.
   */
  handoffChannel?: (fetcher: string) => string;
  /**
   * The most jobs this fetcher may be handed now (its share of the worker's free slots; 0 while
   * paused, or while a handoff might find no free slot).
   */
  handoffUnits?: () => number;
  pollIntervalMs: number;
  /** Timers for the next due job: Node's, or a test clock's (due times are on that clock). */
  timers?: Clock;
  freeSlots(): number;
  claim(count: number, ticket: ClaimTicket, handoff: HandoffArgs): Promise<ClaimReply>;
  onJobs(jobs: ClaimedJob[]): void;
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
  /** Random, so that claimer fields of two fetchers (workers, lanes) never meet in `claims`. */
  private readonly id = randomBytes(6).toString('hex');
  private readonly handoffs = new HandoffState();
  private readonly handoffChannel: string | undefined;
  /** Per claim slot: the claim using it (in flight, or failed and waiting for its retry). */
  private readonly slots: (Claim | undefined)[] = new Array(MAX_IN_FLIGHT).fill(undefined);
  /** Failed claims, to be sent again with their ticket (by the retry timer) before any new claim. */
  private readonly failed: Claim[] = [];
  /** Retries sent and not answered. */
  private retrying = 0;
  private nonces = 0;
  /** The number of jobs asked for by claims in flight. */
  private requested = 0;
  /**
   * Counts wake-ups. A claim remembers the count when it is sent; if it comes back short but a wake-up
   * arrived since (pub/sub messages and claim replies travel on different connections, so a message
   * about a job the claim did not see can arrive before its reply), the queue is not drained.
   */
  private wakes = 0;
  private listening = false;
  private drained = false;
  /** The last claim answered came back short (the queue had fewer jobs than it asked for). */
  private short = false;
  private stopped = true;
  private failures = 0;
  private dueTimer: unknown;
  /** What the due timer waits on: a test clock for a due job, Node's for a rate-limit window (Redis key expiry). */
  private dueTimers: Clock = REAL_TIMERS;
  private pollTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly onMessage = (channel: string, message: string) => {
    if (channel === this.handoffChannel) return this.onHandoff(message);
    if (channel !== this.deps.wakeChannel) return;
    if (message === 'w' || message === 'd') this.wake();
    else if (message.startsWith('x:')) this.deps.onCancelled(message.slice(2));
  };
  /** The subscriber reconnected: the network is back, so failed claims are retried now, not after the backoff. */
  private readonly onReady = () => {
    if (this.failed.length > 0) {
      clearTimeout(this.retryTimer);
      this.retryFailed();
    }
    this.wake();
  };

  constructor(private readonly deps: FetcherDeps) {
    this.handoffChannel = deps.handoffChannel?.(this.id);
  }

  /** Jobs asked for by claims in flight. */
  get requestedCount(): number {
    return this.requested;
  }

  /** Claims sent so far (retries not counted). */
  get claimsSent(): number {
    return this.nonces;
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
    }
    this.deps.subscriber.off('ready', this.onReady); // stop() removed it, or a failed start added it
    this.deps.subscriber.on('ready', this.onReady);
    const channels = this.handoffChannel
      ? [this.deps.wakeChannel, this.handoffChannel]
      : [this.deps.wakeChannel];
    await untilClosed(this.deps.subscriber, this.deps.subscriber.ssubscribe(...channels));
    this.wake();
  }

  /** Something may be claimable: claim on the next opportunity. */
  wake(): void {
    this.wakes++;
    this.drained = false;
    this.pump();
  }

  /**
   * Claims for the free slots unless the queue is known to be drained or two claims are in flight.
   * Nothing new while a failed claim waits for its retry or the retry is in flight.
   */
  pump(): void {
    if (this.failed.length > 0 || this.retrying > 0) return;
    while (!this.stopped && !this.drained) {
      const slot = this.slots.indexOf(undefined);
      if (slot < 0) return;
      // After a short claim, one claim at a time: two leapfrogging claims (each woken while the other
      // is in flight) would keep the fetcher from ever claiming alone, so from registering.
      if (this.short && this.slots.some((c) => c !== undefined)) return;
      const count = this.deps.freeSlots() - this.requested;
      if (count <= 0) return;
      this.send({ slot, nonce: ++this.nonces, count, epoch: this.wakes, retry: false, withdraw: null });
    }
  }

  private send(claim: Claim): void {
    // Only a claim sent alone may register for a handoff: one registration at a time, so a handoff
    // never brings a job beyond the slots the registering claim saw free.
    const alone = this.slots.every((c) => c === undefined);
    this.slots[claim.slot] = claim;
    this.requested += claim.count;
    if (claim.retry) this.retrying++;
    const nonce = claim.retry ? `r${claim.nonce}` : String(claim.nonce);
    const ticket = { claimer: `${this.id}.${claim.slot}`, nonce };
    // A retry may be answered by its replay, before the withdrawal: the next claim withdraws instead.
    claim.withdraw = claim.retry ? null : this.handoffs.registered;
    this.deps.claim(claim.count, ticket, this.handoffArgs(claim.withdraw, !this.stopped && alone)).then(
      (reply) => this.onReply(reply, claim),
      (err) => this.onFailure(err, claim),
    );
  }

  /** Sends the failed claims again, same tickets; the count is what is free now (0 still replays). */
  private retryFailed(): void {
    this.retryTimer = undefined;
    if (this.stopped) return;
    for (const claim of this.failed.splice(0)) {
      claim.retry = true;
      claim.count = Math.max(0, this.deps.freeSlots() - this.requested);
      this.send(claim);
    }
  }

  /** The claim's handoff arguments; `register` false when the fetcher must not register (stopping). */
  private handoffArgs(withdraw: Registration | null, register = true): HandoffArgs {
    const units =
      register && this.handoffChannel
        ? Math.min(this.deps.handoffUnits?.() ?? 1, this.handoffs.unitsToAsk(withdraw))
        : 0;
    return {
      fetcher: this.handoffChannel ? this.id : '',
      withdraw: withdraw === null ? '' : String(withdraw.nonce),
      registerMs: units > 0 ? this.deps.pollIntervalMs * 2 : 0,
      registerUnits: Math.min(units, MAX_HANDOFF_UNITS),
      withdrawUnits: withdraw?.units ?? 0,
      received: withdraw === null ? 0 : this.handoffs.receivedOf(withdraw.nonce),
    };
  }

  /** A job handed off to this fetcher (add-one.lua): run it, unless its other copy came first. */
  private onHandoff(message: string): void {
    const handoff = parseHandoff(message);
    // Not a message add-one.lua wrote (another client published on the channel): nothing to run.
    if (!handoff || !this.handoffs.deliver(handoff.job, handoff.nonce)) return;
    this.deps.onJobs([handoff.job]);
    // Half of the registration used (or all of it): claim now, for the slots free, so that the fetcher
    // registers again (the queue is most likely empty) before its units run out. Until then the
    // fetcher sends no claim per job.
    // (A claim in flight already withdraws it and registers anew.) With no room for a handoff any more
    // (the worker paused, or its slots taken by other lanes' claims), it only withdraws.
    const r = this.handoffs.registered;
    if (this.slots.some((c) => c !== undefined)) return;
    if (r !== null && this.deps.handoffUnits?.() === 0) void this.withdraw();
    else if (r === null || this.handoffs.unitsLeft * 2 < r.units) this.wake();
  }

  /**
   * Withdraws the registration that may stand, by a claim of nothing that does not register (outside
   * the claim slots: it leases nothing). Jobs handed off with it whose message has not come return in
   * its reply (to a worker that is closing or paused, which hands them back).
   */
  withdraw(): Promise<void> {
    const withdraw = this.handoffs.registered;
    if (withdraw === null) return Promise.resolve();
    this.handoffs.registered = null;
    const ticket = { claimer: '', nonce: '' };
    return this.deps.claim(0, ticket, this.handoffArgs(withdraw, false)).then(
      (reply) => {
        // Never registers: no nonce is read.
        const handed = this.handoffReply(reply, { withdraw, nonce: 0 });
        if (handed.jobs.length > 0) this.deps.onJobs(handed.jobs);
      },
      (err) => this.deps.onError(err),
    );
  }

  /**
   * Settles the handoff side of a claim's reply: which registration stands, and the replayed handoffs,
   * kept (after the claimed jobs) only where their message has not come first.
   */
  private handoffReply(reply: ClaimReply, claim: Pick<Claim, 'withdraw' | 'nonce'>): ClaimReply {
    if (claim.withdraw !== null) this.handoffs.withdrawn(claim.withdraw.nonce);
    if (reply.registered > 0) this.handoffs.register(claim.nonce, reply.registered);
    if (reply.replayed.length === 0) return reply;
    const unseen = reply.replayed.filter((job) => this.handoffs.deliver(job));
    return { ...reply, jobs: [...reply.jobs, ...unseen], replayed: [] };
  }

  private onReply(answer: ClaimReply, claim: Claim): void {
    this.slots[claim.slot] = undefined;
    this.requested -= claim.count;
    if (claim.retry) this.retrying--;
    this.failures = 0;
    const reply = this.handoffReply(answer, claim);
    const got = reply.jobs.length;
    if (got > 0) this.deps.onJobs(reply.jobs);
    // Short: the queue had fewer jobs than asked for. (A claim that returned replayed handoffs claimed
    // up to that many fewer.)
    this.short = answer.jobs.length < claim.count - answer.replayed.length;
    if (this.short && !claim.retry) {
      this.drained = this.wakes === claim.epoch;
      this.armDueTimer(reply);
      this.armPoll();
    } else {
      // A retry's reply may be a replay, which says nothing about the queue: claim again.
      this.drained = false;
    }
    this.pump();
    if (got < claim.count) this.deps.onReleased?.();
  }

  private onFailure(err: unknown, claim: Claim): void {
    this.requested -= claim.count;
    if (claim.retry) this.retrying--;
    if (this.stopped) {
      this.slots[claim.slot] = undefined;
      return;
    }
    // The slot stays taken: its next claim must be this one again, or the record of the lost claim
    // would be overwritten before it was replayed.
    this.failed.push(claim);
    this.deps.onError(err);
    this.deps.onReleased?.();
    this.failures++;
    if (!this.retryTimer) {
      this.retryTimer = safeTimeout(() => this.retryFailed(), reconnectDelayMs(this.failures));
    }
  }

  private armDueTimer(reply: ClaimReply): void {
    this.dueTimers.clearTimeout(this.dueTimer);
    if (reply.paused) return;
    // Rate-limited: sleep until the window reopens (or the next due job, if sooner), not in a busy loop.
    let wait = reply.limitedMs > 0 ? reply.limitedMs : Number.POSITIVE_INFINITY;
    this.dueTimers = REAL_TIMERS;
    if (reply.nextDue !== null && reply.nextDue - reply.now < wait) {
      wait = Math.max(0, reply.nextDue - reply.now);
      this.dueTimers = this.deps.timers ?? REAL_TIMERS;
    }
    if (wait === Number.POSITIVE_INFINITY) return;
    // A job due in a month wakes this timer after ~24.8 days (safeTimeout's clamp); it then re-arms.
    this.dueTimer = this.dueTimers.setTimeout(() => this.wake(), wait);
  }

  private armPoll(): void {
    clearTimeout(this.pollTimer);
    this.pollTimer = safeTimeout(() => this.wake(), this.deps.pollIntervalMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.dueTimers.clearTimeout(this.dueTimer);
    clearTimeout(this.pollTimer);
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    // A failed claim is sent once more, as a replay only (count 0): jobs it leased come back to the
    // worker, which is closing and hands them back, instead of waiting for their lease to expire.
    for (const claim of this.failed.splice(0)) {
      claim.retry = true;
      claim.count = 0;
      this.send(claim);
    }
    // Handoffs: leave the channel. Once Redis has read the unsubscribe, an add finds no one there and
    // leases nothing; a job handed off before that still arrives, as the listener stays until the
    // subscriber closes with the worker (it is handed back, the worker closing). Not awaited: a network
    // that swallows the reply must not hold close(). Then withdraw the registration that may stand; a
    // job a handoff took with it comes back in the reply unless its message came first.
    if (this.handoffChannel) this.deps.subscriber.sunsubscribe(this.handoffChannel).catch(() => {});
    void this.withdraw();
    this.deps.subscriber.off('ready', this.onReady);
    if (this.handoffChannel) return; // still listening for handed-off jobs (above)
    this.deps.subscriber.off('smessage', this.onMessage);
    this.listening = false;
  }
}
