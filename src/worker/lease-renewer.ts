/**
 * Renews the leases of every job this worker holds (running, or finished with the outcome not yet
 * written) in one extend call, every third of the shortest lease held. A job whose lease turns out to
 * be lost is dropped from the held leases and reported: it may already be running elsewhere.
 */
import type { Clock } from '../clock.js';
import { DEFAULT_LEASE_MS } from '../defaults.js';
import type { HeldLeases } from './held-leases.js';
import { Interval } from './interval.js';

export interface LeaseRenewerDeps {
  /** Node's timers, or a test clock's: a renewal then comes when virtual time passes, never in real time. */
  timers: Clock;
  /** The lane's held leases: asked what to renew, told what the renewal answered. */
  leases: HeldLeases;
  extend(rows: { id: string; token: string }[]): Promise<string[]>;
  onLost(ids: string[]): void;
  onError(err: unknown): void;
}

export class LeaseRenewer {
  private readonly interval: Interval;
  private nextRunAt = 0;

  constructor(private readonly deps: LeaseRenewerDeps) {
    this.interval = new Interval(
      () => this.renew(),
      () => this.period(),
      deps.onError,
      deps.timers,
    );
  }

  private period(): number {
    const shortest = this.deps.leases.shortestLeaseMs(DEFAULT_LEASE_MS);
    const ms = Math.max(10, Math.floor(shortest / 3));
    this.nextRunAt = this.deps.timers.now() + ms;
    return ms;
  }

  start(): void {
    this.interval.start();
  }

  /** A job was just claimed with this lease: make sure the next renewal comes early enough for it. */
  noteLease(leaseMs: number): void {
    const ms = Math.max(10, Math.floor(leaseMs / 3));
    if (this.deps.timers.now() + ms < this.nextRunAt) {
      this.nextRunAt = this.deps.timers.now() + ms;
      this.interval.runWithin(ms);
    }
  }

  private async renew(): Promise<void> {
    if (this.deps.leases.size === 0) return;
    const renewal = this.deps.leases.toRenew();
    const sentAt = this.deps.timers.now();
    const lost = await this.deps.extend(renewal.rows);
    const dropped = this.deps.leases.renewed(renewal, sentAt, lost);
    if (dropped.length > 0) this.deps.onLost(dropped);
  }

  stop(): void {
    this.interval.stop();
  }
}
