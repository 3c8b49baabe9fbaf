/**
 * Every error Surety throws or emits. Each class has a stable string `code` (documented in
 * docs/errors.md; a test fails when a code is missing there), so callers can branch on
 * `err instanceof X` or `err.code`.
 */
import type { JobAttemptError } from './types.js';

export class SuretyError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** An option, a queue name or a job id is out of range or of the wrong type. Nothing was written. */
export class ValidationError extends SuretyError {
  constructor(message: string, code = 'ERR_INVALID_OPTION') {
    super(code, message);
  }
}

/** Job data (or a processor's result) is not plain JSON: functions, BigInt, NaN, Dates, class instances, cycles... */
export class NotSerializableError extends ValidationError {
  constructor(message: string) {
    super(message, 'ERR_NOT_SERIALIZABLE');
  }
}

/** The serialised payload is larger than `maxPayloadBytes`. */
export class PayloadTooLargeError extends ValidationError {
  constructor(message: string) {
    super(message, 'ERR_PAYLOAD_TOO_LARGE');
  }
}

/** Thrown by a processor to end a job at once in the dead set, without further attempts. */
export class UnrecoverableError extends SuretyError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_UNRECOVERABLE', message, options);
  }
}

/** The most a processor may snooze a job or pause its queue for: 10 years, like delayMs. */
const MAX_PAUSE_MS = 10 * 365 * 24 * 3_600_000;

/** A delay SnoozeError and RateLimitError accept: an integer from 0 to 10 years. */
export function isPauseMs(delayMs: unknown): delayMs is number {
  return typeof delayMs === 'number' && Number.isInteger(delayMs) && delayMs >= 0 && delayMs <= MAX_PAUSE_MS;
}

function checkPauseMs(what: string, delayMs: unknown): number {
  if (!isPauseMs(delayMs)) {
    throw new ValidationError(
      `${what} delayMs must be an integer from 0 to ${MAX_PAUSE_MS}, got ${String(delayMs)}`,
    );
  }
  return delayMs;
}

/**
 * Thrown by a processor to put its job back, delayed by `delayMs`, without spending an attempt and
 * without an error entry (River's JobSnooze). The job's `snoozes` count grows; past the Worker's
 * `maxSnoozes` the attempt fails instead, with SnoozeLimitError.
 */
export class SnoozeError extends SuretyError {
  readonly delayMs: number;
  constructor(delayMs: number) {
    super('ERR_SNOOZED', `snoozed for ${String(delayMs)} ms`);
    this.delayMs = checkPauseMs('SnoozeError', delayMs);
  }
}

/**
 * The attempt snoozed (SnoozeError, job.sleep) or hit a rate limit (RateLimitError) once more than
 * the Worker's `maxSnoozes` allows (the two are counted together): it fails like any error.
 */
export class SnoozeLimitError extends SuretyError {
  constructor(
    readonly jobId: string,
    readonly maxSnoozes: number,
  ) {
    super(
      'ERR_SNOOZE_LIMIT',
      `job ${JSON.stringify(jobId)} was snoozed or rate limited ${maxSnoozes} times already (Worker maxSnoozes)`,
    );
  }
}

/**
 * Thrown by a processor when the service it calls says "too many requests" (HTTP 429): the job goes
 * back to waiting without spending an attempt, and the queue's workers claim nothing for `delayMs`
 * (only the job's group's jobs, when the job has a group). It counts as a snooze toward the Worker's
 * `maxSnoozes`. See docs/job-control.md.
 */
export class RateLimitError extends SuretyError {
  readonly delayMs: number;
  constructor(delayMs: number, message?: string) {
    super('ERR_RATE_LIMITED', message ?? `rate limited for ${String(delayMs)} ms`);
    this.delayMs = checkPauseMs('RateLimitError', delayMs);
  }
}

export class JobNotFoundError extends SuretyError {
  constructor(
    readonly jobId: string,
    /** The queue looked in, when it is not the caller's own (a dependsOn `{ queue, id }` parent). */
    readonly queue?: string,
  ) {
    super(
      'ERR_JOB_NOT_FOUND',
      `job ${JSON.stringify(jobId)} ${queue === undefined ? '' : `of queue ${JSON.stringify(queue)} `}does not exist (never added, removed, or trimmed by retention)`,
    );
  }
}

/** queue.addBatch was given the id of a batch that exists (unfinished, or finished within its retention). Nothing was written. */
export class BatchExistsError extends SuretyError {
  constructor(readonly batchId: string) {
    super(
      'ERR_BATCH_EXISTS',
      `batch ${JSON.stringify(batchId)} exists already; give the new batch another id`,
    );
  }
}

/** The job is not in a state that allows the operation (e.g. retrying a waiting job, removing an active one). */
export class InvalidStateError extends SuretyError {
  constructor(
    readonly jobId: string,
    readonly state: string,
    operation: string,
  ) {
    super('ERR_INVALID_STATE', `cannot ${operation} job ${JSON.stringify(jobId)}: it is ${state}`);
  }
}

/** queue.obliterate() found active jobs and deleted nothing: stop the workers, or pass `{ force: true }`. */
export class QueueActiveError extends SuretyError {
  constructor(
    queue: string,
    readonly active: number,
  ) {
    const what = `queue ${JSON.stringify(queue)} has ${active} active job(s)`;
    super('ERR_QUEUE_ACTIVE', `cannot obliterate: ${what}; stop its workers or pass { force: true }`);
  }
}

/**
 * A worker's completion or failure of a job was refused because its lease had been lost: the job was
 * recovered (and may be running elsewhere), so the newer attempt's outcome stands. Emitted as an `error` event.
 */
export class StaleJobError extends SuretyError {
  constructor(
    readonly jobId: string,
    readonly attempt: number,
    readonly reason: string,
  ) {
    super(
      'ERR_STALE_JOB',
      `refused the outcome of job ${JSON.stringify(jobId)} attempt ${attempt}: ${reason}`,
    );
  }
}

/** Recorded as a job's attempt error when its lease expired (the worker crashed, stalled or was cut off). */
export class LeaseExpiredError extends SuretyError {
  constructor(message: string) {
    super('ERR_LEASE_EXPIRED', message);
  }
}

/** An attempt ran longer than its job's `timeoutMs`; it fails and is retried like any failure. */
export class TimeoutError extends SuretyError {
  constructor(jobId: string, timeoutMs: number) {
    super('ERR_TIMEOUT', `job ${JSON.stringify(jobId)} did not finish within its timeout of ${timeoutMs} ms`);
  }
}

/**
 * A batch processor (Worker option `batch`) returned something other than one outcome per job (an
 * array as long as the batch) or nothing: every job of the batch fails with this error, and is retried.
 */
export class BatchResultError extends SuretyError {
  constructor(message: string) {
    super('ERR_BATCH_RESULT', message);
  }
}

/** Recorded as the error of a job ended by `queue.cancel`; also the reason of its job.signal. */
export class CancelledError extends SuretyError {
  constructor(jobId: string) {
    super('ERR_CANCELLED', `job ${JSON.stringify(jobId)} was cancelled`);
  }
}

/** Recorded as the error of a job that had not started by its expiry (add option `expireAt` or `ttlMs`). */
export class ExpiredError extends SuretyError {
  constructor(jobId: string, expireAt: number) {
    super('ERR_EXPIRED', `job ${JSON.stringify(jobId)} expired at ${expireAt} (epoch ms) before it started`);
  }
}

/** Recorded as the error of a job whose parent (dependsOn) ended dead. */
export class DependencyFailedError extends SuretyError {
  /**
   * `kind` 'child': job.waitForChildren found child `dependencyId` dead (a processor that lets it
   * propagate ends its job dead at once: a retry would meet the same dead child).
   */
  constructor(jobId: string, dependencyId: string, kind: 'parent' | 'child' = 'parent') {
    super(
      'ERR_DEPENDENCY_FAILED',
      kind === 'parent'
        ? `job ${JSON.stringify(jobId)} cannot run: parent job ${JSON.stringify(dependencyId)} is dead`
        : `job ${JSON.stringify(jobId)}: child job ${JSON.stringify(dependencyId)} is dead`,
    );
  }
}

/**
 * job.waitForSignal ran past its `timeoutMs` without the signal: the wait throws this, on the run
 * after the deadline (the job was parked until then). Catch it to carry on without the signal, or let
 * it fail the attempt like any error.
 */
export class SignalTimeoutError extends SuretyError {
  constructor(
    readonly jobId: string,
    readonly signalName: string,
  ) {
    super(
      'ERR_SIGNAL_TIMEOUT',
      `job ${JSON.stringify(jobId)} waited for signal ${JSON.stringify(signalName)} past its timeout`,
    );
  }
}

/**
 * Thrown by job.waitForSignal when the job was parked: it no longer runs here, holds no slot or lease,
 * and runs again from the top when the signal comes (or its wait times out). Let it propagate: the
 * processor's outcome after it is ignored, and work it does meanwhile is not fenced by a lease.
 */
export class ParkedError extends SuretyError {
  constructor(
    readonly jobId: string,
    readonly waitingFor: string,
  ) {
    super('ERR_PARKED', `job ${JSON.stringify(jobId)} is parked, waiting for ${waitingFor}`);
  }
}

/** `queue.waitFor` ran out of time before the job finished. */
export class WaitTimeoutError extends SuretyError {
  constructor(
    readonly jobId: string,
    timeoutMs: number,
  ) {
    super('ERR_WAIT_TIMEOUT', `job ${JSON.stringify(jobId)} did not finish within ${timeoutMs} ms`);
  }
}

/** `queue.waitFor` on a job that ended dead: carries every attempt's error. */
export class JobFailedError extends SuretyError {
  constructor(
    readonly jobId: string,
    readonly errors: readonly JobAttemptError[],
  ) {
    const last = errors[errors.length - 1];
    super(
      'ERR_JOB_DEAD',
      `job ${JSON.stringify(jobId)} is dead: ${last ? last.message : 'no error recorded'}`,
    );
  }
}

/** The Redis server cannot safely run Surety (too old, or an eviction policy that may delete jobs under `strict`). */
export class RedisConfigError extends SuretyError {
  constructor(message: string) {
    super('ERR_REDIS_CONFIG', message);
  }
}

/**
 * Redis is over `maxmemory` (with `noeviction`) and refused a call that would add work (add, addBulk,
 * schedule, retry, the next occurrence of a schedule). Nothing was written. The scripts that move
 * accepted jobs forward (claim, complete, fail, extend, recover...) still run, so workers drain the
 * backlog; retention then frees memory and adds are accepted again.
 */
export class RedisFullError extends SuretyError {
  constructor(message: string) {
    super('ERR_REDIS_OOM', message);
  }
}

/**
 * The RedisFullError for an `OOM ...` reply of Redis (what over-maxmemory refusals start with), else
 * null. `what` names the refused call. The reply is not kept as `cause`: an ioredis ReplyError carries
 * the whole command, job payloads included.
 */
export function redisFullError(err: unknown, what: string): RedisFullError | null {
  const message = err instanceof Error ? err.message : '';
  if (!/^OOM\b/.test(message)) return null;
  return new RedisFullError(
    `Redis refused ${what}: its used memory is over maxmemory, and nothing was written. Workers still claim and complete jobs, which frees memory as retention deletes finished ones; retry later, or raise maxmemory (Redis said: ${message.slice(0, 200)})`,
  );
}

/**
 * The queue is recorded in Redis with another partition count than this client's `partitions`
 * option (or was moved to another count by `surety repartition`). Nothing was written.
 */
export class PartitionMismatchError extends SuretyError {
  constructor(
    readonly queue: string,
    readonly configured: number,
    readonly recorded: number,
  ) {
    super(
      'ERR_PARTITIONS_MISMATCH',
      `queue ${JSON.stringify(queue)} has ${recorded} partition(s) in Redis but this client was configured with partitions: ${configured}. Use partitions: ${recorded}, or change the count with \`surety repartition\` (see docs/scaling.md).`,
    );
  }
}

/** Jobs that depend on each other must live in one partition; these parents are in different ones. */
export class CrossPartitionError extends ValidationError {
  constructor(message: string) {
    super(message, 'ERR_CROSS_PARTITION');
  }
}

/** `durability.waitReplicas` was set and fewer replicas acknowledged the write within its timeout. */
export class DurabilityError extends SuretyError {
  constructor(
    message: string,
    readonly acked: number,
    readonly wanted: number,
  ) {
    super('ERR_DURABILITY', message);
  }
}

/** A method was called on a closed Queue or Worker. */
export class ClosedError extends SuretyError {
  constructor(what: string) {
    super('ERR_CLOSED', `${what} is closed`);
  }
}

/** A background Redis call of a worker failed (connection lost, timeout); the worker retries by itself. */
export class ConnectionError extends SuretyError {
  constructor(message: string, cause: unknown) {
    super('ERR_CONNECTION', message, { cause });
  }
}

/**
 * A Worker event listener (`completed`, `failed`, `leaseLost`, `recovered`) threw or, when async,
 * rejected. The engine is not disturbed (the outcome was recorded once); this is emitted as an `error`
 * event, with the listener's exception as `cause`.
 */
export class ListenerError extends SuretyError {
  constructor(
    readonly event: string,
    message: string,
    cause: unknown,
  ) {
    super('ERR_LISTENER', `a '${event}' listener threw: ${message}`, { cause });
  }
}

/**
 * A call into OpenTelemetry (the tracer provider, a span, the context manager) threw. Surety went on
 * without that piece of the trace; what became of the job is unchanged. Reported once per kind of call
 * (`call`, e.g. 'startSpan' or 'span.end') per Queue or Worker: a Worker's `error` event, else the
 * logger. `cause` holds what the call threw.
 */
export class TelemetryError extends SuretyError {
  constructor(
    readonly call: string,
    message: string,
    cause: unknown,
  ) {
    super(
      'ERR_TELEMETRY',
      `OpenTelemetry's ${call} threw: ${message} (tracing goes on without it; reported once)`,
      { cause },
    );
  }
}

/** The repartition cannot start or go on (jobs active or blocked, or another count in progress). */
export class RepartitionError extends SuretyError {
  constructor(message: string) {
    super('ERR_REPARTITION', message);
  }
}

/** redis-server is not installed (or not on PATH); `installHint` says how to get it on this platform. */
export class RedisServerNotFoundError extends SuretyError {
  constructor(
    binary: string,
    readonly installHint: string,
  ) {
    super('ERR_REDIS_NOT_INSTALLED', `${binary} was not found on PATH. ${installHint}`);
  }
}

/**
 * surety/testing: env.advance or env.drain waited `settleTimeoutMs` (real time) and the workers still
 * had work (a processor that never returns, jobs no worker can claim); `pending` says what was left.
 */
export class NotSettledError extends SuretyError {
  constructor(
    readonly pending: string[],
    timeoutMs: number,
    operation: string,
  ) {
    super('ERR_NOT_SETTLED', `${operation} did not settle within ${timeoutMs} ms: ${pending.join('; ')}`);
  }
}

/**
 * A sandboxed processor's sandbox (worker thread or child process) failed the attempt: its module did
 * not load, or it exited, was killed or ran out of memory while running the job. The attempt fails
 * like any failure (retried with backoff); the sandbox is replaced. See docs/sandbox.md.
 */
export class SandboxError extends SuretyError {
  constructor(message: string) {
    super('ERR_SANDBOX', message);
  }
}

/** importFromBullMQ (`surety import-bullmq`) cannot start: no BullMQ queue of that name, for one. */
export class ImportError extends SuretyError {
  constructor(message: string) {
    super('ERR_IMPORT', message);
  }
}

/**
 * surety/postgres: a Postgres call of an outbox relay failed (connection lost, server restarting,
 * statement refused). Emitted as the relay's `error` event with the driver's error as `cause`; the relay
 * backs off and tries again by itself, and the rows it held stay in the outbox.
 */
export class PostgresError extends SuretyError {
  constructor(message: string, cause: unknown) {
    super('ERR_POSTGRES', message, { cause });
  }
}

/** `surety relay` needs node-postgres (`pg`), an optional peer dependency that is not installed. */
export class PostgresNotInstalledError extends SuretyError {
  constructor(cause?: unknown) {
    super(
      'ERR_POSTGRES_NOT_INSTALLED',
      "the Postgres client 'pg' (node-postgres 8.x) is not installed: npm install pg",
      { cause },
    );
  }
}

/**
 * surety/postgres: a table Surety keeps in PostgreSQL is missing (its migration was never run), or
 * was migrated by a newer version of Surety than this one. Nothing was written.
 */
export class PostgresSchemaError extends SuretyError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ERR_POSTGRES_SCHEMA', message, options);
  }
}
