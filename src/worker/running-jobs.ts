/**
 * The attempts a worker is running, per lane: the runner owns them (it starts and settles attempts);
 * a lane asks it which of its jobs run (a cancel, diagnostics, the heartbeat).
 */
import type { Clock } from '../clock.js';
import type { Job } from './job.js';

interface Running {
  job: Job<unknown>;
  startedAt: number;
  /** Its timeout, on the lane's timers (Node's or a test clock's). */
  timer: unknown;
}

/** What others may read of a lane's running attempts. */
export interface RunningView {
  readonly size: number;
  get(id: string): Job<unknown> | undefined;
  ids(): IterableIterator<string>;
  jobs(): Job<unknown>[];
}

/** The running attempts of one lane, by job id. */
export class RunningJobs implements RunningView {
  private readonly runs = new Map<string, Running>();

  constructor(private readonly timers: Clock) {}

  get size(): number {
    return this.runs.size;
  }

  /** The job's processor is about to run. */
  start(job: Job<unknown>): void {
    this.runs.set(job.id, { job, startedAt: performance.now(), timer: undefined });
  }

  /** The attempt's timeout, cleared when it stops running (at once if it already has). */
  armTimeout(job: Job<unknown>, timer: unknown): void {
    const run = this.runs.get(job.id);
    if (run?.job === job) run.timer = timer;
    else this.timers.clearTimeout(timer);
  }

  /** The job stopped running (settled, timed out, cancelled): how long it ran (ms), or undefined if it was not. */
  stop(id: string): number | undefined {
    const run = this.runs.get(id);
    if (!run) return undefined;
    this.timers.clearTimeout(run.timer);
    this.runs.delete(id);
    return performance.now() - run.startedAt;
  }

  get(id: string): Job<unknown> | undefined {
    return this.runs.get(id)?.job;
  }

  ids(): IterableIterator<string> {
    return this.runs.keys();
  }

  jobs(): Job<unknown>[] {
    return [...this.runs.values()].map((r) => r.job);
  }
}
