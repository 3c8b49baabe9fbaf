/**
 * Schedule timing: validating a schedule and computing its ticks (cron with IANA time zones via
 * cron-parser, or every N ms from an anchor). Pure: no Redis here (schedules.ts does the I/O).
 */
import { CronExpressionParser } from 'cron-parser';
import { ValidationError } from '../errors.js';
import { DEFAULTS_KEYS, LIBRARY_JOB_DEFAULTS, MAX_RUN_AT, resolveAddOptions } from '../options/job.js';
import { SCHEDULE_KEY_RE } from '../store/occurrence-id.js';
import type { JobOptions } from '../types.js';
import { checkBool, checkInt, checkKnownKeys, checkObject, show } from '../validate.js';

/**
 * The largest `limit`: counts are written by Lua, whose number-to-string conversion keeps 14 digits
 * (the same reason as MAX_RUN_AT), so every count up to here is stored exactly.
 */
export const MAX_SCHEDULE_LIMIT = 99_999_999_999_999;

export type ScheduleTiming = { cron: string; tz?: string } | { everyMs: number };

export interface ScheduleOptions<Data> {
  data: Data;
  /**
   * Options of each occurrence job: priority, maxAttempts, leaseMs, backoff, timeoutMs (the schedule
   * sets its id and due time; other job options are refused).
   */
  opts?: Pick<JobOptions, (typeof DEFAULTS_KEYS)[number] | 'group'>;
  /** After downtime, also run up to this many missed ticks (default 0: one run for all missed ticks). */
  catchUp?: number;
  /**
   * No occurrence before this time (Date or epoch ms). Cron ticks at or after it; an everyMs schedule
   * ticks at startAt + k * everyMs (k >= 0), so its first tick is startAt itself.
   */
  startAt?: Date | number;
  /**
   * No occurrence after this time (Date or epoch ms): no tick later than endAt is ever created. Once its
   * last occurrence has started the schedule is `ended` (kept, listed, until unschedule).
   */
  endAt?: Date | number;
  /**
   * At most this many occurrences in total (an integer from 1 to 10^14 - 1), counted atomically in
   * Redis however many workers race and across restarts. The count survives upserts of the same key;
   * unschedule and schedule again to start from 0.
   */
  limit?: number;
  /**
   * The first occurrence runs at once (at creation, or at startAt if that is later), then the cron or
   * interval continues. Applies to the first occurrence of the schedule only: upserting a schedule that
   * has already produced an occurrence does not run it again at once.
   */
  immediately?: boolean;
}

export interface ScheduleInfo<Data = unknown> {
  key: string;
  cron?: string;
  tz?: string;
  everyMs?: number;
  data: Data;
  opts: Omit<JobOptions, 'id' | 'delayMs' | 'runAt'>;
  catchUp: number;
  /** Bounds, as given (epoch ms); absent when not set. */
  startAt?: number;
  endAt?: number;
  limit?: number;
  immediately?: boolean;
  version: number;
  /**
   * Occurrences created so far, the pending one included (never more than `limit`). Survives upserts
   * of the same key; starts from 0 after unschedule.
   */
  count: number;
  /**
   * True once the schedule produces nothing more (its limit is reached or its next tick would be after
   * endAt) and its last occurrence has started. An ended schedule stays listed (so an upsert of the same
   * spec at every start does not revive it) until unschedule; upserting it with wider bounds resumes it.
   */
  ended: boolean;
  /**
   * Id and due time of the occurrence waiting to run (or running). For an ended schedule: its last
   * occurrence ('' and 0 if it never had one).
   */
  pendingJobId: string;
  nextRunAt: number;
  /** The next few ticks after that, within the bounds, for display (none once ended). */
  upcoming: number[];
}

export interface StoredSpec {
  cron?: string;
  tz?: string;
  everyMs?: number;
  data: unknown;
  opts: Omit<JobOptions, 'id' | 'delayMs' | 'runAt'>;
  catchUp: number;
  startAt?: number;
  endAt?: number;
  limit?: number;
  immediately?: true;
  /** everyMs schedules tick at anchor + k * everyMs (anchor: startAt, else the creation time). */
  anchor?: number;
  /** The trace field of the schedule call that created or last changed it (src/telemetry/trace-field.ts). */
  trace?: string;
}

/** The first regular tick of a new spec: after `now`, and at or after startAt. */
export function firstTick(spec: StoredSpec, now: number): number {
  return nextTick(spec, spec.startAt === undefined ? now : Math.max(now, spec.startAt - 1));
}

/** When an `immediately` spec's first occurrence is due: now, or startAt if that is later. */
export function immediateTick(spec: StoredSpec, now: number): number {
  return Math.max(now, spec.startAt ?? now);
}

/** Whether a tick is within the spec's endAt. */
export function beforeEnd(spec: Pick<StoredSpec, 'endAt'>, tick: number): boolean {
  return spec.endAt === undefined || tick <= spec.endAt;
}

/** The first tick strictly after `after`. */
export function nextTick(
  spec: Pick<StoredSpec, 'cron' | 'tz' | 'everyMs' | 'anchor'>,
  after: number,
): number {
  if (spec.everyMs !== undefined) {
    const anchor = spec.anchor ?? 0;
    return anchor + (Math.floor((after - anchor) / spec.everyMs) + 1) * spec.everyMs;
  }
  const expr = CronExpressionParser.parse(spec.cron!, { currentDate: new Date(after), tz: spec.tz ?? 'UTC' });
  return expr.next().getTime();
}

export function validateSchedule<Data>(
  key: string,
  timing: ScheduleTiming,
  options: ScheduleOptions<Data>,
  now: number,
): StoredSpec {
  if (typeof key !== 'string' || !SCHEDULE_KEY_RE.test(key)) {
    throw new ValidationError(
      `schedule key must be 1-100 characters of letters, digits, '.', '_' or '-', got ${show(key)}`,
    );
  }
  const t = checkObject('schedule timing', timing);
  const o = checkObject('schedule options', options);
  checkKnownKeys('schedule options', o, [
    'data',
    'opts',
    'catchUp',
    'startAt',
    'endAt',
    'limit',
    'immediately',
  ]);
  const spec: StoredSpec = {
    data: options.data,
    opts: options.opts ?? {},
    catchUp: o.catchUp === undefined ? 0 : checkInt('catchUp', o.catchUp, 0, 1_000),
  };
  // Only the bounds given are stored, so the spec of a schedule without bounds is what it always was.
  if (o.startAt !== undefined) spec.startAt = checkTime('startAt', o.startAt);
  if (o.endAt !== undefined) spec.endAt = checkTime('endAt', o.endAt);
  if (spec.startAt !== undefined && spec.endAt !== undefined && spec.startAt >= spec.endAt) {
    throw new ValidationError(
      `startAt must be before endAt, got startAt ${show(o.startAt)} and endAt ${show(o.endAt)}`,
    );
  }
  if (o.limit !== undefined) spec.limit = checkInt('limit', o.limit, 1, MAX_SCHEDULE_LIMIT);
  if (o.immediately !== undefined && checkBool('immediately', o.immediately)) spec.immediately = true;
  // Validates the occurrence options the same way add() does. Options an occurrence cannot honour
  // (id, delayMs, runAt, dependsOn, partitionKey...) are refused, not stored and ignored.
  checkKnownKeys('schedule opts', checkObject('schedule opts', spec.opts), [...DEFAULTS_KEYS, 'group']);
  resolveAddOptions(spec.opts, LIBRARY_JOB_DEFAULTS);
  if ('cron' in t && 'everyMs' in t) {
    throw new ValidationError(
      `schedule timing is either { cron, tz? } or { everyMs }, not both: got ${show(timing)}`,
    );
  }
  if ('cron' in t) {
    checkKnownKeys('schedule timing', t, ['cron', 'tz']);
    if (typeof t.cron !== 'string') throw new ValidationError(`cron must be a string, got ${show(t.cron)}`);
    spec.cron = t.cron;
    if (t.tz !== undefined) {
      if (typeof t.tz !== 'string' || !isTimeZone(t.tz))
        throw new ValidationError(`tz must be an IANA time zone such as 'Europe/Paris', got ${show(t.tz)}`);
      spec.tz = t.tz;
    }
    try {
      nextTick(spec, now);
    } catch (err) {
      throw new ValidationError(`invalid cron expression ${show(t.cron)}: ${(err as Error).message}`);
    }
  } else if ('everyMs' in t) {
    checkKnownKeys('schedule timing', t, ['everyMs']);
    spec.everyMs = checkInt('everyMs', t.everyMs, 100, 366 * 24 * 3_600_000);
    spec.anchor = spec.startAt ?? now;
  } else {
    throw new ValidationError(`schedule timing must be { cron, tz? } or { everyMs }, got ${show(timing)}`);
  }
  return spec;
}

/** A point in time given as a Date or epoch ms, from 0 to MAX_RUN_AT like a job's runAt. */
function checkTime(name: string, value: unknown): number {
  const t = value instanceof Date ? value.getTime() : value;
  if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t > MAX_RUN_AT) {
    throw new ValidationError(
      `${name} must be a Date or epoch ms from 0 to ${MAX_RUN_AT}, got ${show(value)}`,
    );
  }
  return t;
}

function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}
