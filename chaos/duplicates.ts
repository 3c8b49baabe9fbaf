/**
 * Duplicate executions: at-least-once delivery runs a job again when an attempt's outcome could not be
 * recorded (its lease was lost). Each such "wasted" execution must be explained by a fault near it in
 * time (of its own process, or of everything: Redis or all connections), and no fault may explain more
 * executions than it could have touched: per process hit, 2 x (concurrency + prefetch) (up to
 * `concurrency` running, `prefetch` held ahead, and the outcomes of as many again finished but not yet
 * acknowledged). prefetch 'auto' counts as 2 x concurrency: it holds about 20 ms of work, and the chaos
 * jobs average 25 ms.
 */

import { autoPrefetchCap } from '../src/worker/runner.js';
import type { Info } from './collect.js';
import type { Execution } from './exec-log.js';
import type { FaultRecord } from './fault-plan.js';

export interface FaultAttribution {
  kind: string;
  at: number;
  pid?: number;
  wasted: number;
  cap: number;
}

export interface DuplicateReport {
  executions: number;
  /** Executions whose outcome Redis did not record (the job then ran again). */
  wasted: number;
  /** Completed jobs' successful executions beyond the one recorded. */
  okDuplicates: number;
  /** Jobs with at least one wasted execution. */
  jobsAffected: number;
  explained: number;
  unexplained: Execution[];
  perFault: FaultAttribution[];
  overCap: FaultAttribution[];
  /** Sum of the per-fault caps: the most wasted executions this run's faults could explain. */
  bound: number;
  /** Attempts that ended by lease expiry (LeaseExpiredError lines), and those never logged as run. */
  leaseLosses: number;
  leaseLossesNeverRan: number;
  /** Of those, attempts no processor even began (claimed, prefetched or lost in flight, then recovered). */
  leaseLossesNeverBegun: number;
  /** Lease expiries with no fault at all in the lease + 3 s before them (suspicious: look at these). */
  leaseLossesWithoutFault: string[];
}

const LEASE_EXPIRED = 'LeaseExpiredError';

/** Did Redis record this execution's outcome? */
export function outcomeRecorded(e: Execution, job: Info): boolean {
  // In a batch, the attempt's timeout covers its batch: a sibling that hangs times it out, and that
  // TimeoutError is its recorded outcome, whatever its own run did.
  if (e.bt && job.errors.some((err) => err.attempt === e.a && err.name === 'TimeoutError')) return true;
  if (e.o === 'ok') return job.state === 'completed' && job.attempts === e.a;
  // A park is recorded by the script that answered it (job.waitForSignal threw ParkedError only then).
  if (e.o === 'park') return true;
  // A snooze is recorded when the job's snooze count passed the one the execution ran with.
  if (e.o === 'snooze') return job.snoozes > (e.z ?? 0);
  return job.errors.some((err) => err.attempt === e.a && err.name !== LEASE_EXPIRED);
}

export function analyseDuplicates(
  executions: readonly Execution[],
  jobs: ReadonlyMap<string, Info>,
  faults: readonly FaultRecord[],
  o: { leaseMs: number; concurrency: number; prefetch: number | 'auto'; workers: number },
  begun: ReadonlySet<string>,
): DuplicateReport {
  // A process's wasted executions in one fault: the jobs it held (running, finished with the outcome
  // not yet written, and claimed beyond its slots), twice (two claims in flight). 'auto' prefetch can
  // reach autoPrefetchCap: chaos seed 72754 wasted 111 executions in one stop of a worker at
  // concurrency 10, more than the 60 the earlier guess of 2 x concurrency allowed.
  const prefetch = o.prefetch === 'auto' ? autoPrefetchCap(o.concurrency) : o.prefetch;
  const perProcess = 2 * (o.concurrency + prefetch);
  const windowMs = o.leaseMs + 3_000;
  const perFault: FaultAttribution[] = faults.map((f) => ({
    kind: f.kind,
    at: f.at,
    ...(f.pid === undefined ? {} : { pid: f.pid }),
    wasted: 0,
    cap: (f.pid === undefined ? o.workers : 1) * perProcess,
  }));
  const unexplained: Execution[] = [];
  const okCount = new Map<string, number>();
  const affected = new Set<string>();
  let wasted = 0;
  for (const e of executions) {
    const job = jobs.get(e.id);
    if (!job || (job.state !== 'completed' && job.state !== 'dead')) continue; // lost/stuck: judged elsewhere
    if (job.data.s !== e.s) continue; // an earlier job under this id, deleted by retention 0
    if (e.o === 'ok' && job.state === 'completed') okCount.set(e.id, (okCount.get(e.id) ?? 0) + 1);
    if (outcomeRecorded(e, job)) continue;
    wasted++;
    affected.add(e.id);
    let best = -1;
    let bestDistance = Number.POSITIVE_INFINITY;
    faults.forEach((f, i) => {
      if (f.pid !== undefined && f.pid !== e.pid) return;
      if (e.start > f.until + windowMs || e.end < f.at - windowMs) return;
      const distance = Math.max(0, f.at - e.end, e.start - f.until);
      if (distance < bestDistance) {
        best = i;
        bestDistance = distance;
      }
    });
    if (best < 0) unexplained.push(e);
    else perFault[best]!.wasted++;
  }
  let okDuplicates = 0;
  for (const n of okCount.values()) okDuplicates += n - 1;
  const ran = new Set(executions.map((e) => `${e.id}#${e.s}#${e.a}`));
  let leaseLosses = 0;
  let leaseLossesNeverRan = 0;
  let leaseLossesNeverBegun = 0;
  const leaseLossesWithoutFault: string[] = [];
  for (const job of jobs.values()) {
    for (const err of job.errors) {
      if (err.name !== LEASE_EXPIRED) continue;
      leaseLosses++;
      if (!ran.has(`${job.id}#${job.data.s}#${err.attempt}`)) leaseLossesNeverRan++;
      if (!begun.has(`${job.id}#${job.data.s}#${err.attempt}`)) leaseLossesNeverBegun++;
      const near = faults.some((f) => f.at <= err.at && f.until >= err.at - windowMs);
      if (!near) leaseLossesWithoutFault.push(`${job.id} attempt ${err.attempt} expired at ${err.at}`);
    }
  }
  return {
    executions: executions.length,
    wasted,
    okDuplicates,
    jobsAffected: affected.size,
    explained: wasted - unexplained.length,
    unexplained,
    perFault,
    overCap: perFault.filter((f) => f.wasted > f.cap),
    bound: perFault.reduce((sum, f) => sum + f.cap, 0),
    leaseLosses,
    leaseLossesNeverRan,
    leaseLossesNeverBegun,
    leaseLossesWithoutFault,
  };
}
