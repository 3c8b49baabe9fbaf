/**
 * Pieces of the chaos harness's verdict that decide whether an invariant applies (chaos/verdict.ts).
 * A wrong answer there is a false alarm in CI (random seeds) or a check that can never fire.
 */
import { describe, expect, it } from 'vitest';
import { reachableMs } from '../chaos/verdict.js';

describe('chaos verdict: time an oom fault leaves the workers able to reach Redis', () => {
  it('subtracts faults that cut every worker off, overlapping or not, clipped to the window', () => {
    expect(reachableMs(1_000, 5_000, [])).toBe(4_000);
    // An all-worker reset from before the oom until 0.3 s before its end (the seed 323567 case).
    expect(reachableMs(7_300, 9_700, [{ at: 5_800, until: 9_400 }])).toBe(300);
    // Two overlapping cut-offs count once; one outside the window not at all.
    expect(
      reachableMs(0, 10_000, [
        { at: 2_000, until: 4_000 },
        { at: 3_000, until: 5_000 },
        { at: 12_000, until: 13_000 },
      ]),
    ).toBe(7_000);
    expect(reachableMs(0, 1_000, [{ at: -5, until: 2_000 }])).toBe(0);
  });
});
