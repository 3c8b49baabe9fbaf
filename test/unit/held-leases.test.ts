import { describe, expect, it } from 'vitest';
import { HeldLeases } from '../../src/worker/held-leases.js';

describe('held leases', () => {
  it('a renewal extends the leases it asked about and drops only the lost ones still under the token asked', () => {
    const leases = new HeldLeases();
    leases.hold('a', { token: '1.1', leaseMs: 1_000, until: 0 });
    leases.hold('b', { token: '2.1', leaseMs: 3_000, until: 0 });
    leases.hold('c', { token: '3.1', leaseMs: 1_000, until: 0 });
    const renewal = leases.toRenew();
    expect(renewal.rows).toEqual([
      { id: 'a', token: '1.1' },
      { id: 'b', token: '2.1' },
      { id: 'c', token: '3.1' },
    ]);
    // While the call was out, c was claimed again under a new token.
    leases.hold('c', { token: '4.2', leaseMs: 1_000, until: 0 });
    const dropped = leases.renewed(renewal, 500, ['b', 'c']);
    expect(dropped).toEqual(['b']);
    expect(leases.holds('b', '2.1')).toBe(false);
    expect(leases.holds('c', '4.2')).toBe(true);
    expect(leases.leaseLeft('a', '1.1', 600)).toBe(900); // 500 + 1 000 - 600
    expect(leases.leaseLeft('c', '4.2', 600)).toBe(-600); // the new lease was not renewed
    expect(leases.leaseLeft('a', '9.9', 600)).toBe(Number.NEGATIVE_INFINITY);
  });

  it('forgets a lease only under its own token, and holds once for an outcome', () => {
    const leases = new HeldLeases();
    leases.hold('a', { token: '1.1', leaseMs: 1_000, until: 10 });
    expect(leases.forget('a', '0.1')).toBe(false);
    leases.holdIfAbsent('a', { token: '5.5', leaseMs: 9, until: 0 });
    expect(leases.holds('a', '1.1')).toBe(true);
    expect(leases.shortestLeaseMs(30_000)).toBe(1_000);
    expect(leases.forget('a', '1.1')).toBe(true);
    expect(leases.size).toBe(0);
    expect(leases.shortestLeaseMs(30_000)).toBe(30_000);
  });
});
