/**
 * A clock that moves only when told (env.advance). Queues and Workers given it (option `clock`, see
 * src/clock.ts) send its time as every script's `now`, and the worker's time-driven loops set their
 * timers on it: a timer fires when the clock is moved past its due time, never in real time.
 */
import type { Clock } from '../clock.js';

interface PendingTimer {
  at: number;
  fn: () => void;
}

export class VirtualClock implements Clock {
  private current: number;
  private readonly timers = new Map<number, PendingTimer>();
  private nextId = 1;
  private readonly watched = new Set<object>();

  constructor(startAt: number) {
    this.current = startAt;
  }

  now(): number {
    return this.current;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.nextId++;
    const wait = Math.max(0, ms || 0); // NaN and negatives: at once, as Node would
    this.timers.set(id, { at: this.current + wait, fn });
    // Due already (a 0 delay, or a due time that has passed): fire on the next turn, as Node would.
    if (wait === 0) setImmediate(() => void this.fireDue());
    return id;
  }

  clearTimeout(handle: unknown): void {
    if (typeof handle === 'number') this.timers.delete(handle);
  }

  /** @internal Workers built with this clock report here (Worker constructor), so the env can watch them. */
  watch(worker: object): void {
    this.watched.add(worker);
  }

  /** The workers built with this clock. */
  get workers(): readonly object[] {
    return [...this.watched];
  }

  /** Sets the time forward to `at` (never back); fires nothing: see fireDue. */
  moveTo(at: number): void {
    if (at > this.current) this.current = at;
  }

  /**
   * Fires the timers due now, earliest first (ties: in the order they were set), and resolves once the
   * work they started has (a worker loop's run is async: a lease renewal's reply, a recovery pass).
   * Timers set while firing wait for the next call (or, if due at once, the next turn), so a loop that
   * re-arms itself cannot spin here. Resolves how many fired.
   */
  async fireDue(): Promise<number> {
    const due = [...this.timers.entries()]
      .filter(([, t]) => t.at <= this.current)
      .sort((a, b) => a[1].at - b[1].at || a[0] - b[0]);
    const work: unknown[] = [];
    for (const [id, t] of due) {
      // Cleared by an earlier timer of this round: it must not fire.
      if (!this.timers.delete(id)) continue;
      try {
        work.push((t.fn as () => unknown)());
      } catch (err) {
        // As a throwing Node timer callback would: uncaught, without stopping the other timers.
        process.nextTick(() => {
          throw err;
        });
      }
    }
    // The loops report their own failures (Interval's onError); here only their completion matters.
    await Promise.allSettled(work);
    return due.length;
  }

  /** Timers waiting (for diagnostics). */
  get pendingTimers(): number {
    return this.timers.size;
  }
}
