/**
 * What one attempt of a chaos job does, shared by the function processor of chaos/worker-child.ts and
 * the sandboxed module chaos/sandbox-processor.ts, so both act out the same plan (behaviour.ts) and log
 * the same lines: a 'b' line first thing, a 'p' line when a durable step's body runs and a 'q' line
 * when job.step returns after running it, a 'k' line when a job.waitForSignal ends (kind a), a 'y'
 * line when a job.addChildren or job.waitForChildren ends (kind p), and an 'x' line with the outcome
 * before returning or throwing.
 */
import { SnoozeError, UnrecoverableError } from '../src/index.js';
import type { ChildJob } from '../src/types.js';
import {
  type ChaosResult,
  type ExecutionOutcome,
  expiringSnoozes,
  type JobData,
  MAX_RESULT_BYTES,
  oddThrow,
  PLANNED_FAILURE_MESSAGE,
  planAttempt,
  type SandboxAct,
  type SignalPayload,
  sandboxAct,
  type WaitOutcome,
} from './behaviour.js';
import type { ExecLogWriter } from './exec-log.js';
import { childJobs } from './flow-plan.js';
import { deadChildNamed } from './flows-verdict.js';

/** The part of a Job (or of a sandbox's job object) an attempt uses. */
export interface ChaosJob {
  id: string;
  data: JobData;
  attempt: number;
  /** The attempt's fencing token (unique per claim): what makes an execution one attempt's. */
  token: string;
  maxAttempts: number;
  snoozes: number;
  runAt: number;
  step<T>(name: string, fn: () => T | Promise<T>): Promise<T>;
  sleep(ms: number): Promise<void>;
  updateData(data: JobData): Promise<void>;
  log(line: string): Promise<unknown>;
  waitForSignal<T = unknown>(name: string, opts?: { timeoutMs?: number }): Promise<T>;
  addChildren(children: ChildJob[]): Promise<{ queue: string; id: string }[]>;
  waitForChildren(): Promise<Record<string, unknown>>;
}

export interface ActEnv {
  seed: number;
  /** The worker process's pid (also for a process sandbox: faults are per worker process). */
  pid: number;
  log: ExecLogWriter;
  /** The sandbox mode this attempt runs in, or null for a function processor. */
  sandbox: 'thread' | 'process' | null;
  /** A batch worker's: each attempt runs in a batch (its 'x' line says so). */
  batch?: boolean;
  /** Called after each 'x' line (the worker child's liveness diagnostics). */
  onExecuted?: () => void;
}

export async function actOut(job: ChaosJob, env: ActEnv): Promise<ChaosResult> {
  const start = Date.now();
  const { id, data, attempt: a } = job;
  const z = job.snoozes;
  const sb = env.sandbox ? { sb: env.sandbox } : {};
  // Logged before anything else: a job that ends dead with no 'b' line for any attempt never ran.
  env.log.write({ t: 'b', id, s: data.s, a, pid: env.pid, at: start, z, ...sb });
  const plan = planAttempt(env.seed, data, a, job.maxAttempts);
  const act: SandboxAct = env.sandbox ? sandboxAct(env.seed, data.s, a) : 'none';
  const executed = (o: ExecutionOutcome) => {
    const end = Date.now();
    env.log.write({
      t: 'x',
      id,
      k: job.token,
      s: data.s,
      a,
      pid: env.pid,
      start,
      end,
      runAt: job.runAt,
      o,
      z,
      ...sb,
      ...(act === 'none' ? {} : { m: act }),
      ...(env.batch ? { bt: 1 as const } : {}),
    });
    env.onExecuted?.();
  };
  /** job.step with its body's runs logged ('p') and its stores confirmed ('q'). */
  const step = async <T>(name: string, fn: () => T): Promise<T> => {
    let ran = false;
    const value = await job.step(name, () => {
      ran = true;
      env.log.write({ t: 'p', id, s: data.s, a, z, name, pid: env.pid, at: Date.now() });
      return fn();
    });
    if (ran) env.log.write({ t: 'q', id, s: data.s, a, z, name, pid: env.pid, at: Date.now() });
    return value;
  };
  let stepValue: ChaosResult['step'];
  if (data.k === 'z' || data.k === 'w') {
    // A durable step first (stored once, fenced), then one snooze or sleep (no attempt spent).
    try {
      stepValue = await step(data.k === 'z' ? 'first' : 'charge', () => ({ a, p: env.pid }));
      // A sleep that finds its wake time stored and passed (an earlier run stored it, then died before
      // its snooze was recorded) returns at once: the attempt goes on.
      if (z === 0 && data.k === 'w') await job.sleep(data.zs ?? 300);
    } catch (err) {
      executed(isSnooze(err) ? 'snooze' : 'stepfail');
      throw err;
    }
    if (z === 0 && data.k === 'z') {
      executed('snooze');
      throw new SnoozeError(20);
    }
  }
  let sig: WaitOutcome[] | undefined;
  if (data.k === 'a') {
    // A durable step, then the waits: each takes a signal, parks the job (ParkedError: this run ends
    // with no outcome and the job runs from the top when its signal comes) or times out.
    try {
      stepValue = await step('before', () => ({ a, p: env.pid }));
      sig = await waitSignals(job, env);
    } catch (err) {
      executed(codeOf(err) === 'ERR_PARKED' ? 'park' : 'stepfail');
      throw err;
    }
  }
  let fr: Record<string, unknown> | undefined;
  if (data.k === 'p') {
    // A durable step, then the children (added once across runs), then the wait for them: it resolves
    // with their results, parks the job (ParkedError: it runs from the top when the last one ends) or
    // throws DependencyFailedError (a dead child it does not ignore: the job ends dead).
    try {
      stepValue = await step('before', () => ({ a, p: env.pid }));
      fr = await fanOut(job, env);
    } catch (err) {
      const code = codeOf(err);
      executed(code === 'ERR_PARKED' ? 'park' : code === 'ERR_DEPENDENCY_FAILED' ? 'depfail' : 'stepfail');
      throw err;
    }
  }
  if (data.k === 'e' && z === 0 && expiringSnoozes(env.seed, data.s)) {
    executed('snooze');
    throw new SnoozeError(data.zs ?? 100);
  }
  // Every attempt ignores job.signal on purpose: a hang runs on past its timeout and its lease.
  await new Promise((r) => setTimeout(r, plan.durationMs));
  executed(plan.outcome);
  if (plan.outcome === 'unrec') throw new UnrecoverableError(`${PLANNED_FAILURE_MESSAGE} (unrecoverable)`);
  if (plan.outcome === 'fail') throw new Error(PLANNED_FAILURE_MESSAGE);
  if (plan.outcome === 'odd') throw oddThrow(plan.variant);
  const p = env.pid;
  if (plan.outcome === 'big') return { a, p, z, pad: 'x'.repeat(MAX_RESULT_BYTES) };
  if (act !== 'none') misbehaveAfterReturn(job, act, env);
  // A hang's late return is ignored by the worker (the attempt already failed with TimeoutError).
  if (plan.variant > 0) return { a, p, z, pad: 'x'.repeat(plan.variant) };
  if (sig) return { a, p, z, step: stepValue!, sig };
  if (fr) return { a, p, z, step: stepValue!, fr };
  return stepValue ? { a, p, z, step: stepValue } : { a, p, z };
}

/**
 * Kind a's waits (data.sw), in order, each logged with a 'k' line: what it took (the payload's sid),
 * or that it timed out, parked the job or failed (then rethrown: a park ends the run, a failure the
 * attempt). A sandbox's job rebuilds the library's errors from its own copy: read by `code`.
 */
async function waitSignals(job: ChaosJob, env: ActEnv): Promise<WaitOutcome[]> {
  const { id, data, attempt: a, snoozes: z } = job;
  const out: WaitOutcome[] = [];
  for (const [n, w] of (data.sw ?? []).entries()) {
    const from = Date.now();
    const line = { t: 'k' as const, id, s: data.s, a, z, pid: env.pid, n, name: w.n, from };
    try {
      const payload = await job.waitForSignal<SignalPayload>(w.n, w.t ? { timeoutMs: w.t } : undefined);
      const sid = typeof payload?.sid === 'number' ? payload.sid : -1;
      env.log.write({ ...line, at: Date.now(), o: 'taken', sid });
      out.push(sid);
    } catch (err) {
      const code = codeOf(err);
      if (code === 'ERR_SIGNAL_TIMEOUT') {
        env.log.write({ ...line, at: Date.now(), o: 'timeout' });
        out.push(null);
        continue;
      }
      const o = code === 'ERR_PARKED' ? 'parked' : 'fail';
      env.log.write({ ...line, at: Date.now(), o, ...(o === 'fail' ? { code: code ?? 'none' } : {}) });
      throw err;
    }
  }
  return out;
}

/**
 * Kind p's calls, each logged with a 'y' line: job.addChildren (the children of data.fl), then
 * job.waitForChildren; the results by key, undefined (a dead child it ignores) as null.
 */
async function fanOut(job: ChaosJob, env: ActEnv): Promise<Record<string, unknown>> {
  const { id, data, attempt: a, snoozes: z } = job;
  const line = { t: 'y' as const, id, s: data.s, a, z, pid: env.pid };
  let from = Date.now();
  try {
    const refs = await job.addChildren(childJobs(id, data.s, data.fl!));
    env.log.write({
      ...line,
      call: 'add',
      from,
      at: Date.now(),
      o: 'added',
      refs: refs.map((r) => `${r.queue}:${r.id}`),
    });
  } catch (err) {
    env.log.write({ ...line, call: 'add', from, at: Date.now(), o: 'fail', code: codeOf(err) ?? 'none' });
    throw err;
  }
  from = Date.now();
  try {
    const got = await job.waitForChildren();
    const res = Object.fromEntries(Object.entries(got).map(([k, v]) => [k, v === undefined ? null : v]));
    env.log.write({ ...line, call: 'wait', from, at: Date.now(), o: 'resolved', res });
    return res;
  } catch (err) {
    const code = codeOf(err);
    const o = code === 'ERR_PARKED' ? 'parked' : code === 'ERR_DEPENDENCY_FAILED' ? 'depfail' : 'fail';
    const child = deadChildNamed(String((err as Error)?.message));
    env.log.write({
      ...line,
      call: 'wait',
      from,
      at: Date.now(),
      o,
      ...(o === 'depfail' && child !== undefined ? { child } : {}),
      ...(o === 'fail' ? { code: code ?? 'none' } : {}),
    });
    throw err;
  }
}

function codeOf(err: unknown): string | undefined {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * A sandboxed module that exits just after returning (its next job must not pay for it), or that
 * calls its job's methods after returning (those calls must be refused: the attempt has ended; and
 * never be applied to the next job the sandbox runs). A late data update carries this job's id in
 * `late`, a late step is named after it, so the verdict can tell where each one landed.
 */
function misbehaveAfterReturn(job: ChaosJob, act: SandboxAct, env: ActEnv): void {
  if (act === 'exit') {
    setImmediate(() => process.exit(0));
    return;
  }
  const { id, data } = job;
  setTimeout(
    () => {
      job.updateData({ ...data, late: id }).catch(() => {});
      job.log(`late call from job ${id}`).catch(() => {});
      job.step(`late:${id}`, () => env.pid).catch(() => {});
    },
    1 + (data.s % 20),
  );
}

/** A SnoozeError, also as a sandbox's job.sleep throws it (built from its own copy of the library). */
function isSnooze(err: unknown): boolean {
  return err instanceof SnoozeError || (err as { name?: unknown })?.name === 'SnoozeError';
}
