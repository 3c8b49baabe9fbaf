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
 * s slow: runs longer than its lease (1.8-3 s), like n otherwise,
 * o odd throw: throws something that is not a well-formed Error (a null-prototype object, an Error whose
 *   stack is not a string, a message getter returning an object, undefined, a BigInt, a circular object),
 * h hang: added with a timeoutMs; the attempt ignores its abort signal and runs on past its lease,
 * b big result: returns a result above maxPayloadBytes (refused: the attempt fails), then a huge one
 *   just under it,
 * 1 single attempt: maxAttempts 1, never fails by plan (a lost lease kills it: it must have run first),
 * z snooze and step: stores a durable step (job.step) first, snoozes once (SnoozeError, no attempt
 *   spent), then behaves like n; its result carries the step's value, which must be the stored one.
 * e expiring: added with ttlMs or expireAt; half of them snooze once on their first run (data.zs ms,
 *   often past their expiry: a job that started in time must still run to its end), then like n. One
 *   that no worker started by its expiry ends dead with ExpiredError, never having run.
 * t throttle: added with a dedupe key (data.dk, a small pool per run), some with a ttlMs window; like n.
 * w debounce: added with a debounce key and a delay; stores a durable step ('charge'), sleeps once with
 *   job.sleep (a started job, delayed: a debounce add must not rewrite it), then like n.
 * l keep last: added with a debounce key and keepLastIfActive (data.dk, its own small pool of keys),
 *   mostly lifo (to the front of the line, so it would start at once if nothing held it back), often
 *   with a short delay; runs 200-700 ms, so adds often meet its job running, and fails at random like n
 *   (a retry keeps the key's successor behind it). Two jobs of one key never run at once, and the
 *   last add's data is what runs (features-verdict.ts keepLastViolations).
 * a awaits signals: added with an explicit id (`sig-<seq>`, so the signaller can reach a job from an
 *   add whose answer was lost); stores a durable step ('before'), then waits for one or two signals
 *   (data.sw: names 'go' or 'ok', some with a timeoutMs) with job.waitForSignal, parking in between,
 *   then behaves like n; its result carries the step and what each wait ended with
 *   (chaos/signaller.ts sends the signals, chaos/signals-verdict.ts judges them).
 * p flow parent: added with an explicit id (`flow-<seq>`); stores a durable step ('before'), adds 2-4
 *   children with job.addChildren (data.fl, chaos/flow-plan.ts: ids `<parent>-c<i>`, in this queue and
 *   the second one; some end dead, some wait for signals, some added with ignoreDependencyFailure),
 *   then job.waitForChildren (parking until they have all ended), then behaves like n; its result
 *   carries the step and the children's results as the wait gave them. A dead child it does not ignore
 *   ends it dead (DependencyFailedError). Children of its queue are jobs of kinds n, u and a with
 *   data.fp naming their parent (chaos/flows-verdict.ts judges the flows).
 * Every kind but f and u succeeds on its last attempt (e may also end dead by expiry, unrun).
 *
 * Why slow jobs, when the workload is 0-50 ms jobs: an attempt shorter than its lease never needs a
 * renewal, and its stale outcome always arrives after the newer attempt has finished, when any fence
 * refuses it. Without attempts that outlive the lease, a complete.lua that ignored the fencing token
 * while the job is active passed every check (mutation-tested); with them it fails "wrong outcome".
 */
export type Kind =
  | 'n'
  | 'f'
  | 'u'
  | 'd'
  | 'r'
  | 'i'
  | 's'
  | 'o'
  | 'h'
  | 'b'
  | '1'
  | 'z'
  | 'e'
  | 't'
  | 'w'
  | 'g'
  | 'l'
  | 'a'
  | 'p';

export const KIND_NAMES: Record<Kind, string> = {
  n: 'normal',
  f: 'always-fail',
  u: 'unrecoverable',
  d: 'delayed',
  r: 'scheduled (runAt)',
  i: 'duplicate-id',
  s: 'slow',
  o: 'odd throw',
  h: 'hang past timeout and lease',
  b: 'huge result',
  1: 'single attempt',
  z: 'snooze and step',
  e: 'expiring',
  t: 'dedupe throttle',
  w: 'dedupe debounce',
  g: 'custom backoff giving up',
  l: 'dedupe keep last',
  a: 'awaits signals',
  p: 'flow parent',
};

/** Share of each kind among the adds (percent). */
export const KIND_WEIGHTS: Record<Kind, number> = {
  n: 33.8,
  f: 4,
  u: 2,
  d: 8,
  r: 8,
  i: 14,
  s: 1,
  o: 2,
  h: 1,
  b: 0.2,
  1: 2,
  z: 3,
  e: 4,
  t: 4,
  w: 3,
  g: 1.5,
  l: 3,
  a: 3,
  p: 1,
};

/** The kinds a processor misbehaves in (left out by `--workload plain`). */
export const MISBEHAVING: readonly Kind[] = ['o', 'h', 'b'];

/** The weights of a workload: 'all' kinds, or 'plain' (every kind but the misbehaving ones). */
export function workloadWeights(workload: 'all' | 'plain'): Record<Kind, number> {
  const w = { ...KIND_WEIGHTS };
  if (workload === 'plain') for (const k of MISBEHAVING) w[k] = 0;
  return w;
}

/**
 * The job payload: the producer's sequence number of the add, the kind, for hangs how long (ms), for
 * kinds e and w how long their one snooze or sleep is (ms), and for t and w their dedupe key.
 * `late` is set only by a sandboxed job's late updateData call (the id of the job that made it): a job
 * whose data carries another job's id was written by a call that should have been refused.
 */
export interface JobData {
  s: number;
  k: Kind;
  h?: number;
  zs?: number;
  dk?: string;
  late?: string;
  /** Kind a: its waits, in order: the signal's name and the wait's timeoutMs (none: waits without end). */
  sw?: SignalWait[];
  /** Kind p: the children it adds (chaos/flow-plan.ts). */
  fl?: FlowData;
  /** A flow child (of the parent's queue): its parent's id and its index among the parent's children. */
  fp?: string;
  ci?: number;
}

/** One job.waitForSignal of a kind a job: `n` the name, `t` its timeoutMs (absent: no timeout). */
export interface SignalWait {
  n: string;
  t?: number;
}

/** What a flow child does (chaos/flow-plan.ts): completes, ends dead, or waits for signals first. */
export type ChildMode = 'ok' | 'dead' | 'sig';

/** One planned child of a flow parent: its queue (absent: the parent's), its mode, whether its death is ignored. */
export interface FlowChild {
  q?: string;
  m: ChildMode;
  ig?: 1;
  /** A sig child's waits (its data.sw). */
  sw?: SignalWait[];
}

/** A flow parent's data.fl: its children, and the lease and fixed backoff they are added with. */
export interface FlowData {
  children: FlowChild[];
  lease: number;
  backoff: number;
}

/** The payload of every chaos signal: the send's number (chaos/signaller.ts SendRecord.sid). */
export interface SignalPayload {
  sid: number;
}

/** What a finished wait gave: the sid of the payload taken (-1: a payload without one), or null (timed out). */
export type WaitOutcome = number | null;

/** What a completed attempt returns; the verdict checks it against the job's final attempt count. */
export interface ChaosResult {
  /** The attempt (fencing token) that produced this result. */
  a: number;
  /** Worker process id. */
  p: number;
  /** Padding of the huge results. */
  pad?: string;
  /** The job's snoozes when this attempt ran (kind z snoozes once, then runs attempt a again). */
  z?: number;
  /** Kinds z, w, a: the value of its durable step, as job.step returned it. */
  step?: { a: number; p: number };
  /** Kind a: what each of its waits gave, in order. */
  sig?: WaitOutcome[];
  /** Kind p: the children's results, as job.waitForChildren gave them (by id, `queue:id` for another queue's). */
  fr?: Record<string, unknown>;
}

export const RANDOM_FAILURE_RATE = 0.1;
export const MAX_JOB_MS = 50;
export const SLOW_JOB_MS = [1_800, 3_000] as const;
/** The library's default maxPayloadBytes (the chaos workers keep the default). */
export const MAX_RESULT_BYTES = 512 * 1024;

/** maxAttempts per kind (the rest comes from the Queue defaults: leaseMs and a fixed backoff). */
export function maxAttemptsOf(kind: Kind): number {
  if (kind === '1') return 1;
  return kind === 'f' || kind === 'u' || kind === 'o' || kind === 'h' || kind === 'b' ? 3 : 5;
}

/**
 * Kind g fails every attempt, and its custom backoff strategy (the chaos workers' `giveUp`) says "no
 * retry" from this charged attempt on (-1, then false), well before its maxAttempts (5): the job must
 * end dead at that attempt, with its planned failure.
 */
export const GIVE_UP_AT = 2;

export function giveUpBackoff(attempt: number): number | false {
  if (attempt < GIVE_UP_AT) return 10;
  return attempt === GIVE_UP_AT ? -1 : false;
}

/**
 * ok: returns a result; fail: throws a plain Error; unrec: throws UnrecoverableError; odd: throws an
 * odd value; hang: runs past its timeout and its lease, ignoring the abort signal; big: returns a
 * result larger than maxPayloadBytes.
 */
export type PlannedOutcome = 'ok' | 'fail' | 'unrec' | 'odd' | 'hang' | 'big';
/**
 * What an execution did: its planned outcome, or (kind z) `snooze` (threw SnoozeError; not a failure)
 * or `stepfail` (job.step or job.waitForSignal threw, e.g. the connection dropped: the attempt fails
 * with that error), or (kinds a and p) `park` (job.waitForSignal or job.waitForChildren parked the job:
 * no outcome, no attempt spent), or (kind p) `depfail` (job.waitForChildren threw DependencyFailedError:
 * the job ends dead at once).
 */
export type ExecutionOutcome = PlannedOutcome | 'snooze' | 'stepfail' | 'park' | 'depfail';

/** The kinds that store durable steps (their step runs are logged and judged: chaos/features-verdict.ts). */
export const STEP_KINDS: readonly Kind[] = ['z', 'w', 'a', 'p'];
/** Kinds that snooze or sleep for long (their group would be held that long): kept out of groups. */
export const UNGROUPED_KINDS: readonly Kind[] = ['e', 'w', 't', 'l'];

/**
 * What a sandboxed attempt does besides its plan (chaos workers with a `sandbox` option): `exit` ends
 * its sandbox (process.exit) right after returning its result; `late` calls job.updateData, job.log
 * and job.step from a timer after returning (the attempt has ended: the calls must be refused, and
 * never land on the next job the sandbox runs). Drawn per attempt, so the verdict can tell a
 * SandboxError the attempt brought on itself from one it suffered for another's exit.
 */
export type SandboxAct = 'exit' | 'late' | 'none';
export const SANDBOX_EXIT_RATE = 0.006;
export const SANDBOX_LATE_RATE = 0.05;

export function sandboxAct(seed: number, s: number, attempt: number): SandboxAct {
  const r = hash01(seed, s, attempt, 9);
  if (r < SANDBOX_EXIT_RATE) return 'exit';
  return r < SANDBOX_EXIT_RATE + SANDBOX_LATE_RATE ? 'late' : 'none';
}

/** Kind l's runs: long enough that adds of its key often meet it running. */
export const KEEP_LAST_JOB_MS = [200, 700] as const;

/** Kind e: whether its first run snoozes (for data.zs ms). */
export function expiringSnoozes(seed: number, s: number): boolean {
  return hash01(seed, s, 0, 5) < 0.5;
}

export const PLANNED_FAILURE_MESSAGE = 'planned failure';

/** The error each planned failure must be recorded with (null: any name; odd values have no name). */
export function expectedErrorName(outcome: ExecutionOutcome): string | null | undefined {
  if (outcome === 'fail') return 'Error';
  if (outcome === 'unrec') return 'UnrecoverableError';
  if (outcome === 'hang') return 'TimeoutError';
  if (outcome === 'big') return 'PayloadTooLargeError';
  if (outcome === 'depfail') return 'DependencyFailedError';
  if (outcome === 'odd' || outcome === 'stepfail' || outcome === 'snooze' || outcome === 'park') return null;
  return undefined; // ok: no error may be recorded
}

export interface AttemptPlan {
  durationMs: number;
  outcome: PlannedOutcome;
  /** For odd: which odd value (index into ODD_THROWS). For ok of kind b: the result's padding length. */
  variant: number;
}

/**
 * The attempt's duration (0..50 ms; slow jobs 1.8..3 s; hangs data.h) and outcome. Kinds that should
 * succeed fail at random 10 % of the time, but never on their last attempt, so such a job can only end
 * dead if lost leases spent its attempts (which the verdict then requires to be visible in its error
 * history).
 */
export function planAttempt(seed: number, data: JobData, attempt: number, maxAttempts: number): AttemptPlan {
  // A flow child shares its parent's s: its draws are its own.
  const s = data.ci === undefined ? data.s : data.s + 1_000_000 * (data.ci + 1);
  const r = hash01(seed, s, attempt, 1);
  const r2 = hash01(seed, s, attempt, 2);
  const last = attempt >= maxAttempts;
  const [slowMin, slowMax] = SLOW_JOB_MS;
  const [keepMin, keepMax] = KEEP_LAST_JOB_MS;
  let durationMs =
    data.k === 's'
      ? slowMin + Math.floor(r * (slowMax - slowMin))
      : data.k === 'l'
        ? keepMin + Math.floor(r * (keepMax - keepMin))
        : Math.floor(r * (MAX_JOB_MS + 1));
  let outcome: PlannedOutcome = 'ok';
  let variant = 0;
  if (data.k === 'f' || data.k === 'g') outcome = 'fail';
  else if (data.k === 'u') outcome = 'unrec';
  else if (data.k === 'o' && !last && (attempt === 1 || r2 < 0.7)) {
    outcome = 'odd';
    variant = Math.floor(hash01(seed, data.s, attempt, 3) * ODD_THROW_NAMES.length);
  } else if (data.k === 'h' && !last && (attempt === 1 || r2 < 0.3)) {
    outcome = 'hang';
    durationMs = data.h ?? 5_000;
  } else if (data.k === 'b' && !last && attempt === 1) outcome = 'big';
  else if (data.k === 'b') variant = Math.floor(MAX_RESULT_BYTES * (0.5 + 0.4 * r2));
  else if (data.k !== '1' && !last && r2 < RANDOM_FAILURE_RATE) outcome = 'fail';
  return { durationMs, outcome, variant };
}

/** What each odd throw is (named in logs and reports). */
export const ODD_THROW_NAMES = [
  'Object.create(null)',
  'Error with a non-string stack',
  'Error whose message getter returns an object',
  'undefined',
  'a BigInt',
  'a circular object',
] as const;

/** The odd value to throw for `variant` (built fresh each time: some are mutable). */
export function oddThrow(variant: number): unknown {
  switch (variant) {
    case 0:
      return Object.create(null);
    case 1: {
      const e = new Error('odd: stack is not a string');
      Object.defineProperty(e, 'stack', { value: { not: 'a string' }, configurable: true });
      return e;
    }
    case 2: {
      const e = new Error('odd');
      Object.defineProperty(e, 'message', { get: () => ({ an: 'object' }), configurable: true });
      return e;
    }
    case 3:
      return undefined;
    case 4:
      return 10n ** 30n;
    default: {
      const o: Record<string, unknown> = { name: 'Circular' };
      o.self = o;
      return o;
    }
  }
}
