/**
 * Library defaults. A job record stores an option only when it differs from these (an empty field
 * means "the default"), which keeps a waiting job small in Redis. Scripts receive the defaults they
 * need as ARGV from here, so there is one source of truth.
 */
import type { BackoffOptions } from './types.js';

export const DEFAULT_PREFIX = 'surety';
export const DEFAULT_MAX_ATTEMPTS = 3;
export const DEFAULT_LEASE_MS = 30_000;
/**
 * Lost leases without a start mark (prefetched and never run, a claim reply lost or read too late, or a
 * worker killed within a round trip of starting the processor) that a job may have before its worker
 * confirms its start with Redis before calling the processor. Recovery returns every unmarked loss free
 * (a job that never ran must not die of its worker's faults); the confirmed start is what still charges
 * a processor that kills its worker at once. See recover.lua and src/worker/runner.ts.
 */
export const FREE_RETURNS = 3;
export const DEFAULT_BACKOFF: Readonly<BackoffOptions> = Object.freeze({
  type: 'exponential',
  delayMs: 1_000,
  maxDelayMs: 3_600_000,
  jitter: true,
});
export const DEFAULT_MAX_PAYLOAD_BYTES = 512 * 1024;
export const DEFAULT_RETENTION = Object.freeze({
  completed: Object.freeze({ maxCount: 1_000, maxAgeMs: 24 * 3_600_000 }),
  dead: Object.freeze({ maxCount: 10_000, maxAgeMs: 30 * 24 * 3_600_000 }),
});
/** Entries kept (approximately) in a queue's lifecycle event stream; each entry covers a batch. */
export const DEFAULT_EVENTS_MAX_LEN = 10_000;
/**
 * The most jobs one addBulk call takes. Each partition's share goes in one script call (atomic), which
 * works through it in chunks of at most 1 000 values per Redis command.
 */
export const MAX_BULK = 10_000;
/** queue.flow and a flow cancel read at most this many jobs unless told otherwise (`maxNodes`)... */
export const DEFAULT_FLOW_NODES = 500;
/** ...and never more than this many. */
export const MAX_FLOW_NODES = 10_000;
/** Upper bound of jobs moved per call by promotion, recovery and retention trimming, to keep scripts short. */
export const SCRIPT_BATCH_LIMIT = 1_000;
/**
 * The most bytes of durable step results (job.step, as stored: `name \t json` lines) one job may hold:
 * a step that would pass it fails its attempt with PayloadTooLargeError.
 */
export const MAX_STEPS_BYTES = 1024 * 1024;
/** Job priorities run from -MAX_PRIORITY (first) to MAX_PRIORITY (last); 0 is the default. */
export const MAX_PRIORITY = 1_000_000;
/** The largest `maxAttempts` a job may have. */
export const MAX_ATTEMPTS = 1_000;
/** Log lines kept per job (job.log, queue.addJobLog): the oldest go first. */
export const MAX_LOG_LINES = 100;
/** Longest log line kept: a longer one is cut to this many UTF-16 units. */
export const MAX_LOG_LINE_CHARS = 2_000;
/** Longest error stack kept per attempt. */
export const MAX_STACK_CHARS = 4_096;
export const MAX_MESSAGE_CHARS = 2_048;
