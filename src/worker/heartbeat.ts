/**
 * Keeps this worker listed in queue.workers(): a beat every `intervalMs` with a time-to-live of three
 * intervals, so a worker that died drops out after missing three beats.
 */
import { hostname } from 'node:os';
import { Interval, jittered } from './interval.js';

export interface HeartbeatDeps {
  intervalMs: number;
  beat(ttlMs: number): Promise<void>;
  onError(err: unknown): void;
}

export class Heartbeat {
  private readonly interval: Interval;

  constructor(private readonly deps: HeartbeatDeps) {
    this.interval = new Interval(
      () => deps.beat(deps.intervalMs * 3),
      () => jittered(deps.intervalMs),
      deps.onError,
    );
  }

  async start(): Promise<void> {
    await this.deps.beat(this.deps.intervalMs * 3);
    this.interval.start();
  }

  stop(): void {
    this.interval.stop();
  }
}

/**
 * What a beat says about the worker (shown by queue.workers()): at most 100 of its running job ids,
 * `running` giving them per partition.
 */
export function workerInfo(startedAt: number, concurrency: number, running: Iterable<string>[]): string {
  const activeJobIds: string[] = [];
  for (const ids of running) for (const id of ids) if (activeJobIds.length < 100) activeJobIds.push(id);
  return JSON.stringify({ host: hostname(), pid: process.pid, startedAt, concurrency, activeJobIds });
}
