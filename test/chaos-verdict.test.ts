/**
 * The chaos verdict's one allowance for an open defect (docs/guarantees.md): a killed-unrun job counts
 * as "open" only when a worker was killed with kill -9 just after the job's last claim. Anything else
 * killed unrun must still fail the run, so the window must not be wider than it says.
 */
import { describe, expect, it } from 'vitest';
import type { Info } from '../chaos/collect.js';
import type { FaultRecord } from '../chaos/faults.js';
import { killedInClaimWindow } from '../chaos/verdict.js';

const LEASE = 4_000;
/** A job whose lease, claimed at `claimedAt`, expired and was recorded 300 ms after the deadline. */
const jobClaimedAt = (claimedAt: number) =>
  ({ leaseMs: LEASE, errors: [{ at: claimedAt + LEASE + 300, attempt: 1 }] }) as unknown as Info;
const fault = (kind: FaultRecord['kind'], at: number): FaultRecord => ({ kind, at, until: at, detail: '' });

describe('chaos verdict: killed unrun in a claim window', () => {
  it('a kill -9 just after the claim puts the job in the open claim-window count', () => {
    expect(killedInClaimWindow([fault('kill', 10_100)], jobClaimedAt(10_000))).toBe(true);
  });

  it('a kill long after the claim, a kill before it, or another fault kind does not', () => {
    const job = jobClaimedAt(10_000);
    expect(killedInClaimWindow([fault('kill', 12_000)], job)).toBe(false);
    expect(killedInClaimWindow([fault('kill', 5_000)], job)).toBe(false);
    expect(killedInClaimWindow([fault('netReset', 10_100), fault('redisKill', 10_100)], job)).toBe(false);
    expect(killedInClaimWindow([], job)).toBe(false);
  });

  it('a job with no recorded error is never in the window', () => {
    expect(killedInClaimWindow([fault('kill', 0)], { leaseMs: LEASE, errors: [] } as unknown as Info)).toBe(
      false,
    );
  });
});
