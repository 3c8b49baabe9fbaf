/**
 * Options of Queue, Worker and add(): documented defaults, validated once, frozen.
 */

import { type Clock, checkClock } from '../clock.js';
import {
  DEFAULT_BACKOFF,
  DEFAULT_EVENTS_MAX_LEN,
  DEFAULT_LEASE_MS,
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_MAX_PAYLOAD_BYTES,
  DEFAULT_PREFIX,
} from '../defaults.js';
import { ValidationError } from '../errors.js';
import type { ConnectionOption, Logger } from '../redis/client.js';
import type { ResolvedJobOptions } from '../store/job-record.js';
import { resolveTelemetry, type TelemetryOption, type Tracing } from '../telemetry/tracing.js';
import { MAX_TIMER_MS } from '../timers.js';
import type { JobOptions } from '../types.js';
import {
  checkBool,
  checkInt,
  checkJobId,
  checkKnownKeys,
  checkLabel,
  checkObject,
  checkPartitions,
  checkPrefix,
  checkString,
  show,
} from '../validate.js';
import { checkBackoff, MAX_DELAY_MS } from './backoff.js';
import { resolveKeep } from './retention.js';

export interface CommonOptions {
  connection?: ConnectionOption;
  /** Key prefix; every key of a queue is `{prefix:queue}:...`. Default 'surety'. */
  prefix?: string;
  /** Refuse to start on a Redis whose maxmemory-policy may evict jobs (default: warn). */
  strict?: boolean;
  /** Where warnings go. Default: console. */
  logger?: Logger;
  /**
   * Lifecycle events appended to the queue's capped Redis Stream by this client's operations
   * (read them with queue.events()). `false` turns them off; default on, capped near 10 000 entries.
   */
  events?: boolean | { maxLen: number };
  /**
   * Spread this queue over N hash tags (`{prefix:queue:0}` ... `{prefix:queue:N-1}`) so a Redis Cluster
   * serves it from several masters. Every Queue and Worker of the queue must use the same count: it is
   * recorded in Redis and another count is refused (PartitionMismatchError). 'auto' uses the recorded
   * count (1 for a queue that has none): what admin tools want. Default 1. See docs/scaling.md.
   */
  partitions?: number | 'auto';
  /**
   * OpenTelemetry spans (docs/telemetry.md): on by default when `@opentelemetry/api` is installed
   * (spans go to the SDK the application registered; none registered: no-op). `false` turns them off;
   * `{ tracerProvider }` sends them to that provider instead of the global one.
   */
  telemetry?: TelemetryOption;
  /** For tests only: a virtual clock (surety/testing) instead of Redis's; see docs/testing.md. */
  clock?: Clock;
}

export interface QueueOptions extends CommonOptions {
  /** Defaults for every job added through this Queue. */
  defaults?: Omit<JobOptions, 'id' | 'delayMs' | 'runAt'>;
  /** Largest accepted job payload, as UTF-8 JSON. Default 512 KiB. */
  maxPayloadBytes?: number;
  /**
   * Make add() wait until `waitReplicas` replicas have the job (Redis WAIT), up to `timeoutMs`
   * (default 1 000). If fewer confirm, add() rejects with DurabilityError (the job was added on the
   * master but may be lost if it fails now). Default: no wait (Redis's asynchronous replication).
   */
  durability?: { waitReplicas: number; timeoutMs?: number };
}

const JOB_OPTION_KEYS = [
  'id',
  'name',
  'expireAt',
  'ttlMs',
  'keep',
  'delayMs',
  'runAt',
  'priority',
  'maxAttempts',
  'leaseMs',
  'backoff',
  'timeoutMs',
  'dependsOn',
  'ignoreDependencyFailure',
  'partitionKey',
  'group',
  'dedupe',
] as const;
/** The job options a Queue's `defaults` and a schedule's occurrence `opts` may set. */
export const DEFAULTS_KEYS = ['priority', 'maxAttempts', 'leaseMs', 'backoff', 'timeoutMs'] as const;
/**
 * The latest runAt (epoch ms, in the year 5138). Lua writes numbers into the job record with 14
 * significant digits, so a later time would be stored rounded (runAt 100590780964621 read back as
 * ...620); every time up to here has at most 14 digits and is stored exactly.
 */
export const MAX_RUN_AT = 99_999_999_999_999;

function checkJobFields(
  name: string,
  o: Record<string, unknown>,
  base: ResolvedJobOptions,
): ResolvedJobOptions {
  return Object.freeze({
    priority:
      o.priority === undefined
        ? base.priority
        : checkInt(`${name}priority`, o.priority, -1_000_000, 1_000_000),
    maxAttempts:
      o.maxAttempts === undefined
        ? base.maxAttempts
        : checkInt(`${name}maxAttempts`, o.maxAttempts, 1, 1_000),
    leaseMs:
      o.leaseMs === undefined ? base.leaseMs : checkInt(`${name}leaseMs`, o.leaseMs, 100, 24 * 3_600_000),
    backoff: o.backoff === undefined ? base.backoff : checkBackoff(`${name}backoff`, o.backoff),
    timeoutMs:
      o.timeoutMs === undefined
        ? base.timeoutMs
        : checkInt(`${name}timeoutMs`, o.timeoutMs, 1, 24 * 3_600_000),
  });
}

export const LIBRARY_JOB_DEFAULTS: ResolvedJobOptions = Object.freeze({
  priority: 0,
  maxAttempts: DEFAULT_MAX_ATTEMPTS,
  leaseMs: DEFAULT_LEASE_MS,
  backoff: DEFAULT_BACKOFF,
  timeoutMs: 0,
});

export interface ResolvedQueueOptions {
  prefix: string;
  /** 0 = 'auto' (the count recorded in Redis). */
  partitions: number;
  eventsMaxLen: number;
  strict: boolean;
  logger: Logger;
  /** Spans of add calls (telemetry option). */
  tracing: Tracing;
  clock: Clock | undefined;
  defaults: ResolvedJobOptions;
  maxPayloadBytes: number;
  /** Replicas add() waits for (0: none) and for how long. */
  durability: { waitReplicas: number; timeoutMs: number };
}

export function resolveCommon(
  name: string,
  o: CommonOptions,
): {
  prefix: string;
  strict: boolean;
  logger: Logger;
  eventsMaxLen: number;
  partitions: number;
  tracing: Tracing;
  clock: Clock | undefined;
} {
  const logger = o.logger === undefined ? console : checkLogger(`${name}.logger`, o.logger);
  return {
    clock: checkClock(`${name}.clock`, o.clock),
    partitions: checkPartitions(o.partitions),
    eventsMaxLen: resolveEvents(o.events),
    prefix: o.prefix === undefined ? DEFAULT_PREFIX : checkPrefix(o.prefix),
    strict: o.strict === undefined ? false : checkBool(`${name}.strict`, o.strict),
    logger,
    tracing: resolveTelemetry(name, o.telemetry, logger),
  };
}

/** A logger is used only when something goes wrong: check it now, not when the warning comes. */
function checkLogger(name: string, value: unknown): Logger {
  if (
    value === null ||
    typeof value !== 'object' ||
    typeof (value as { warn?: unknown }).warn !== 'function'
  ) {
    throw new ValidationError(`${name} must be an object with a warn(message) method, got ${show(value)}`);
  }
  return value as Logger;
}

function resolveEvents(value: unknown): number {
  if (value === undefined || value === true) return DEFAULT_EVENTS_MAX_LEN;
  if (value === false) return 0;
  const e = checkObject('events', value);
  checkKnownKeys('events', e, ['maxLen']);
  return checkInt('events.maxLen', e.maxLen, 1, 10_000_000);
}

export function resolveQueueOptions(opts: QueueOptions): ResolvedQueueOptions {
  const o = checkObject('Queue options', opts);
  checkKnownKeys('Queue options', o, [
    'connection',
    'prefix',
    'strict',
    'logger',
    'events',
    'defaults',
    'maxPayloadBytes',
    'partitions',
    'durability',
    'telemetry',
    'clock',
  ]);
  let defaults = LIBRARY_JOB_DEFAULTS;
  if (opts.defaults !== undefined) {
    const d = checkObject('defaults', opts.defaults);
    checkKnownKeys('defaults', d, DEFAULTS_KEYS);
    defaults = checkJobFields('defaults.', d, LIBRARY_JOB_DEFAULTS);
  }
  return Object.freeze({
    ...resolveCommon('Queue options', opts),
    defaults,
    maxPayloadBytes:
      opts.maxPayloadBytes === undefined
        ? DEFAULT_MAX_PAYLOAD_BYTES
        : checkInt('maxPayloadBytes', opts.maxPayloadBytes, 1, 512 * 1024 * 1024),
    durability: resolveDurability(opts.durability),
  });
}

function resolveDurability(value: unknown): { waitReplicas: number; timeoutMs: number } {
  if (value === undefined) return { waitReplicas: 0, timeoutMs: 0 };
  const d = checkObject('durability', value);
  checkKnownKeys('durability', d, ['waitReplicas', 'timeoutMs']);
  return {
    waitReplicas: checkInt('durability.waitReplicas', d.waitReplicas, 1, 100),
    timeoutMs: checkInt('durability.timeoutMs', d.timeoutMs ?? 1_000, 1, 60_000),
  };
}

export interface ResolvedAdd extends ResolvedJobOptions {
  id: string;
  delayMs: string;
  runAt: string;
  /** Parent ids joined by newlines ('' = none). */
  dependsOn: string;
  /** 'i' = run even if a parent dies, 's' = fail with it, '' = no parents. */
  depMode: string;
  /** Jobs with one partitionKey share a partition ('' = by group, then dedupe key, then id). */
  partitionKey: string;
  /** '' = no group. */
  group: string;
  /** '' = no dedupe. */
  dedupeKey: string;
  /** 't' throttle, 'd' debounce, '' none. */
  dedupeMode: string;
  /** '' = no ttl. */
  dedupeTtlMs: string;
  /** '' = no name. */
  name: string;
  /** Epoch ms ('' = never expires). */
  expireAt: string;
  /** ms after the add, computed by the add script on Redis's clock ('' = none). */
  ttlMs: string;
  /** 'c', 'x', 'cx' or '' (see job-record.ts). */
  keep: string;
}

function resolveDedupe(value: unknown): { key: string; mode: string; ttl: string } {
  const d = checkObject('dedupe', value);
  checkKnownKeys('dedupe', d, ['key', 'mode', 'ttlMs']);
  const key = checkLabel('dedupe.key', d.key);
  if (d.mode !== undefined && d.mode !== 'throttle' && d.mode !== 'debounce') {
    throw new ValidationError(`dedupe.mode must be 'throttle' or 'debounce', got ${show(d.mode)}`);
  }
  const ttl = d.ttlMs === undefined ? '' : String(checkInt('dedupe.ttlMs', d.ttlMs, 1, MAX_TIMER_MS));
  return { key, mode: d.mode === 'debounce' ? 'd' : 't', ttl };
}

const NO_ADD_EXTRAS = Object.freeze({
  id: '',
  delayMs: '',
  runAt: '',
  dependsOn: '',
  depMode: '',
  partitionKey: '',
  group: '',
  dedupeKey: '',
  dedupeMode: '',
  dedupeTtlMs: '',
  name: '',
  expireAt: '',
  ttlMs: '',
  keep: '',
});

/** add() options as the add script wants them: '' where absent. */
export function resolveAddOptions(opts: JobOptions | undefined, defaults: ResolvedJobOptions): ResolvedAdd {
  if (opts === undefined) return { ...defaults, ...NO_ADD_EXTRAS };
  const o = checkObject('job options', opts);
  checkKnownKeys('job options', o, JOB_OPTION_KEYS);
  const fields = checkJobFields('', o, defaults);
  if (o.delayMs !== undefined && o.runAt !== undefined) {
    throw new ValidationError('give either delayMs or runAt, not both');
  }
  let runAt = '';
  if (o.runAt !== undefined) {
    const t = o.runAt instanceof Date ? o.runAt.getTime() : o.runAt;
    runAt = String(checkInt('runAt', t, 0, MAX_RUN_AT));
  }
  const id = o.id === undefined ? '' : checkOwnJobId(o.id);
  let dependsOn = '';
  if (o.dependsOn !== undefined) {
    if (!Array.isArray(o.dependsOn) || o.dependsOn.length > 1_000) {
      throw new ValidationError(
        `dependsOn must be an array of at most 1000 job ids, got ${show(o.dependsOn)}`,
      );
    }
    const parents = [...new Set(o.dependsOn.map((p) => checkJobId(p)))];
    if (id !== '' && parents.includes(id))
      throw new ValidationError(`job ${show(id)} cannot depend on itself`);
    dependsOn = parents.join('\n');
  }
  const dedupe = o.dedupe === undefined ? undefined : resolveDedupe(o.dedupe);
  if (dedupe && dependsOn !== '') throw new ValidationError('dedupe cannot be combined with dependsOn');
  if (o.expireAt !== undefined && o.ttlMs !== undefined) {
    throw new ValidationError('give either expireAt or ttlMs, not both');
  }
  let expireAt = '';
  if (o.expireAt !== undefined) {
    const t = o.expireAt instanceof Date ? o.expireAt.getTime() : o.expireAt;
    expireAt = String(checkInt('expireAt', t, 1, MAX_RUN_AT));
  }
  const ignore =
    o.ignoreDependencyFailure === undefined
      ? false
      : checkBool('ignoreDependencyFailure', o.ignoreDependencyFailure);
  return {
    ...fields,
    id,
    delayMs: o.delayMs === undefined ? '' : String(checkInt('delayMs', o.delayMs, 0, MAX_DELAY_MS)),
    runAt,
    dependsOn,
    depMode: dependsOn === '' ? '' : ignore ? 'i' : 's',
    partitionKey: o.partitionKey === undefined ? '' : checkString('partitionKey', o.partitionKey, 1, 256),
    group: o.group === undefined ? '' : checkLabel('group', o.group),
    dedupeKey: dedupe?.key ?? '',
    dedupeMode: dedupe?.mode ?? '',
    dedupeTtlMs: dedupe?.ttl ?? '',
    name: o.name === undefined ? '' : checkLabel('name', o.name),
    expireAt,
    ttlMs: o.ttlMs === undefined ? '' : String(checkInt('ttlMs', o.ttlMs, 1, MAX_DELAY_MS)),
    keep: o.keep === undefined ? '' : resolveKeep(o.keep),
  };
}

/** Ids starting with `schedule:` belong to schedule occurrences (see schedules.ts). */
function checkOwnJobId(value: unknown): string {
  const id = checkJobId(value);
  if (id.startsWith('schedule:')) {
    throw new ValidationError(
      `job ids starting with 'schedule:' are reserved for schedule occurrences, got ${show(id)}`,
      'ERR_INVALID_JOB_ID',
    );
  }
  return id;
}
