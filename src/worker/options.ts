import { DEFAULT_MAX_PAYLOAD_BYTES } from '../defaults.js';
import { ValidationError } from '../errors.js';
import type { BackoffStrategyOf } from '../options/backoff.js';
import { type CommonOptions, type ResolvedCommon, resolveCommon } from '../options/common.js';
import { resolveRetention } from '../options/retention.js';
import { MAX_TIMER_MS } from '../timers.js';
import type { Retention } from '../types.js';
import { checkBool, checkInt, checkKnownKeys, checkObject } from '../validate.js';
import type { Job } from './job.js';

/** A custom backoff strategy: ms before the next attempt, or -1 or false for no retry (dead at once). */
export type BackoffStrategy = BackoffStrategyOf<Job>;

/**
 * Largest `concurrency` and numeric `prefetch`. A claim asks for at most concurrency + prefetch jobs
 * ('auto' prefetches at most max(concurrency, 100)), and an extend call renews every job held, so
 * one script call handles up to 20 000 jobs: the scripts work on any count in slices of 1 000 values,
 * and test/scripts/at-maximum.test.ts runs a worker at these maxima. The bound keeps one claim's Redis time
 * (a few microseconds per job) near 100 ms; beyond it, run more workers.
 */
export const MAX_CONCURRENCY = 10_000;
export const MAX_PREFETCH = 10_000;
/** Largest `batch.size`. A batch worker holds concurrency x size jobs, at most MAX_CONCURRENCY. */
export const MAX_BATCH_SIZE = 1_000;

/**
 * Batch consumption (docs/batches.md "Batch workers"): the processor is given up to `size` jobs at
 * once, `(jobs) => results`. Each job keeps its own lease, attempt, retries and fencing.
 */
export interface WorkerBatchOptions {
  /** Most jobs per call of the processor, 1..MAX_BATCH_SIZE (1 000). */
  size: number;
  /** A batch starts once it has this many jobs (default 1); with fewer it waits up to `waitMs` for more. */
  minSize?: number;
  /** How long a batch smaller than `minSize` waits for more jobs before it starts with what it has. Default 0. */
  waitMs?: number;
}

export interface WorkerOptions extends CommonOptions {
  /** Jobs run at once by this worker. Default 1, at most MAX_CONCURRENCY (10 000). */
  concurrency?: number;
  /** How many finished jobs to keep (applied by workers as jobs finish). Default completed 1 000 / 1 day, dead 10 000 / 30 days. */
  retention?: {
    completed?: { maxCount?: number; maxAgeMs?: number };
    dead?: { maxCount?: number; maxAgeMs?: number };
  };
  /** How often this worker looks for expired leases of crashed workers. Default 5 000 ms. */
  recoverIntervalMs?: number;
  /** Heartbeat period; a worker missing 3 beats drops out of queue.workers(). Default 5 000 ms. */
  heartbeatMs?: number;
  /** Safety poll while idle, in case a wake-up message was missed. Default 5 000 ms. */
  pollIntervalMs?: number;
  /** How long close() waits for running jobs. Default 30 000 ms. */
  closeTimeoutMs?: number;
  /** Named backoff functions for jobs added with `backoff: { type: 'custom', name }`. */
  backoffStrategies?: Record<string, BackoffStrategy>;
  /** Largest accepted processor result, as UTF-8 JSON. Default 512 KiB. */
  maxPayloadBytes?: number;
  /**
   * Jobs claimed ahead of free slots (held under lease) so the next batch is ready when slots free.
   * 'auto' (default): about as many as this worker finishes in 20 ms (none for long jobs, at most
   * max(concurrency, 100)), from a moving average of attempt durations. A number: at most
   * MAX_PREFETCH (10 000).
   */
  prefetch?: number | 'auto';
  /**
   * Rate limit for the whole queue: at most `max` job starts per `durationMs` window across all
   * workers (enforced in the claim script; give every worker of the queue the same limiter).
   */
  limiter?: { max: number; durationMs: number };
  /** Start claiming at construction. Default true; with false, call start(). */
  autostart?: boolean;
  /**
   * How many times one job may be snoozed (SnoozeError, job.sleep) or rate limited (RateLimitError),
   * the two counted together in its `snoozes`; the next one fails the attempt with SnoozeLimitError
   * instead. Default 100, 0..1 000 000.
   */
  maxSnoozes?: number;
  /**
   * Where a processor given as a module (a URL or an absolute path) runs: 'process' (default: a forked
   * child process per slot, the strongest isolation) or 'thread' (a worker thread, cheaper). Refused
   * for a function processor. See docs/sandbox.md.
   */
  sandbox?: 'thread' | 'process';
  /**
   * Heap limit of each sandbox in MiB (a thread's resourceLimits.maxOldGenerationSizeMb, a process's
   * --max-old-space-size); past it the sandbox dies and its attempt fails with SandboxError. Default:
   * Node's own limit. 16..65 536.
   */
  sandboxMemoryMb?: number;
  /**
   * Run the processor on batches of jobs instead of one job at a time (a function processor only):
   * `concurrency` then counts batches, so a worker holds up to concurrency x size jobs.
   */
  batch?: WorkerBatchOptions;
}

export interface ResolvedWorkerOptions extends ResolvedCommon {
  concurrency: number;
  retention: Retention;
  recoverIntervalMs: number;
  heartbeatMs: number;
  pollIntervalMs: number;
  closeTimeoutMs: number;
  backoffStrategies: Readonly<Record<string, BackoffStrategy>>;
  maxPayloadBytes: number;
  prefetch: number | 'auto';
  limiter: { max: number; durationMs: number } | null;
  autostart: boolean;
  maxSnoozes: number;
  /** undefined when not given (a module processor then runs in 'process' sandboxes). */
  sandbox: 'thread' | 'process' | undefined;
  sandboxMemoryMb: number | undefined;
  /** null: one job per call. */
  batch: Readonly<Required<WorkerBatchOptions>> | null;
}

const KEYS = [
  'connection',
  'prefix',
  'partitions',
  'strict',
  'logger',
  'events',
  'concurrency',
  'retention',
  'recoverIntervalMs',
  'heartbeatMs',
  'pollIntervalMs',
  'closeTimeoutMs',
  'backoffStrategies',
  'maxPayloadBytes',
  'prefetch',
  'limiter',
  'autostart',
  'maxSnoozes',
  'sandbox',
  'sandboxMemoryMb',
  'batch',
  'telemetry',
  'clock',
] as const;

function resolveLimiter(value: unknown): { max: number; durationMs: number } | null {
  if (value === undefined) return null;
  const l = checkObject('limiter', value);
  checkKnownKeys('limiter', l, ['max', 'durationMs']);
  return Object.freeze({
    max: checkInt('limiter.max', l.max, 1, 1_000_000),
    durationMs: checkInt('limiter.durationMs', l.durationMs, 1, 24 * 3_600_000),
  });
}

function resolveSandbox(value: unknown): 'thread' | 'process' | undefined {
  if (value === undefined || value === 'thread' || value === 'process') return value;
  throw new ValidationError(`sandbox must be 'thread' or 'process', got ${String(value)}`);
}

function resolveBatch(value: unknown): Readonly<Required<WorkerBatchOptions>> | null {
  if (value === undefined) return null;
  const b = checkObject('batch', value);
  checkKnownKeys('batch', b, ['size', 'minSize', 'waitMs']);
  const size = checkInt('batch.size', b.size, 1, MAX_BATCH_SIZE);
  return Object.freeze({
    size,
    minSize: b.minSize === undefined ? 1 : checkInt('batch.minSize', b.minSize, 1, size),
    waitMs: b.waitMs === undefined ? 0 : checkInt('batch.waitMs', b.waitMs, 0, MAX_TIMER_MS),
  });
}

/** A batch worker's concurrency counts batches: concurrency x batch.size jobs, at most MAX_CONCURRENCY. */
export function checkBatchConcurrency(concurrency: number, batch: { size: number } | null): number {
  if (batch !== null && concurrency * batch.size > MAX_CONCURRENCY)
    throw new ValidationError(
      `concurrency x batch.size must be at most ${MAX_CONCURRENCY} jobs, got ${concurrency} x ${batch.size}`,
    );
  return concurrency;
}

export function resolveWorkerOptions(opts: WorkerOptions): ResolvedWorkerOptions {
  const o = checkObject('Worker options', opts);
  checkKnownKeys('Worker options', o, KEYS);
  const strategies = opts.backoffStrategies ?? {};
  for (const [name, fn] of Object.entries(checkObject('backoffStrategies', strategies))) {
    if (typeof fn !== 'function') throw new ValidationError(`backoffStrategies.${name} must be a function`);
  }
  const int = (name: keyof WorkerOptions, dflt: number, min: number, max?: number) =>
    o[name] === undefined ? dflt : checkInt(name, o[name], min, max);
  const batch = resolveBatch(o.batch);
  return Object.freeze({
    ...resolveCommon('Worker options', opts),
    concurrency: checkBatchConcurrency(int('concurrency', 1, 1, MAX_CONCURRENCY), batch),
    retention: resolveRetention('retention', opts.retention),
    // Durations that reach a timer stop at 2^31-1 ms (MAX_TIMER_MS), the most setTimeout holds.
    recoverIntervalMs: int('recoverIntervalMs', 5_000, 10, MAX_TIMER_MS),
    heartbeatMs: int('heartbeatMs', 5_000, 10, MAX_TIMER_MS),
    pollIntervalMs: int('pollIntervalMs', 5_000, 10, MAX_TIMER_MS),
    closeTimeoutMs: int('closeTimeoutMs', 30_000, 0, MAX_TIMER_MS),
    backoffStrategies: Object.freeze({ ...strategies }),
    maxPayloadBytes: int('maxPayloadBytes', DEFAULT_MAX_PAYLOAD_BYTES, 1),
    prefetch:
      o.prefetch === undefined || o.prefetch === 'auto'
        ? 'auto'
        : checkInt('prefetch', o.prefetch, 0, MAX_PREFETCH),
    limiter: resolveLimiter(o.limiter),
    autostart: o.autostart === undefined ? true : checkBool('autostart', o.autostart),
    maxSnoozes: int('maxSnoozes', 100, 0, 1_000_000),
    sandbox: resolveSandbox(o.sandbox),
    sandboxMemoryMb:
      o.sandboxMemoryMb === undefined
        ? undefined
        : checkInt('sandboxMemoryMb', o.sandboxMemoryMb, 16, 65_536),
    batch,
  });
}
