/**
 * Durable steps and sleeps (job.step, job.sleep; docs/job-control.md), written once for the two
 * places a processor runs: a Job in the worker, and a sandbox's job, whose reads and writes travel
 * over its channel to the worker's Job. Both only differ in how a step is read and written (StepIO).
 */
import { SnoozeError, ValidationError } from '../errors.js';

/** How an attempt reads and (fenced by its lease) writes its job's stored steps. */
export interface StepIO {
  readStep(name: string): Promise<{ found: boolean; value?: unknown }>;
  writeStep(name: string, value: unknown): Promise<boolean>;
}

/** Step names the library uses for job.sleep; a user's step name may not start with it. */
export const SLEEP_STEP = '~sleep:';
/** Prefixes of the steps the library writes itself (job.sleep, job.waitForSignal: signal-wait.ts). */
const RESERVED = [SLEEP_STEP, '~wait:', '~signal:'];

/**
 * A step name as stored (a line `name \t json`): 1-256 characters without tabs or newlines. A user's
 * name may not take a prefix the library writes; `reserved` allows them (job.sleep's, job.waitForSignal's).
 */
export function checkStepName(name: unknown, reserved = false): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > 256 || /[\t\n\r]/.test(name)) {
    throw new ValidationError(
      `a step name must be a string of 1-256 characters without tabs or newlines, got ${String(name)}`,
    );
  }
  const prefix = reserved ? undefined : RESERVED.find((p) => name.startsWith(p));
  if (prefix) throw new ValidationError(`step names starting with ${prefix} are reserved`);
  return name;
}

/** job.step: the stored result of `name`, or `fn`'s, stored first. */
export async function runStep<T>(io: StepIO, name: string, fn: () => Promise<T> | T): Promise<T> {
  const stepName = checkStepName(name);
  const found = await io.readStep(stepName);
  if (found.found) return found.value as T;
  const value = await fn();
  await io.writeStep(stepName, value);
  return value;
}

/**
 * job.sleep, the n-th of the attempt: its wake time is stored as step `~sleep:n`, then the job snoozes
 * (a SnoozeError the processor lets propagate). The next attempt passes it at once; one woken early
 * (promoted, or a crash between storing the wake time and snoozing) sleeps the rest. `clockNow`: the
 * worker's test clock, if it has one (the snooze's delay runs on it too).
 */
export async function sleepStep(
  io: StepIO,
  n: number,
  ms: number,
  clockNow: () => number = Date.now,
): Promise<void> {
  const name = `${SLEEP_STEP}${n}`;
  const found = await io.readStep(name);
  const now = clockNow();
  if (found.found) {
    const left = Number(found.value) - now;
    if (left > 0) throw new SnoozeError(left);
    return;
  }
  const snooze = new SnoozeError(ms); // validates ms before anything is stored
  await io.writeStep(name, now + ms);
  throw snooze;
}
