import {
  DEFAULT_BACKOFF,
  DEFAULT_LEASE_MS,
  DEFAULT_MAX_ATTEMPTS,
  MAX_ATTEMPTS,
  MAX_PRIORITY,
} from '../defaults.js';
import { ValidationError } from '../errors.js';
import type { ResolvedJobOptions } from '../store/job-record.js';
import { MAX_TIMER_MS } from '../timers.js';
import type { JobOptions } from '../types.js';
import {
  checkBool,
  checkInt,
  checkJobId,
  checkKnownKeys,
  checkLabel,
  checkObject,
  checkQueueName,
  checkString,
  show,
} from '../validate.js';
import { checkBackoff, MAX_DELAY_MS } from './backoff.js';
import { resolveKeep } from './retention.js';

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
  'lifo',
] as const;
/** The job options a Queue's `defaults` and a schedule's occurrence `opts` may set. */
export const DEFAULTS_KEYS = ['priority', 'maxAttempts', 'leaseMs', 'backoff', 'timeoutMs'] as const;
/**
 * The latest runAt (epoch ms, in the year 5138). Lua writes numbers into the job record with 14
 * significant digits, so a later time would be stored rounded (runAt 100590780964621 read back as
 * ...620); every time up to here has at most 14 digits and is stored exactly.
 */
export const MAX_RUN_AT = 99_999_999_999_999;

export function checkJobFields(
  name: string,
  o: Record<string, unknown>,
  base: ResolvedJobOptions,
): ResolvedJobOptions {
  return Object.freeze({
    priority:
      o.priority === undefined
        ? base.priority
        : checkInt(`${name}priority`, o.priority, -MAX_PRIORITY, MAX_PRIORITY),
    maxAttempts:
      o.maxAttempts === undefined
        ? base.maxAttempts
        : checkInt(`${name}maxAttempts`, o.maxAttempts, 1, MAX_ATTEMPTS),
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

export interface ResolvedAdd extends ResolvedJobOptions {
  id: string;
  delayMs: string;
  runAt: string;
  /** Parent ids joined by newlines ('' = none). */
  dependsOn: string;
  /**
   * Parents given as `{ queue, id }` (of any queue, this one included: enqueue.ts sorts them), lines
   * `queue \t id` ('' = none).
   */
  crossDependsOn: string;
  /** 'i' = run even if a parent dies, 's' = fail with it, '' = no parents. */
  depMode: string;
  /** Jobs with one partitionKey share a partition ('' = by group, then dedupe key, then id). */
  partitionKey: string;
  /** '' = no group. */
  group: string;
  /** '' = no dedupe. */
  dedupeKey: string;
  /** 't' throttle, 'd' debounce, 'k' debounce keeping the last add while the key's job runs, '' none. */
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
  /** '1' = last in, first out (the record's lifo field), '' = not. */
  lifo: string;
}

function resolveDedupe(value: unknown): { key: string; mode: string; ttl: string } {
  const d = checkObject('dedupe', value);
  checkKnownKeys('dedupe', d, ['key', 'mode', 'ttlMs', 'keepLastIfActive']);
  const key = checkLabel('dedupe.key', d.key);
  if (d.mode !== undefined && d.mode !== 'throttle' && d.mode !== 'debounce') {
    throw new ValidationError(`dedupe.mode must be 'throttle' or 'debounce', got ${show(d.mode)}`);
  }
  const ttl = d.ttlMs === undefined ? '' : String(checkInt('dedupe.ttlMs', d.ttlMs, 1, MAX_TIMER_MS));
  const keepLast =
    d.keepLastIfActive === undefined ? false : checkBool('dedupe.keepLastIfActive', d.keepLastIfActive);
  if (keepLast && d.mode !== 'debounce') {
    throw new ValidationError(
      `dedupe.keepLastIfActive needs mode 'debounce', got mode ${show(d.mode ?? 'throttle')}`,
    );
  }
  if (keepLast && ttl !== '') {
    // A key that expires while its job runs would let the next add start a second job beside it.
    throw new ValidationError(
      `dedupe.keepLastIfActive cannot be combined with dedupe.ttlMs (got ttlMs ${ttl}): the key must last until its job has finished`,
    );
  }
  return { key, mode: keepLast ? 'k' : d.mode === 'debounce' ? 'd' : 't', ttl };
}

const NO_ADD_EXTRAS = Object.freeze({
  id: '',
  delayMs: '',
  runAt: '',
  dependsOn: '',
  crossDependsOn: '',
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
  lifo: '',
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
  let crossDependsOn = '';
  if (o.dependsOn !== undefined) {
    if (!Array.isArray(o.dependsOn) || o.dependsOn.length > 1_000) {
      throw new ValidationError(
        `dependsOn must be an array of at most 1000 job ids or { queue, id }, got ${show(o.dependsOn)}`,
      );
    }
    const local = new Set<string>();
    const cross = new Set<string>();
    o.dependsOn.forEach((p: unknown, i: number) => {
      if (typeof p === 'string') {
        local.add(checkJobId(p));
        return;
      }
      const ref = checkObject(`dependsOn[${i}]`, p);
      checkKnownKeys(`dependsOn[${i}]`, ref, ['queue', 'id']);
      if (ref.queue === undefined || ref.id === undefined) {
        throw new ValidationError(
          `dependsOn[${i}] must be a job id or { queue, id } with both set, got ${show(p)}`,
        );
      }
      cross.add(`${checkQueueName(ref.queue)}\t${checkJobId(ref.id)}`);
    });
    if (id !== '' && local.has(id)) throw new ValidationError(`job ${show(id)} cannot depend on itself`);
    dependsOn = [...local].join('\n');
    crossDependsOn = [...cross].join('\n');
  }
  const dedupe = o.dedupe === undefined ? undefined : resolveDedupe(o.dedupe);
  if (dedupe && (dependsOn !== '' || crossDependsOn !== ''))
    throw new ValidationError('dedupe cannot be combined with dependsOn');
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
    crossDependsOn,
    depMode: dependsOn === '' && crossDependsOn === '' ? '' : ignore ? 'i' : 's',
    partitionKey: o.partitionKey === undefined ? '' : checkString('partitionKey', o.partitionKey, 1, 256),
    group: o.group === undefined ? '' : checkLabel('group', o.group),
    dedupeKey: dedupe?.key ?? '',
    dedupeMode: dedupe?.mode ?? '',
    dedupeTtlMs: dedupe?.ttl ?? '',
    name: o.name === undefined ? '' : checkLabel('name', o.name),
    expireAt,
    ttlMs: o.ttlMs === undefined ? '' : String(checkInt('ttlMs', o.ttlMs, 1, MAX_DELAY_MS)),
    keep: o.keep === undefined ? '' : resolveKeep(o.keep),
    lifo: o.lifo === undefined ? '' : checkBool('lifo', o.lifo) ? '1' : '',
  };
}

/** Ids starting with `schedule:` belong to schedule occurrences (see schedules.ts). */
/** A job id a caller may give (`opts.id`): checkJobId, and not one of a schedule's occurrences. */
export function checkOwnJobId(value: unknown): string {
  const id = checkJobId(value);
  if (id.startsWith('schedule:')) {
    throw new ValidationError(
      `job ids starting with 'schedule:' are reserved for schedule occurrences, got ${show(id)}`,
      'ERR_INVALID_JOB_ID',
    );
  }
  return id;
}
