/**
 * When the chaos drain stops waiting (chaos/drain.ts): a line that still moves is waited for past the
 * minimum, a stall is not, and the cap holds whatever moves.
 */
import { describe, expect, it } from 'vitest';
import { DrainDeadline } from '../../chaos/drain.js';

const LIMITS = { minMs: 30_000, capMs: 90_000, stallMs: 15_000 };

describe('the chaos drain deadline', () => {
  it('waits the minimum when nothing moves, and when the queue drains early', () => {
    const d = new DrainDeadline(1_000, LIMITS);
    expect(d.until).toBe(31_000);
    d.seen(500, 1_200);
    d.seen(500, 20_000); // the same total again: no progress
    expect(d.until).toBe(31_000);
    expect(d.extendedMs(31_000)).toBe(0);
  });

  it('goes on past the minimum while the unfinished total reaches new lows, stallMs after the last', () => {
    const d = new DrainDeadline(0, LIMITS);
    d.seen(40, 1_000);
    d.seen(12, 28_000);
    expect(d.until).toBe(43_000);
    d.seen(11, 40_000);
    expect(d.until).toBe(55_000);
    // A rise (a parent adding children) and a fall back to the same low is no progress.
    d.seen(14, 45_000);
    d.seen(11, 50_000);
    expect(d.until).toBe(55_000);
    expect(d.extendedMs(55_000)).toBe(25_000);
  });

  it('a count that failed says nothing', () => {
    const d = new DrainDeadline(0, LIMITS);
    d.seen(3, 29_000);
    d.seen(null, 35_000);
    expect(d.until).toBe(44_000);
  });

  it('stops at the cap however the line moves', () => {
    const d = new DrainDeadline(0, LIMITS);
    for (let t = 0, left = 10_000; t <= 100_000; t += 1_000, left--) d.seen(left, t);
    expect(d.until).toBe(90_000);
  });
});
