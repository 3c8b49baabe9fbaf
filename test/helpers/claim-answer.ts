/** A claim.lua answer as decodeClaim returns it, for fetcher tests that answer claims by hand. */
import type { ClaimReply } from '../../src/worker/fetcher.js';

export function claimAnswer(o: Partial<ClaimReply> = {}): ClaimReply {
  return {
    now: 0,
    nextDue: null,
    paused: false,
    registered: 0,
    replayed: [],
    limitedMs: 0,
    jobs: [],
    ...o,
  };
}
