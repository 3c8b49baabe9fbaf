/**
 * When the chaos drain stops waiting (run.ts waitDrained). It waits at least `minMs` and, while the
 * unfinished total still falls, on past it: a stretch of `stallMs` without a new low is a stall, and
 * `capMs` the limit in any case. A strict FIFO group at concurrency 1 (g1) drains one attempt at a
 * time, slow jobs and hangs included, so a seed that gave g1 a long line can need more than `minMs`
 * without anything being stuck (seed 685064: 42.5 s, every check passing). A job that stopped moving
 * still fails the run, `stallMs` after the last one ended.
 */
export interface DrainLimits {
  minMs: number;
  capMs: number;
  stallMs: number;
}

export class DrainDeadline {
  private lowest = Number.POSITIVE_INFINITY;
  private movedAt: number;

  constructor(
    private readonly start: number,
    private readonly limits: DrainLimits,
  ) {
    this.movedAt = start;
  }

  /** The unfinished total read at `now` (null: a count failed, which says nothing). */
  seen(left: number | null, now: number): void {
    if (left === null || left >= this.lowest) return;
    this.lowest = left;
    this.movedAt = now;
  }

  /** Until when the drain waits, from what it has seen. */
  get until(): number {
    const { minMs, capMs, stallMs } = this.limits;
    return Math.min(this.start + capMs, Math.max(this.start + minMs, this.movedAt + stallMs));
  }

  /** How far past `minMs` the drain went, at `now`. */
  extendedMs(now: number): number {
    return Math.max(0, now - this.start - this.limits.minMs);
  }
}
