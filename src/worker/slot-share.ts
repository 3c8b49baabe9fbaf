/**
 * How a worker's free slots are shared between its lanes (one per partition): the rule each lane asks
 * before it claims (SlotShare), over the runner's counters (how many jobs it runs and buffers) and the
 * lanes' claims in flight, so it reads, and can change, on its own.
 *
 * Every lane may claim at most the free slots. In a partitioned queue a lane may claim at most a fair
 * share of the capacity among the lanes that are not drained, so one busy partition cannot starve the
 * others. Short jobs excepted: when attempts last the prefetch horizon or less on average, the lane
 * whose turn it is (from the latest tick's first lane on, the first that is not drained) may claim
 * every free slot. A batch then holds the slots for a few ms before the next tick's lane takes its
 * turn, so the partitions still share the worker within that horizon, and each claim and complete
 * carries a whole batch: a share per claim split every batch into one small claim and complete per
 * busy partition, and each call has a large fixed cost in Redis (issue #17: 3 partitions cost 3 times
 * the calls per job of one at prefetch 0). Long jobs keep the share: their batches would hold slots long.
 */

/** What the rule reads of a lane. */
export interface SharingLane {
  /** Jobs asked for by the lane's claims in flight. */
  readonly claimsRequested: number;
  /** The lane's last claim came back short and nothing has woken it since. */
  readonly isDrained: boolean;
}

export interface SlotState<L extends SharingLane> {
  lanes: readonly L[];
  /** Slots plus the prefetch limit. */
  capacity: number;
  /** Jobs running or buffered (claimed, not started). */
  held: number;
  /** Index of the lane the latest tick pumped first. */
  turnFirst: number;
  /** Attempts are short (at most the prefetch horizon on average). */
  shortJobs: boolean;
}

/** How many jobs `lane` may claim now. */
export function claimableSlots<L extends SharingLane>(s: SlotState<L>, lane: L): number {
  let requested = 0;
  let busy = 0;
  for (const l of s.lanes) {
    requested += l.claimsRequested;
    if (!l.isDrained) busy++;
  }
  const free = s.capacity - s.held - requested;
  if (s.lanes.length === 1) return free;
  if (s.shortJobs && lane === turnLane(s.lanes, s.turnFirst)) return free;
  const share = Math.ceil(s.capacity / Math.max(1, busy)) - lane.claimsRequested;
  return Math.min(free, share);
}

/** From lane `first` on, the first lane that is not drained. */
function turnLane<L extends SharingLane>(lanes: readonly L[], first: number): L | undefined {
  const n = lanes.length;
  for (let i = 0; i < n; i++) {
    const l = lanes[(first + i) % n]!;
    if (!l.isDrained) return l;
  }
  return undefined;
}

/** What the sharing reads of the runner: its slots and what holds them. */
export interface SlotCounters {
  readonly isPaused: boolean;
  /** Slots plus the prefetch limit. */
  readonly capacity: number;
  /** Jobs running or buffered (claimed, not started). */
  readonly held: number;
  /** Slots neither running nor holding a buffered job. */
  readonly free: number;
  /** Attempts are short (at most the prefetch horizon on average). */
  readonly shortJobs: boolean;
}

/** A lane as the sharing sees it: its claims in flight. */
export interface ClaimingLane extends SharingLane {
  /** Jobs to be started at claim by the lane's claims in flight. */
  readonly startsRequested: number;
}

/** What a lane asks before it claims: the worker's slots shared among its lanes. */
export interface LaneSlots<L> {
  /** How many jobs `lane` may claim now. */
  claimable(lane: L): number;
  /** Of `count` jobs claimed now, how many free slots could start at once (claim.lua's freeSlots). */
  startable(count: number): number;
  /** Jobs a lane may register for (worker/handoff.ts): its equal share of the free slots, 0 paused. */
  handoffUnits(): number;
}

/** The rule above over the runner's counters and the worker's lanes. */
export class SlotShare<L extends ClaimingLane> implements LaneSlots<L> {
  constructor(
    private readonly counters: SlotCounters,
    private readonly lanes: () => readonly L[],
    /** Index of the lane the latest turn pumped first (turns.ts). */
    private readonly turnFirst: () => number,
  ) {}

  claimable(lane: L): number {
    const c = this.counters;
    if (c.isPaused) return 0;
    return claimableSlots(
      {
        lanes: this.lanes(),
        capacity: c.capacity,
        held: c.held,
        turnFirst: this.turnFirst(),
        shortJobs: c.shortJobs,
      },
      lane,
    );
  }

  startable(count: number): number {
    let starting = 0;
    for (const l of this.lanes()) starting += l.startsRequested;
    return Math.max(0, Math.min(count, this.counters.free - starting));
  }

  handoffUnits(): number {
    if (this.counters.isPaused) return 0;
    return Math.floor(this.startable(Number.MAX_SAFE_INTEGER) / this.lanes().length);
  }
}
