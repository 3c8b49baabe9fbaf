/**
 * What the chaos jobs are and how each attempt behaves. Shared by the producer (which picks kinds), the
 * worker processes (which act out each attempt) and the verdict (which recomputes what each attempt was
 * meant to do), so the three cannot disagree.
 */
import { hash01 } from './rng.js';

/**
 * n normal (fails at random, retried), f always fails (plain Error, ends dead after maxAttempts),
 * u throws UnrecoverableError (dead at once), d added with delayMs, r added with runAt,
 * i added with an explicit id that other adds reuse (duplicate-id adds),
 * s slow: runs longer than its lease (1.8-3 s), like n otherwise.
 *
 * Why slow jobs, when the workload is 0-50 ms jobs: an attempt shorter than its lease never needs a
 * renewal, and its stale outcome always arrives after the newer attempt has finished, when any fence
 * refuses it. Without attempts that outlive the lease, a complete.lua that ignored the fencing token
 * while the job is active passed every check (mutation-tested); with them it fails "wrong outcome".
 */
export type Kind = 'n' | 'f' | 'u' | 'd' | 'r' | 'i' | 's';

export const KIND_NAMES: Record<Kind, string> = {
  n: 'normal',
  f: 'always-fail',
  u: 'unrecoverable',
  d: 'delayed',
  r: 'scheduled (runAt)',
  i: 'duplicate-id',
  s: 'slow',
};

/** Share of each kind among the adds. */
export const KIND_WEIGHTS: Record<Kind, number> = { n: 63, f: 4, u: 2, d: 8, r: 8, i: 14, s: 1 };

/** The job payload: the producer's sequence number of the add, and the kind. */
export interface JobData {
  s: number;
  k: Kind;
}

/** What a completed attempt returns; the verdict checks it against the job's final attempt count. */
export interface ChaosResult {
  /** The attempt (fencing token) that produced this result. */
  a: number;
  /** Worker process id. */
  p: number;
}

export const RANDOM_FAILURE_RATE = 0.1;
export const MAX_JOB_MS = 50;
export const SLOW_JOB_MS = [1_800, 3_000] as const;

/** maxAttempts per kind (the rest comes from the Queue defaults: leaseMs and a fixed backoff). */
export function maxAttemptsOf(kind: Kind): number {
  return kind === 'f' || kind === 'u' ? 3 : 5;
}

export type PlannedOutcome = 'ok' | 'fail' | 'unrec';

export const PLANNED_FAILURE_MESSAGE = 'planned failure';

/**
 * The attempt's duration (0..50 ms; slow jobs 1.8..3 s) and outcome. Kinds that should succeed fail at random 10 % of the
 * time, but never on their last attempt, so such a job can only end dead if lost leases spent its
 * attempts (which the verdict then requires to be visible in its error history).
 */
export function planAttempt(
  seed: number,
  data: JobData,
  attempt: number,
  maxAttempts: number,
): { durationMs: number; outcome: PlannedOutcome } {
  const r = hash01(seed, data.s, attempt, 1);
  const [slowMin, slowMax] = SLOW_JOB_MS;
  const durationMs =
    data.k === 's' ? slowMin + Math.floor(r * (slowMax - slowMin)) : Math.floor(r * (MAX_JOB_MS + 1));
  let outcome: PlannedOutcome = 'ok';
  if (data.k === 'f') outcome = 'fail';
  else if (data.k === 'u') outcome = 'unrec';
  else if (attempt < maxAttempts && hash01(seed, data.s, attempt, 2) < RANDOM_FAILURE_RATE) outcome = 'fail';
  return { durationMs, outcome };
}
