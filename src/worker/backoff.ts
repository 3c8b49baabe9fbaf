/** Delay before the next attempt of a failed job. */

import { ValidationError } from '../errors.js';
import { MAX_DELAY_MS } from '../options/backoff.js';
import { decodeBackoff } from '../store/job-record.js';
import type { Job } from './job.js';

export type BackoffStrategy = (attempt: number, error: Error, job: Job) => number;

/** `attempt` counts within the current budget (from 1), so a manual retry starts the curve again. */
export function retryDelayMs(
  job: Job,
  error: Error,
  strategies: Readonly<Record<string, BackoffStrategy>>,
): number {
  const b = decodeBackoff(job.backoff);
  const attempt = job.attempt - job.base;
  let delay: number;
  if (b.type === 'custom') {
    const fn = strategies[b.name ?? ''];
    if (!fn)
      throw new ValidationError(
        `job ${job.id} uses backoff strategy ${JSON.stringify(b.name)}, which this Worker's backoffStrategies does not define`,
      );
    delay = fn(attempt, error, job);
    if (!Number.isFinite(delay) || delay < 0) {
      throw new ValidationError(
        `backoff strategy ${JSON.stringify(b.name)} returned ${delay}; it must return a number of ms >= 0`,
      );
    }
  } else if (b.type === 'fixed') {
    delay = b.delayMs ?? 0;
  } else {
    delay = Math.min((b.delayMs ?? 0) * 2 ** (attempt - 1), b.maxDelayMs ?? Number.POSITIVE_INFINITY);
  }
  if (b.jitter) delay = delay * (0.5 + Math.random() * 0.5);
  // A custom strategy may return any finite number: hold it to the longest delay a job can have.
  return Math.round(Math.min(delay, MAX_DELAY_MS));
}
