/**
 * Backoff, in one place: the `backoff` job option, checked at add, and the delay it gives a failed job
 * before its next attempt, computed by the worker as the attempt fails (retryDelayMs).
 */
import { DEFAULT_BACKOFF } from '../defaults.js';
import { ValidationError } from '../errors.js';
import type { BackoffOptions } from '../types.js';
import { checkBool, checkInt, checkKnownKeys, checkObject, show } from '../validate.js';

const BACKOFF_KEYS = ['type', 'delayMs', 'maxDelayMs', 'jitter', 'name'] as const;
/** The longest delay a job can be given (delayMs, backoff delays): 10 years. Stored in Redis, never a timer. */
export const MAX_DELAY_MS = 10 * 365 * 24 * 3_600_000;
export function checkBackoff(name: string, value: unknown): BackoffOptions {
  const b = checkObject(name, value);
  checkKnownKeys(name, b, BACKOFF_KEYS);
  if (b.type !== 'fixed' && b.type !== 'exponential' && b.type !== 'custom') {
    throw new ValidationError(`${name}.type must be 'fixed', 'exponential' or 'custom', got ${show(b.type)}`);
  }
  const out: BackoffOptions = { type: b.type, jitter: false };
  if (b.type === 'custom') {
    if (typeof b.name !== 'string' || !/^[A-Za-z0-9_-]{1,50}$/.test(b.name)) {
      throw new ValidationError(
        `${name}.name must name a Worker backoffStrategies entry ([A-Za-z0-9_-]{1,50}), got ${show(b.name)}`,
      );
    }
    out.name = b.name;
  } else {
    out.delayMs = checkInt(`${name}.delayMs`, b.delayMs ?? DEFAULT_BACKOFF.delayMs, 0, MAX_DELAY_MS);
    if (b.type === 'exponential') {
      out.maxDelayMs = checkInt(
        `${name}.maxDelayMs`,
        b.maxDelayMs ?? DEFAULT_BACKOFF.maxDelayMs,
        0,
        MAX_DELAY_MS,
      );
    } else if (b.maxDelayMs !== undefined) {
      throw new ValidationError(`${name}.maxDelayMs applies to exponential backoff only`);
    }
  }
  if (b.jitter !== undefined) out.jitter = checkBool(`${name}.jitter`, b.jitter);
  return Object.freeze(out);
}

/** What retryDelayMs returns when the job must not be retried: its failure ends it dead. */
export const NO_RETRY = -1;

/**
 * A Worker's custom strategy (its `backoffStrategies[name]`): the delay in ms before the next attempt,
 * or `-1` or `false`: do not retry, the job ends dead with this attempt's error. `job` is the Worker's Job.
 */
export type BackoffStrategyOf<J> = (attempt: number, error: Error, job: J) => number | false;

/**
 * Delay before the next attempt of a failed job (ms), or NO_RETRY. `attempt` counts within the
 * current budget (from 1), so a manual retry starts the curve again. A custom strategy that is missing,
 * or returns anything but a finite number >= 0, -1 or false, throws a ValidationError (the worker
 * reports it and retries at once: a strategy never decides an outcome by misbehaving).
 */
export function retryDelayMs<J>(
  b: BackoffOptions,
  attempt: number,
  error: Error,
  job: J & { id: string },
  strategies: Readonly<Record<string, BackoffStrategyOf<J>>>,
): number {
  let delay: number;
  if (b.type === 'custom') {
    const fn = strategies[b.name ?? ''];
    if (!fn)
      throw new ValidationError(
        `job ${job.id} uses backoff strategy ${JSON.stringify(b.name)}, which this Worker's backoffStrategies does not define`,
      );
    const returned: unknown = fn(attempt, error, job);
    if (returned === false || returned === NO_RETRY) return NO_RETRY;
    if (typeof returned !== 'number' || !Number.isFinite(returned) || returned < 0) {
      throw new ValidationError(
        `backoff strategy ${JSON.stringify(b.name)} returned ${show(returned)}; it must return a number of ms >= 0, or -1 or false for no retry`,
      );
    }
    delay = returned;
  } else if (b.type === 'fixed') {
    delay = b.delayMs ?? 0;
  } else {
    delay = Math.min((b.delayMs ?? 0) * 2 ** (attempt - 1), b.maxDelayMs ?? Number.POSITIVE_INFINITY);
  }
  if (b.jitter) delay = delay * (0.5 + Math.random() * 0.5);
  // A custom strategy may return any finite number: hold it to the longest delay a job can have.
  return Math.round(Math.min(delay, MAX_DELAY_MS));
}
