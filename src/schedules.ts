/**
 * Repeatable schedules. A schedule is a spec in Redis plus exactly one pending occurrence: an ordinary
 * delayed job with the id `schedule:<key>:<tick>`, so it is promoted, claimed, leased, retried and
 * recovered like any job and starts within milliseconds of its tick. When an occurrence starts, the
 * worker creates the next one (advance-schedule.lua, compare-and-set on the pending id, so exactly one
 * job per tick however many workers race); every worker's recovery loop also repairs schedules whose
 * pending occurrence has started, in case the worker that claimed it died first.
 */
import { CronExpressionParser } from 'cron-parser';
import { ValidationError } from './errors.js';
import { untilClosed } from './in-flight.js';
import { encodeOptionTail } from './job-record.js';
import type { QueueKeys } from './keys.js';
import { DEFAULTS_KEYS, LIBRARY_JOB_DEFAULTS, resolveAddOptions } from './options.js';
import { type RedisClient, runScript, scripts } from './scripts.js';
import type { JobOptions } from './types.js';
import { checkInt, checkKnownKeys, checkObject, show, toJson } from './validate.js';

export type ScheduleTiming = { cron: string; tz?: string } | { everyMs: number };

export interface ScheduleOptions<Data> {
  data: Data;
  /**
   * Options of each occurrence job: priority, maxAttempts, leaseMs, backoff, timeoutMs (the schedule
   * sets its id and due time; other job options are refused).
   */
  opts?: Pick<JobOptions, (typeof DEFAULTS_KEYS)[number]>;
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

interface StoredSpec {
  cron?: string;
  tz?: string;
  everyMs?: number;
  data: unknown;
  opts: Omit<JobOptions, 'id' | 'delayMs' | 'runAt'>;
  catchUp: number;
  /** everyMs schedules tick at anchor + k * everyMs. */
  anchor?: number;
}

export const OCCURRENCE_PREFIX = 'schedule:';
const KEY_RE = /^[A-Za-z0-9._-]{1,100}$/;

export function occurrenceId(key: string, tick: number): string {
  return `${OCCURRENCE_PREFIX}${key}:${tick}`;
}

/** The schedule key and tick of an occurrence job id, or null for an ordinary job. */
export function parseOccurrenceId(id: string): { key: string; tick: number } | null {
  if (!id.startsWith(OCCURRENCE_PREFIX)) return null;
  const colon = id.lastIndexOf(':');
  const key = id.slice(OCCURRENCE_PREFIX.length, colon);
  const tick = Number(id.slice(colon + 1));
  return KEY_RE.test(key) && Number.isInteger(tick) ? { key, tick } : null;
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
  if (typeof key !== 'string' || !KEY_RE.test(key)) {
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
  checkKnownKeys('schedule opts', checkObject('schedule opts', spec.opts), DEFAULTS_KEYS);
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

/** Redis's clock in epoch ms: the one clock due times, leases and metrics use. */
export async function serverNow(client: RedisClient): Promise<number> {
  const [s, us] = await untilClosed(client, client.time());
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

function occurrenceFields(spec: StoredSpec, maxPayloadBytes: number) {
  const o = resolveAddOptions(spec.opts, LIBRARY_JOB_DEFAULTS);
  return {
    priority: o.priority,
    optionTail: encodeOptionTail(o),
    data: toJson('schedule data', spec.data, maxPayloadBytes),
  };
}

/** Creates or replaces a schedule; an identical spec is left as it is. */
export async function upsertSchedule<Data>(
  client: RedisClient,
  keys: QueueKeys,
  key: string,
  timing: ScheduleTiming,
  options: ScheduleOptions<Data>,
  maxPayloadBytes: number,
): Promise<{ version: number; changed: boolean }> {
  const now = await serverNow(client);
  const spec = validateSchedule(key, timing, options, now);
  const fields = occurrenceFields(spec, maxPayloadBytes);
  // The anchor must not make an unchanged everyMs spec look new at every start: compare without it.
  const existing = await untilClosed(client, client.hget(keys.schedules, key));
  if (existing && spec.everyMs !== undefined) {
    const old = JSON.parse(existing) as StoredSpec;
    if (old.everyMs === spec.everyMs) spec.anchor = old.anchor;
  }
  const due = nextTick(spec, now);
  const [version, changed] = (await runScript(client, scripts.schedule, keys, {
    now,
    wakeChannel: keys.wakeChannel,
    key,
    spec: JSON.stringify(spec),
    occurrenceId: occurrenceId(key, due),
    due,
    ...fields,
  })) as [number, number];
  return { version, changed: changed === 1 };
}

/**
 * Creates the occurrence(s) after the one with id `currentId` if it is still the pending one.
 * Ticks missed while nothing ran collapse into the current run, unless the spec's catchUp asks for more.
 */
export async function advanceSchedule(
  client: RedisClient,
  keys: QueueKeys,
  key: string,
  currentTick: number,
): Promise<boolean> {
  // untilClosed on every read here: a reply lost with the connection would otherwise never settle,
  // and the worker's recovery loop (repairSchedules) would wait on it forever.
  const [specJson, pending] = await Promise.all([
    untilClosed(client, client.hget(keys.schedules, key)),
    untilClosed(client, client.hget(keys.schedulePending, key)),
  ]);
  if (!specJson || !pending) return false;
  const currentId = occurrenceId(key, currentTick);
  if (!pending.endsWith(`|${currentId}`)) return false;
  const spec = JSON.parse(specJson) as StoredSpec;
  const now = await serverNow(client);
  const ticks: number[] = [];
  for (let t = nextTick(spec, currentTick); t <= now && ticks.length < 10_000; t = nextTick(spec, t))
    ticks.push(t);
  const missed = spec.catchUp > 0 ? ticks.slice(-spec.catchUp) : [];
  const next = nextTick(spec, Math.max(now, currentTick));
  const rows = [...missed, next].map((due) => ({ id: occurrenceId(key, due), due }));
  const fields = occurrenceFields(spec, Number.MAX_SAFE_INTEGER);
  const r = await runScript(
    client,
    scripts.advanceSchedule,
    keys,
    { now, wakeChannel: keys.wakeChannel, key, expected: pending, ...fields },
    rows,
  );
  return r === 1;
}

export async function listSchedules<Data>(
  client: RedisClient,
  keys: QueueKeys,
): Promise<ScheduleInfo<Data>[]> {
  const [specs, pendings] = await Promise.all([
    untilClosed(client, client.hgetall(keys.schedules)),
    untilClosed(client, client.hgetall(keys.schedulePending)),
  ]);
  const out: ScheduleInfo<Data>[] = [];
  for (const [key, json] of Object.entries(specs)) {
    const spec = JSON.parse(json) as StoredSpec;
    const pending = pendings[key] ?? '0|';
    const sep = pending.indexOf('|');
    const pendingJobId = pending.slice(sep + 1);
    const nextRunAt = parseOccurrenceId(pendingJobId)?.tick ?? 0;
    const upcoming: number[] = [];
    for (let t = nextRunAt, i = 0; i < 3; i++) {
      t = nextTick(spec, t);
      upcoming.push(t);
    }
    out.push({
      key,
      ...(spec.cron !== undefined ? { cron: spec.cron, tz: spec.tz ?? 'UTC' } : { everyMs: spec.everyMs! }),
      data: spec.data as Data,
      opts: spec.opts,
      catchUp: spec.catchUp,
      version: Number(pending.slice(0, sep)),
      pendingJobId,
      nextRunAt,
      upcoming,
    });
  }
  return out.sort((a, b) => a.nextRunAt - b.nextRunAt);
}

export async function removeSchedule(client: RedisClient, keys: QueueKeys, key: string): Promise<boolean> {
  return (await runScript(client, scripts.unschedule, keys, { key })) === 1;
}

/**
 * Advances every schedule whose pending occurrence has started or finished (or vanished): the safety
 * net for a worker that died between claiming an occurrence and creating the next one.
 */
export async function repairSchedules(client: RedisClient, keys: QueueKeys): Promise<number> {
  const pendings = await untilClosed(client, client.hgetall(keys.schedulePending));
  const entries = Object.entries(pendings);
  if (entries.length === 0) return 0;
  const ids = entries.map(([, p]) => p.slice(p.indexOf('|') + 1));
  const records = await untilClosed(client, client.hmget(keys.jobs, ...ids));
  let repaired = 0;
  for (let i = 0; i < entries.length; i++) {
    const state = records[i]?.[0];
    if (state === 'w' || state === 'd') continue;
    const parsed = parseOccurrenceId(ids[i]!);
    if (parsed && (await advanceSchedule(client, keys, entries[i]![0], parsed.tick))) repaired++;
  }
  return repaired;
}
