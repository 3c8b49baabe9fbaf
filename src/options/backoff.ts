/**
 * The `backoff` job option, checked: how long a failed job waits before its next attempt (the delay
 * itself is computed by the worker, src/worker/backoff.ts).
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
