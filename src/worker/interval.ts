import { type Clock, REAL_TIMERS } from '../clock.js';

/** A self-rescheduling timer for the worker's background loops: one run at a time, never overlapping. */
export class Interval {
  private timer: unknown;
  private running = false;
  private stopped = true;

  constructor(
    private readonly task: () => Promise<unknown>,
    /** Delay before the next run; called after each run so it can adapt (jitter, backlog). */
    private readonly nextDelayMs: () => number,
    /** Where a failed run's error goes; the loop carries on. */
    private readonly onError: (err: unknown) => void,
    /** Whose timers: Node's, or a test clock's (clock.ts). */
    private readonly timers: Clock = REAL_TIMERS,
  ) {}

  start(firstDelayMs = this.nextDelayMs()): void {
    this.stopped = false;
    this.schedule(firstDelayMs);
  }

  /** Runs sooner than planned (no-op while a run is in progress). */
  runWithin(ms: number): void {
    if (this.stopped || this.running) return;
    this.schedule(ms);
  }

  private schedule(ms: number): void {
    this.timers.clearTimeout(this.timer);
    this.timer = this.timers.setTimeout(() => this.tick(), ms);
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    this.running = true;
    try {
      await this.task();
    } catch (err) {
      this.onError(err);
    } finally {
      this.running = false;
      if (!this.stopped) this.schedule(this.nextDelayMs());
    }
  }

  stop(): void {
    this.stopped = true;
    this.timers.clearTimeout(this.timer);
  }
}

export function jittered(ms: number): number {
  return Math.round(ms * (0.8 + Math.random() * 0.4));
}
