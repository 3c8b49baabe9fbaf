/**
 * The worker's turn: once per event-loop turn in which a slot freed, every lane writes its buffered
 * outcomes (the start marks riding on the completions), sends the marks left, and claims for the freed
 * slots, back to back, so a busy worker spends one round trip per batch. Lanes take turns at claiming
 * first, so freed slots are shared among busy partitions (slot-share.ts reads whose turn it is).
 */

/** What a turn asks of each lane. */
export interface TurnLane {
  flushOutcomes(): void;
  flushStarts(): void;
  pumpClaims(): void;
}

export class Turns {
  /** Lane the next turn pumps first. */
  private nextLane = 0;
  private turnScheduled = false;
  private startsScheduled = false;

  constructor(private readonly lanes: () => readonly TurnLane[]) {}

  /** Index of the lane the latest turn pumped first. */
  get turnFirst(): number {
    const n = this.lanes().length;
    return n === 0 ? 0 : (this.nextLane + n - 1) % n;
  }

  /** A slot freed or a claim came back short: a turn runs at the end of this one. */
  schedule(): void {
    if (this.turnScheduled) return;
    this.turnScheduled = true;
    setImmediate(() => {
      this.turnScheduled = false;
      const lanes = this.lanes();
      const n = lanes.length;
      if (n === 0) return;
      for (const lane of lanes) lane.flushOutcomes();
      for (const lane of lanes) lane.flushStarts();
      const first = this.nextLane;
      this.nextLane = (first + 1) % n;
      for (let i = 0; i < n; i++) lanes[(first + i) % n]!.pumpClaims();
    });
  }

  /**
   * A processor started outside a turn (a claim's jobs, a handoff): its start mark goes at the end of
   * this event-loop turn; when a turn is due as well, the turn sends it (after the completions it may
   * ride on).
   */
  scheduleStarts(): void {
    if (this.startsScheduled) return;
    this.startsScheduled = true;
    setImmediate(() => {
      this.startsScheduled = false;
      if (this.turnScheduled) return;
      for (const lane of this.lanes()) lane.flushStarts();
    });
  }
}
