/**
 * The rule that shares a worker's free slots between its lanes (src/worker/slot-share.ts), on plain
 * values: the fair share that keeps a busy partition from starving the others, and the turn that lets
 * short jobs go in whole batches (issue #17: a share per claim tripled the calls per job).
 */
import { describe, expect, it } from 'vitest';
import { claimableSlots, type SharingLane, type SlotState } from '../../src/worker/slot-share.js';

function lanes(...drained: boolean[]): SharingLane[] {
  return drained.map((isDrained) => ({ claimsRequested: 0, isDrained }));
}

function state(ls: SharingLane[], over: Partial<SlotState<SharingLane>> = {}): SlotState<SharingLane> {
  return { lanes: ls, capacity: 50, held: 0, turnFirst: 0, shortJobs: true, ...over };
}

describe('claimableSlots', () => {
  it('one lane may claim every free slot: capacity less what runs, is buffered or is asked for', () => {
    const one = [{ claimsRequested: 5, isDrained: false }];
    expect(claimableSlots(state(one, { held: 20 }), one[0]!)).toBe(25);
    expect(claimableSlots(state(lanes(false), { held: 50 }), lanes(false)[0]!)).toBe(0);
  });

  it('short jobs: the lane whose turn it is takes every free slot, the others at most a share', () => {
    const ls = lanes(false, false, false);
    const s = state(ls, { turnFirst: 1 });
    expect(claimableSlots(s, ls[1]!)).toBe(50);
    expect(claimableSlots(s, ls[0]!)).toBe(17); // ceil(50 / 3 busy lanes)
    expect(claimableSlots(s, ls[2]!)).toBe(17);
  });

  it('a drained lane passes its turn to the next lane that has work', () => {
    const ls = lanes(false, true, false);
    const s = state(ls, { turnFirst: 1 });
    expect(claimableSlots(s, ls[2]!)).toBe(50);
    expect(claimableSlots(s, ls[0]!)).toBe(25); // ceil(50 / 2 busy lanes)
  });

  it('long jobs (or none timed yet): every lane, the one whose turn it is too, gets at most its share', () => {
    const ls = lanes(false, false, false);
    const s = state(ls, { turnFirst: 0, shortJobs: false });
    for (const l of ls) expect(claimableSlots(s, l)).toBe(17);
  });

  it('never more than is free, and claims in flight count against the share and the free slots', () => {
    const ls: SharingLane[] = [
      { claimsRequested: 10, isDrained: false },
      { claimsRequested: 0, isDrained: false },
    ];
    // free = 50 - 30 held - 10 asked for = 10; lane 0's share is 25 - 10 = 15, lane 1's 25
    const s = state(ls, { held: 30, shortJobs: false });
    expect(claimableSlots(s, ls[0]!)).toBe(10);
    expect(claimableSlots(s, ls[1]!)).toBe(10);
    const turn = state(ls, { held: 30, turnFirst: 0 });
    expect(claimableSlots(turn, ls[0]!)).toBe(10);
  });
});
