/**
 * Renews the leases of every job this worker holds (running, or finished with the outcome not yet
 * written) in one extend call, every third of the shortest lease held. A job whose lease turns out to
 * be lost is dropped from the held set and reported: it may already be running elsewhere.
 */
import type { Clock } from '../clock.js';
import { DEFAULT_LEASE_MS } from '../defaults.js';
import { Interval } from './interval.js';

export interface HeldJob {
  token: string;
  leaseMs: number;
  /**
   * The worker's clock time until which the lease surely stands: leaseMs after a time no later than
   * its last grant (the claim, or the renewal, was sent before Redis granted it).
   */
  until: number;
}

export interface LeaseRenewerDeps {
  /** Node's timers, or a test clock's: a renewal then comes when virtual time passes, never in real time. */
  timers: Clock;
  held: Map<string, HeldJob>;
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
    let shortest = DEFAULT_LEASE_MS;
    for (const h of this.deps.held.values()) if (h.leaseMs < shortest) shortest = h.leaseMs;
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
    if (this.deps.held.size === 0) return;
    const rows: { id: string; token: string }[] = [];
    const asked = new Map<string, string>();
    for (const [id, h] of this.deps.held) {
      rows.push({ id, token: h.token });
      asked.set(id, h.token);
    }
    const sentAt = this.deps.timers.now();
    const lost = await this.deps.extend(rows);
    const gone = new Set(lost);
    for (const [id, token] of asked) {
      const h = this.deps.held.get(id);
      if (h?.token === token && !gone.has(id)) h.until = sentAt + h.leaseMs;
    }
    if (lost.length > 0) {
      // Only drop entries still on the token we asked about (a re-claim may have replaced one). A map,
      // not a search of rows: a worker at maximum concurrency may lose thousands of leases at once.
      const gone = lost.filter((id) => asked.get(id) === this.deps.held.get(id)?.token);
      for (const id of gone) this.deps.held.delete(id);
      if (gone.length > 0) this.deps.onLost(gone);
    }
  }

  stop(): void {
    this.interval.stop();
  }
}
