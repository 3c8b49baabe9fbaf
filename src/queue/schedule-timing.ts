/**
 * Schedule timing: validating a schedule and computing its ticks (cron with IANA time zones via
 * cron-parser, or every N ms from an anchor). Pure: no Redis here (schedules.ts does the I/O).
 */
import { CronExpressionParser } from 'cron-parser';
import { ValidationError } from '../errors.js';
import { SCHEDULE_KEY_RE } from '../occurrence-id.js';
import { DEFAULTS_KEYS, LIBRARY_JOB_DEFAULTS, resolveAddOptions } from '../options.js';
import type { JobOptions } from '../types.js';
import { checkInt, checkKnownKeys, checkObject, show } from '../validate.js';

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
}

export interface ScheduleInfo<Data = unknown> {
  key: string;
  cron?: string;
  tz?: string;
  everyMs?: number;
  data: Data;
  opts: Omit<JobOptions, 'id' | 'delayMs' | 'runAt'>;
  catchUp: number;
  version: number;
  /** Id and due time of the occurrence waiting to run (or running). */
  pendingJobId: string;
  nextRunAt: number;
  /** The next few ticks after that, for display. */
  upcoming: number[];
}

export interface StoredSpec {
  cron?: string;
  tz?: string;
  everyMs?: number;
  data: unknown;
  opts: Omit<JobOptions, 'id' | 'delayMs' | 'runAt'>;
  catchUp: number;
  /** everyMs schedules tick at anchor + k * everyMs. */
  anchor?: number;
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
  checkKnownKeys('schedule options', o, ['data', 'opts', 'catchUp']);
  const spec: StoredSpec = {
    data: options.data,
    opts: options.opts ?? {},
    catchUp: o.catchUp === undefined ? 0 : checkInt('catchUp', o.catchUp, 0, 1_000),
  };
  // Validates the occurrence options the same way add() does. Options an occurrence cannot honour
  // (id, delayMs, runAt, dependsOn, partitionKey...) are refused, not stored and ignored.
  checkKnownKeys('schedule opts', checkObject('schedule opts', spec.opts), [...DEFAULTS_KEYS, 'group']);
  resolveAddOptions(spec.opts, LIBRARY_JOB_DEFAULTS);
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
    spec.anchor = now;
  } else {
    throw new ValidationError(`schedule timing must be { cron, tz? } or { everyMs }, got ${show(timing)}`);
  }
  return spec;
}

function isTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}
