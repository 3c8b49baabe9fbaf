/**
 * The leases one lane holds: running jobs, buffered ones, and finished ones whose outcome is not yet
 * written. One owner for the map: the lane holds and forgets leases, the renewer asks which to renew
 * and hands back the answer; neither reaches into the other's state.
 */

export interface HeldLease {
  token: string;
  leaseMs: number;
  /**
   * The worker's clock time until which the lease surely stands: leaseMs after a time no later than
   * its last grant (the claim, or the renewal, was sent before Redis granted it).
   */
  until: number;
}

/** One extend call: its rows, and the token each id was asked about. */
export interface Renewal {
  rows: { id: string; token: string }[];
  asked: Map<string, string>;
}

export class HeldLeases {
  private readonly leases = new Map<string, HeldLease>();

  get size(): number {
    return this.leases.size;
  }

  /** Up to `limit` held ids, for diagnostics. */
  ids(limit: number): string[] {
    const out: string[] = [];
    for (const id of this.leases.keys()) {
      if (out.length >= limit) break;
      out.push(id);
    }
    return out;
  }

  hold(id: string, lease: HeldLease): void {
    this.leases.set(id, lease);
  }

  /** Holds a lease unless one is already held for this id. */
  holdIfAbsent(id: string, lease: HeldLease): void {
    if (!this.leases.has(id)) this.leases.set(id, lease);
  }

  holds(id: string, token: string): boolean {
    return this.leases.get(id)?.token === token;
  }

  /** How long the lease of (id, token) surely stands after `now` (-Infinity: not held). */
  leaseLeft(id: string, token: string, now: number): number {
    const h = this.leases.get(id);
    return h?.token === token ? h.until - now : Number.NEGATIVE_INFINITY;
  }

  /** Forgets a lease: the one under `token` only (the job may have been claimed again), or any. */
  forget(id: string, token?: string): boolean {
    if (token !== undefined && this.leases.get(id)?.token !== token) return false;
    return this.leases.delete(id);
  }

  /** The shortest lease held, or `fallback` when none is shorter. */
  shortestLeaseMs(fallback: number): number {
    let shortest = fallback;
    for (const h of this.leases.values()) if (h.leaseMs < shortest) shortest = h.leaseMs;
    return shortest;
  }

  /** Every held lease, as one extend call's rows. */
  toRenew(): Renewal {
    const rows: { id: string; token: string }[] = [];
    const asked = new Map<string, string>();
    for (const [id, h] of this.leases) {
      rows.push({ id, token: h.token });
      asked.set(id, h.token);
    }
    return { rows, asked };
  }

  /**
   * The extend sent at `sentAt` answered that `lost` are gone: every other lease asked about stands
   * until sentAt + leaseMs; the lost ones still under the token asked about are dropped (a re-claim
   * may have replaced one) and returned.
   */
  renewed(renewal: Renewal, sentAt: number, lost: readonly string[]): string[] {
    const gone = new Set(lost);
    for (const [id, token] of renewal.asked) {
      const h = this.leases.get(id);
      if (h?.token === token && !gone.has(id)) h.until = sentAt + h.leaseMs;
    }
    // A map, not a search of rows: a worker at maximum concurrency may lose thousands of leases at once.
    const dropped = lost.filter((id) => renewal.asked.get(id) === this.leases.get(id)?.token);
    for (const id of dropped) this.leases.delete(id);
    return dropped;
  }
}
