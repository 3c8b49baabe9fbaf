/**
 * One partition as a worker sees it: the partition's keys and calls, the jobs the worker holds there,
 * and the loops that work per partition (fetch, write outcomes, renew leases). A worker of an
 * unpartitioned queue has one lane; of a partitioned queue, one per partition, all sharing the
 * worker's slots, subscriber connection, heartbeat and recovery loop.
 */
import type { QueueKeys } from '../keys.js';
import type { RedisClient } from '../scripts.js';
import { Acker, type CompleteRow, type FailRow } from './acker.js';
import { Beginner, type BeginOutcome } from './beginner.js';
import { WorkerCalls } from './calls.js';
import { Fetcher } from './fetcher.js';
import type { Job } from './job.js';
import { type HeldJob, LeaseRenewer } from './lease-renewer.js';
import type { ResolvedWorkerOptions } from './options.js';

export interface Running<Data> {
  job: Job<Data>;
  startedAt: number;
  timer?: NodeJS.Timeout;
}

/** What a lane needs from its worker. */
export interface LaneHost {
  subscriber: RedisClient;
  /** Slots this lane may claim now (free slots, the other lanes' claims in flight, and its fair share). */
  claimable(lane: Lane): number;
  /** Of `count` jobs claimed now, how many to start at claim (free slots); the rest are reserved. */
  startable(count: number): number;
  isClosing(): boolean;
  /** The answer of begin.lua for a reserved job that reached a free slot. */
  onBegin(lane: Lane, job: Job<unknown>, outcome: BeginOutcome): void;
  onJobs(lane: Lane, flat: string[]): void;
  onCancelled(lane: Lane, id: string): void;
  onLeaseLost(lane: Lane, ids: string[]): void;
  /** A claim of this lane came back short: slots it had reserved are free for the other lanes. */
  onReleased(): void;
  complete(lane: Lane, rows: CompleteRow[]): Promise<void>;
  fail(lane: Lane, rows: FailRow[]): Promise<void>;
  onError(err: unknown): void;
}

export class Lane {
  readonly calls: WorkerCalls;
  /** Jobs whose lease this worker holds here: running, or finished with the outcome not yet written. */
  readonly held = new Map<string, HeldJob>();
  /** Jobs of this partition whose processor is running, by id. */
  readonly running = new Map<string, Running<unknown>>();
  readonly fetcher: Fetcher;
  readonly acker: Acker;
  readonly renewer: LeaseRenewer;
  readonly beginner: Beginner;
  /** Jobs to be started at claim by this lane's claims in flight (see LaneHost.startable). */
  startsRequested = 0;
  /** Claims sent and not answered yet (close waits for them, so their jobs can be handed back). */
  private readonly claims = new Set<Promise<unknown>>();

  constructor(
    readonly partition: number,
    readonly keys: QueueKeys,
    client: RedisClient,
    options: ResolvedWorkerOptions,
    host: LaneHost,
  ) {
    this.calls = new WorkerCalls(client, keys, options);
    this.fetcher = new Fetcher({
      subscriber: host.subscriber,
      wakeChannel: keys.wakeChannel,
      pollIntervalMs: options.pollIntervalMs,
      freeSlots: () => host.claimable(this) + this.fetcher.requestedCount,
      claim: (count, ticket) => {
        const startNow = host.startable(count);
        this.startsRequested += startNow;
        const call = this.track(this.calls.claim(count, startNow, ticket));
        void call.then(
          () => (this.startsRequested -= startNow),
          () => (this.startsRequested -= startNow),
        );
        return call;
      },
      onJobs: (jobs) => host.onJobs(this, jobs),
      onCancelled: (id) => host.onCancelled(this, id),
      onError: host.onError,
      onReleased: host.onReleased,
    });
    this.acker = new Acker({
      complete: (rows) => host.complete(this, rows),
      fail: (rows) => host.fail(this, rows),
      onError: host.onError,
    });
    this.beginner = new Beginner({
      begin: (rows) => this.calls.begin(rows),
      isHeld: (job) => this.held.get(job.id)?.token === job.token,
      isClosing: () => host.isClosing(),
      onOutcome: (job, outcome) => host.onBegin(this, job, outcome),
      onError: host.onError,
    });
    this.renewer = new LeaseRenewer({
      held: this.held,
      extend: (rows) => this.calls.extend(rows),
      onLost: (ids) => host.onLeaseLost(this, ids),
      onError: host.onError,
    });
  }

  private track<T>(claim: Promise<T>): Promise<T> {
    const settled = claim.then(
      () => {},
      () => {},
    );
    this.claims.add(settled);
    settled.then(() => this.claims.delete(settled));
    return claim;
  }

  /** Resolves once every claim in flight has been answered (or failed). */
  async claimsSettled(): Promise<void> {
    while (this.claims.size > 0) await Promise.all(this.claims);
  }

  /** Forgets a lease once its outcome is written (unless the job was claimed again meanwhile). */
  release(id: string, token: string): void {
    if (this.held.get(id)?.token === token) this.held.delete(id);
  }
}
