/**
 * Handoffs, as a fetcher sees them. A claim that comes back with free slots registers the fetcher as
 * idle (claim.lua), and the next plain add leases its job to it at once and sends it on the fetcher's
 * own channel (add-one.lua): one hop from add to start, instead of a wake-up message and a claim.
 *
 * The job can reach the worker twice: by the message, and in the reply of the fetcher's next claim,
 * which withdraws the registration and returns the job a handoff took with it (the message may be lost
 * with a dropped connection, or still on its way: pub/sub and replies travel on different
 * connections). The first copy counts; this remembers which registrations were already delivered.
 */
import type { ClaimedJob } from '../script-replies.js';

/** Registrations delivered, remembered to drop the second copy (a few suffice: see `delivered`). */
const REMEMBERED = 64;

export interface Handoff {
  /** The nonce of the claim that registered the fetcher. */
  nonce: number;
  job: ClaimedJob;
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

export class HandoffState {
  /** The nonce of the claim whose registration may still stand (the next claim withdraws it). */
  registered: number | null = null;
  /** Nonces of registrations whose job arrived (in insertion order, the oldest dropped first). */
  private readonly delivered = new Set<number>();

  /** A copy of registration `nonce`'s job arrived: true if it is the first (keep it), false if not. */
  deliver(nonce: number): boolean {
    if (this.registered === nonce) this.registered = null;
    if (this.delivered.has(nonce)) return false;
    this.delivered.add(nonce);
    // A second copy comes at the latest with the reply of a claim sent before the first arrived, and
    // at most two claims are in flight: the oldest nonces can never repeat.
    if (this.delivered.size > REMEMBERED)
      this.delivered.delete(this.delivered.values().next().value as number);
    return true;
  }
}
