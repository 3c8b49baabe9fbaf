/**
 * The chaos harness's fault plan (chaos/fault-plan.ts): every kind is planned, and each kind's
 * mandatory fault sits early in the phase, so that a fault that overruns (faults play one after
 * another) cannot push a kind's only instance past the phase's end and fail the coverage verdict.
 */
import { describe, expect, it } from 'vitest';
import { FAULT_KINDS, MANDATORY_SPAN, planFaults } from '../../chaos/fault-plan.js';
import { Rng } from '../../chaos/rng.js';

describe('the chaos fault plan', () => {
  it("plans every kind in every seed, each kind at least once in the phase's first part (the CI run's settings)", () => {
    const o = {
      durationMs: 40_000,
      workers: 6,
      leaseMs: 1_000,
      redisKills: 2,
      meanGapMs: 2_200,
      kinds: FAULT_KINDS,
    };
    const first = 2_000;
    const last = o.durationMs - o.leaseMs - 2_500;
    const limit = first + (last - first) * MANDATORY_SPAN;
    for (let seed = 1; seed <= 300; seed++) {
      const plan = planFaults(new Rng(seed), o);
      for (const kind of FAULT_KINDS) {
        const at = plan.filter((f) => f.kind === kind).map((f) => f.atMs);
        expect(at.length, `seed ${seed}: ${kind} planned`).toBeGreaterThan(0);
        if (kind !== 'redisKill') expect(Math.min(...at), `seed ${seed}: ${kind}`).toBeLessThanOrEqual(limit);
      }
    }
  });
});
