/**
 * Handoffs, as a fetcher sees them. A claim that comes back with free slots registers the fetcher as
 * idle for n jobs (claim.lua), and each of the next n plain adds leases its job to it at once and sends
 * it on the fetcher's own channel (add-one.lua): one hop from add to start, instead of a wake-up
 * message and a claim, and no claim per job while the registration lasts.
 *
 * A job can reach the worker twice: by the message, and in the reply of the fetcher's next claim, which
 * withdraws the registration and returns the jobs handed off with it when fewer messages arrived than
 * jobs were handed off (a message may be lost with a dropped connection, or still on its way: pub/sub
 * and replies travel on different connections). The first copy counts; this remembers the leases
 * delivered, by fencing token, to drop the second.
 */
import type { ClaimedJob } from '../scripts/replies.js';

/**
 * The most jobs one registration may be handed (claim.lua's registerUnits): a registration costs
 * Redis one member of the `idle` set per unit (written by the claim, removed by handoffs or by the
 * next claim), and the fetcher claims again when half are used.
 */
export const MAX_HANDOFF_UNITS = 100;

/**
 * Leases delivered, remembered to drop a second copy. A second copy comes at the latest with the reply
 * of a claim sent before the first arrived; at most two claims are in flight, each withdrawing one
 * registration of at most MAX_HANDOFF_UNITS jobs, so older leases can never repeat.
 */
const REMEMBERED = 8 * MAX_HANDOFF_UNITS;

export interface Handoff {
  /** The nonce of the claim that registered the fetcher. */
  nonce: number;
  job: ClaimedJob;
}

/** A registration that may stand: the next claim withdraws it. */
export interface Registration {
  nonce: number;
  /** Jobs it may be handed in all. */
  units: number;
}

/** Parses a handoff message: `<nonce>|<now>|<length of id>|<id><record>`; undefined if malformed. */
export function parseHandoff(message: string): Handoff | undefined {
  const m = /^(\d+)\|\d+\|(\d+)\|/.exec(message);
  if (!m) return undefined;
  const idLength = Number(m[2]);
  const start = m[0].length;
  if (message.length < start + idLength) return undefined;
  return {
    nonce: Number(m[1]),
    job: { id: message.slice(start, start + idLength), record: message.slice(start + idLength) },
  };
}

/** A leased job's identity: its id and fencing token (the record's second field). */
function leaseOf(job: ClaimedJob): string {
  const end = job.record.indexOf('|', 2);
  return `${job.record.slice(2, end < 0 ? undefined : end)}|${job.id}`;
}

export class HandoffState {
  /** The registration that may still stand (the next claim withdraws it), or null. */
  registered: Registration | null = null;
  /** Per registration nonce, the jobs that arrived by message (a message may precede its claim's reply). */
  private readonly received = new Map<number, number>();
  /** Leases delivered, in insertion order (the oldest dropped first). */
  private readonly delivered = new Set<string>();
  /**
   * Units the next registration asks for. A registration's members cost a claim that withdraws them
   * unused as much as they cost to write, so a fetcher asks for 1 at first, doubles while its
   * registrations get used (a producer adding one job after another) and halves while they are
   * withdrawn mostly unused (claims that return few jobs each: groups, limits, a busy queue).
   */
  private wanted = 1;
  /** Registrations withdrawn mostly unused in a row. */
  private unused = 0;

  /** Units to ask for in a claim that withdraws `withdrawing` (null: none stands). */
  unitsToAsk(withdrawing: Registration | null): number {
    if (withdrawing) this.adapt(withdrawing.units, this.receivedOf(withdrawing.nonce));
    return this.wanted;
  }

  private adapt(units: number, used: number): void {
    if (used * 2 >= units) {
      this.wanted = Math.min(units * 2, MAX_HANDOFF_UNITS);
      this.unused = 0;
    } else if (++this.unused >= 2) {
      // Twice in a row: one alone is most often a claim woken by an add that came while the fetcher
      // was registering again, with more adds to follow.
      this.wanted = Math.max(1, units >> 1);
    }
  }

  /** A claim answered that the fetcher stands registered for `units` jobs. */
  register(nonce: number, units: number): void {
    this.registered = { nonce, units };
    this.settle();
  }

  /** Jobs of registration `nonce` that arrived by message so far. */
  receivedOf(nonce: number): number {
    return this.received.get(nonce) ?? 0;
  }

  /** The registration `nonce` was withdrawn: forget it. */
  withdrawn(nonce: number): void {
    if (this.registered?.nonce === nonce) this.registered = null;
    this.received.delete(nonce);
  }

  /**
   * A copy of a handed-off job arrived (by message from registration `nonce`, or in a withdrawing
   * claim's reply when `nonce` is undefined): true if it is the first (keep it), false if not.
   */
  deliver(job: ClaimedJob, nonce?: number): boolean {
    const lease = leaseOf(job);
    if (this.delivered.has(lease)) return false;
    this.delivered.add(lease);
    if (this.delivered.size > REMEMBERED)
      this.delivered.delete(this.delivered.values().next().value as string);
    if (nonce !== undefined) {
      this.received.set(nonce, this.receivedOf(nonce) + 1);
      this.settle();
    }
    return true;
  }

  /** Units of the standing registration not yet used (0: none stands). */
  get unitsLeft(): number {
    const r = this.registered;
    return r ? Math.max(0, r.units - this.receivedOf(r.nonce)) : 0;
  }

  /**
   * A registration whose every unit was used stands no more (nothing is left to withdraw); counts of
   * registrations that can no longer be withdrawn are dropped (a message may still come for the
   * standing one, or for one a claim in flight registered).
   */
  private settle(): void {
    const r = this.registered;
    if (r && this.receivedOf(r.nonce) >= r.units) {
      this.adapt(r.units, r.units);
      this.registered = null;
      this.received.delete(r.nonce);
    }
    if (this.received.size > 8) this.received.delete(this.received.keys().next().value as number);
  }
}
