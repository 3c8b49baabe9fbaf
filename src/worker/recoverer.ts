/**
 * The nanny: every worker periodically moves jobs whose lease expired back to waiting (or to dead when
 * their attempts are spent). Running it in every worker means no dedicated daemon is needed; the
 * script is atomic, so workers recovering at the same moment never double-recover a job.
 */

import type { Clock } from '../clock.js';
import { SCRIPT_BATCH_LIMIT } from '../defaults.js';
import { Interval, jittered } from './interval.js';

export interface RecovererDeps {
  /** Node's timers unless the worker runs on a test clock. */
  timers?: Clock;
  intervalMs: number;
  recover(limit: number): Promise<{ requeued: string[]; dead: string[] }>;
  onRecovered(result: { requeued: string[]; dead: string[] }): void;
  onError(err: unknown): void;
}

export class Recoverer {
  private readonly interval: Interval;
  private backlog = false;

  constructor(private readonly deps: RecovererDeps) {
    this.interval = new Interval(
      () => this.run(),
      () => (this.backlog ? 0 : jittered(deps.intervalMs)),
      deps.onError,
      deps.timers,
    );
  }

  start(): void {
    this.interval.start(jittered(this.deps.intervalMs / 2));
  }

  private async run(): Promise<void> {
    const result = await this.deps.recover(SCRIPT_BATCH_LIMIT);
    const n = result.requeued.length + result.dead.length;
    this.backlog = n >= SCRIPT_BATCH_LIMIT;
    if (n > 0) this.deps.onRecovered(result);
  }

  stop(): void {
    this.interval.stop();
  }
}

/** Recovers expired leases in each partition in turn (up to `limit` jobs each), as one result. */
export async function recoverEach(
  partitions: readonly { recover(limit: number): Promise<{ requeued: string[]; dead: string[] }> }[],
  limit: number,
): Promise<{ requeued: string[]; dead: string[] }> {
  const out = { requeued: [] as string[], dead: [] as string[] };
  for (const p of partitions) {
    const r = await p.recover(limit);
    out.requeued.push(...r.requeued);
    out.dead.push(...r.dead);
  }
  return out;
}
