/**
 * claim.lua's arguments for a test that claims by hand: Redis's clock, one job, the default lease, no
 * claim ticket (nothing recorded for a retry), no rate limit, no events and no handoff registration;
 * `o` overrides any of them.
 */
import { DEFAULT_LEASE_MS, SCRIPT_BATCH_LIMIT } from '../../src/defaults.js';
import type { ArgValue } from '../../src/scripts/call.js';
import type { scripts } from '../../src/scripts/specs.js';

export type ClaimArgs = Record<(typeof scripts.claim.args)[number], ArgValue>;

/** The handoff arguments of a claim that neither withdraws nor registers a handoff registration. */
export const NO_HANDOFF = {
  fetcher: '',
  withdraw: '',
  registerMs: 0,
  registerUnits: 0,
  withdrawUnits: 0,
  received: 0,
} as const satisfies Partial<ClaimArgs>;

export function claimArgs(o: Partial<ClaimArgs> = {}): ClaimArgs {
  return {
    now: '',
    count: 1,
    defaultLeaseMs: DEFAULT_LEASE_MS,
    limit: SCRIPT_BATCH_LIMIT,
    rateMax: 0,
    rateWindowMs: 0,
    eventsMaxLen: 0,
    claimer: '',
    nonce: '',
    freeSlots: '',
    ...NO_HANDOFF,
    ...o,
  };
}
