/**
 * What an attempt's end becomes: the processor's return or throw, read once, turned into the one row
 * its lane writes. A result is checked as JSON within maxPayloadBytes (else the attempt fails with a
 * typed error); a SnoozeError or RateLimitError is a pause, no failure (or a failure past maxSnoozes);
 * any other failure gets its retry delay from the job's backoff, -1 when it must not be retried. A
 * batch processor's return is read here too, into one outcome per job.
 */
import {
  type AttemptError,
  isA,
  normaliseThrown,
  resultError,
  serializeAttemptError,
} from '../error-normaliser.js';
import { isPauseMs, RateLimitError, SnoozeError, SnoozeLimitError } from '../errors.js';
import { NO_RETRY, retryDelayMs } from '../options/backoff.js';
import { decodeBackoff } from '../store/job-record.js';
import { toJson } from '../validate.js';
import type { CompleteRow, FailRow } from './acker.js';
import type { Job } from './job.js';
import type { ResolvedWorkerOptions } from './options.js';

export type OutcomeRow = { kind: 'complete'; row: CompleteRow } | { kind: 'fail'; row: FailRow };

type RowOptions = Pick<ResolvedWorkerOptions, 'maxPayloadBytes' | 'maxSnoozes' | 'backoffStrategies'>;

/**
 * The row for an attempt that returned `result` (failure undefined) or failed. `onError` hears of a
 * custom backoff strategy that threw or returned nonsense (the job is then retried at once).
 */
export function outcomeRow(
  job: Job<unknown>,
  result: unknown,
  failure: AttemptError | undefined,
  options: RowOptions,
  onError: (err: unknown) => void,
): OutcomeRow {
  if (failure === undefined) {
    try {
      const json =
        result === undefined ? '' : toJson(`result of job ${job.id}`, result, options.maxPayloadBytes);
      return { kind: 'complete', row: { id: job.id, token: job.token, result: json, job, value: result } };
    } catch (err) {
      // Not JSON, too large, or a getter / Proxy trap that throws: a typed error fails the attempt.
      failure = normaliseThrown(resultError(job.id, err));
    }
  }
  const pause = pauseOf(job, failure.error, options.maxSnoozes);
  if (pause === 'limit') {
    failure = normaliseThrown(new SnoozeLimitError(job.id, options.maxSnoozes));
  } else if (pause !== undefined) {
    const row = { id: job.id, token: job.token, retryDelayMs: pause.delayMs, error: pause.kind };
    return { kind: 'fail', row: { ...row, job, cause: pause.cause } };
  }
  let delay = NO_RETRY;
  if (!failure.unrecoverable && !job.isLastAttempt) {
    try {
      const attempt = job.attempt - job.base;
      delay = retryDelayMs(
        decodeBackoff(job.backoff),
        attempt,
        failure.error,
        job as Job,
        options.backoffStrategies,
      );
    } catch (err) {
      onError(err);
      delay = 0;
    }
  }
  const row = { id: job.id, token: job.token, retryDelayMs: delay, error: serializeAttemptError(failure) };
  return { kind: 'fail', row: { ...row, job, cause: failure.error } };
}

/**
 * A SnoozeError or RateLimitError is no failure: its row's `error` is `S` or `R`, and fail.lua gives
 * the attempt back (and counts it in the job's snoozes). 'limit': a snooze or rate limit past the
 * Worker's maxSnoozes (both count, so a RateLimitError(0) thrown on every run cannot loop for ever),
 * which fails the attempt instead. undefined: any other error, and one of these classes whose
 * delayMs is not one its constructor accepts (changed after construction, or a sandbox's error
 * rebuilt with a bad one): an ordinary failure.
 */
function pauseOf(
  job: Job<unknown>,
  e: Error,
  maxSnoozes: number,
): { kind: 'S' | 'R'; delayMs: number; cause: Error } | 'limit' | undefined {
  const kind = isA(e, RateLimitError) ? 'R' : isA(e, SnoozeError) ? 'S' : undefined;
  if (kind === undefined) return undefined;
  let delayMs: unknown;
  try {
    delayMs = (e as SnoozeError).delayMs;
  } catch {
    return undefined; // a getter that throws: not a pause the library made
  }
  if (!isPauseMs(delayMs)) return undefined;
  if (job.snoozes >= maxSnoozes) return 'limit';
  return { kind, delayMs, cause: e };
}

/**
 * A batch processor's return as one outcome per job (undefined each when it returned nothing), or
 * why it is not that. Read once, into a plain array: a Proxy or a getter that throws is a bad return.
 */
export function readBatchOutcomes(outcomes: unknown, count: number): unknown[] | string {
  if (outcomes === undefined) return new Array(count).fill(undefined);
  try {
    if (!Array.isArray(outcomes))
      return `a batch processor must return an array with one outcome per job (${count}), or nothing; got ${typeof outcomes}`;
    if (outcomes.length !== count)
      return `a batch processor must return one outcome per job: ${count} jobs, ${outcomes.length} outcomes`;
    return Array.from(outcomes as unknown[]);
  } catch (err) {
    return `reading a batch processor's outcomes threw: ${normaliseThrown(err).message}`;
  }
}
