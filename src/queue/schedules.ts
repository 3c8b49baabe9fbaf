/**
 * Repeatable schedules in Redis. A schedule is a spec in Redis plus exactly one pending occurrence: an
 * ordinary delayed job with the id `schedule:<key>:<tick>` (occurrence-id.ts), so it is promoted,
 * claimed, leased, retried and recovered like any job and starts within milliseconds of its tick. When
 * an occurrence starts, the worker creates the next one (advance-schedule.lua, compare-and-set on the
 * pending id, so exactly one job per tick however many workers race); every worker's recovery loop also
 * repairs schedules whose pending occurrence has started, in case the worker that claimed it died first.
 * Bounds: ticks before startAt or after endAt are never created, and the schedulePending entry
 * (`version|pending id|count[|ended]`) counts the occurrences created, so the scripts stop at `limit`
 * atomically; a schedule with nothing left to produce is kept, marked ended, until unschedule.
 * Timing and validation: schedule-timing.ts.
 */

import { ValidationError } from '../errors.js';
import { LIBRARY_JOB_DEFAULTS, resolveAddOptions } from '../options/job.js';
import { untilClosed } from '../redis/in-flight.js';
import { serverNow } from '../redis/server-clock.js';
import { callScript, type RedisClient, scripts } from '../scripts/specs.js';
import { encodeOptionTail } from '../store/job-record.js';
import type { QueueKeys } from '../store/keys.js';
import { occurrenceId, parseOccurrenceId } from '../store/occurrence-id.js';
import { toJson } from '../validate.js';
import type { QueueContext } from './context.js';
import type { Layout } from './partitions.js';
import {
  beforeEnd,
  firstTick,
  immediateTick,
  nextTick,
  type ScheduleInfo,
  type ScheduleOptions,
  type ScheduleTiming,
  type StoredSpec,
  validateSchedule,
} from './schedule-timing.js';

function occurrenceFields(spec: StoredSpec, maxPayloadBytes: number) {
  const o = resolveAddOptions(spec.opts, LIBRARY_JOB_DEFAULTS);
  return {
    priority: o.priority,
    optionTail: encodeOptionTail(o, { group: o.group, trace: spec.trace ?? '' }),
    data: toJson('schedule data', spec.data, maxPayloadBytes),
  };
}

/** A schedule's entry in the schedulePending hash (parse_pending.lua reads it in the scripts). */
interface Pending {
  version: number;
  /** The pending occurrence; for an ended schedule its last one ('' if none). */
  id: string;
  count: number;
  ended: boolean;
}

function parsePending(value: string): Pending {
  const [version = '0', id = '', count = '0', ended = ''] = value.split('|');
  return { version: Number(version), id, count: Number(count) || 0, ended: ended === 'ended' };
}

/** The keys of the partition that holds schedule `key` (and its occurrence jobs). */
function homeOf(layout: Layout, key: string): QueueKeys {
  return layout.parts[layout.home(occurrenceId(key, 0))]!;
}

/** Creates or replaces a schedule; an identical spec is left as it is. */
export function upsertSchedule<Data>(
  ctx: QueueContext,
  key: string,
  timing: ScheduleTiming,
  options: ScheduleOptions<Data>,
): Promise<{ version: number; changed: boolean }> {
  const attributes = { 'surety.schedule.key': key };
  return ctx.options.tracing.produce(ctx.name, 'schedule', attributes, (trace) =>
    upsert(ctx, key, timing, options, trace),
  );
}

async function upsert<Data>(
  ctx: QueueContext,
  key: string,
  timing: ScheduleTiming,
  options: ScheduleOptions<Data>,
  trace: string,
): Promise<{ version: number; changed: boolean }> {
  const layout = await ctx.open();
  const keys = homeOf(layout, key);
  const client = ctx.client;
  const now = await serverNow(client);
  const spec = validateSchedule(key, timing, options, now);
  if (layout.partitioned && (spec.opts as { group?: string }).group !== undefined) {
    // Occurrences live in the schedule's partition, a group in its own: they would rarely agree.
    throw new ValidationError('a schedule of a partitioned queue cannot give its occurrences a group');
  }
  // The anchor must not make an unchanged everyMs spec look new at every start: compare without it.
  // With startAt the anchor is startAt itself, the same at every upsert.
  const existing = await untilClosed(client, client.hget(keys.schedules, key));
  if (existing && spec.everyMs !== undefined && spec.startAt === undefined) {
    const old = JSON.parse(existing) as StoredSpec;
    if (old.everyMs === spec.everyMs && old.startAt === undefined) spec.anchor = old.anchor;
  }
  // Occurrences carry the trace context of the call that created or last changed the schedule: an
  // unchanged spec keeps the stored one, so an upsert at every start still changes nothing.
  if (trace !== '') spec.trace = trace;
  if (existing) {
    const old = JSON.parse(existing) as StoredSpec;
    if (JSON.stringify({ ...old, trace: undefined }) === JSON.stringify({ ...spec, trace: undefined })) {
      if (old.trace === undefined) delete spec.trace;
      else spec.trace = old.trace;
    }
  }
  const fields = occurrenceFields(spec, ctx.options.maxPayloadBytes);
  // The script picks the immediate occurrence only if the schedule has produced none yet; either may
  // be '' when its tick is after endAt (the schedule is then stored ended).
  const due = firstTick(spec, now);
  const immediate = spec.immediately ? immediateTick(spec, now) : undefined;
  const inBounds = immediate !== undefined && beforeEnd(spec, immediate);
  return callScript(client, scripts.schedule, keys, {
    now,
    wakeChannel: keys.wakeChannel,
    key,
    spec: JSON.stringify(spec),
    occurrenceId: beforeEnd(spec, due) ? occurrenceId(key, due) : '',
    due,
    ...fields,
    limit: spec.limit ?? '',
    immediateId: inBounds ? occurrenceId(key, immediate) : '',
    immediateDue: immediate ?? '',
  });
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
  const current = parsePending(pending);
  if (current.ended || current.id !== occurrenceId(key, currentTick)) return false;
  const spec = JSON.parse(specJson) as StoredSpec;
  const now = await serverNow(client);
  const ticks: number[] = [];
  for (let t = nextTick(spec, currentTick); t <= now && ticks.length < 10_000; t = nextTick(spec, t))
    ticks.push(t);
  const missed = spec.catchUp > 0 ? ticks.slice(-spec.catchUp) : [];
  const next = nextTick(spec, Math.max(now, currentTick));
  // No tick after endAt: with no rows left the script marks the schedule ended.
  const rows = [...missed, next]
    .filter((due) => beforeEnd(spec, due))
    .map((due) => ({ id: occurrenceId(key, due), due }));
  const fields = occurrenceFields(spec, Number.MAX_SAFE_INTEGER);
  return callScript(
    client,
    scripts.advanceSchedule,
    keys,
    { now, wakeChannel: keys.wakeChannel, key, expected: pending, ...fields, limit: spec.limit ?? '' },
    rows,
  );
}

/** Every schedule of every partition with its pending occurrence and next run times, soonest first. */
export async function listSchedules<Data>(ctx: QueueContext): Promise<ScheduleInfo<Data>[]> {
  const layout = await ctx.open();
  const all = await Promise.all(layout.parts.map((k) => schedulesIn<Data>(ctx.client, k)));
  return all
    .flat()
    .sort(
      (a, b) => Number(a.ended) - Number(b.ended) || a.nextRunAt - b.nextRunAt || (a.key < b.key ? -1 : 1),
    );
}

async function schedulesIn<Data>(client: RedisClient, keys: QueueKeys): Promise<ScheduleInfo<Data>[]> {
  const [specs, pendings] = await Promise.all([
    untilClosed(client, client.hgetall(keys.schedules)),
    untilClosed(client, client.hgetall(keys.schedulePending)),
  ]);
  const out: ScheduleInfo<Data>[] = [];
  for (const [key, json] of Object.entries(specs)) {
    const spec = JSON.parse(json) as StoredSpec;
    const p = parsePending(pendings[key] ?? '0|');
    const nextRunAt = parseOccurrenceId(p.id)?.tick ?? 0;
    // The ticks that will still be created: within endAt and what the limit leaves.
    const left = p.ended ? 0 : Math.min(3, spec.limit === undefined ? 3 : spec.limit - p.count);
    const upcoming: number[] = [];
    for (
      let t = nextTick(spec, nextRunAt);
      upcoming.length < left && beforeEnd(spec, t);
      t = nextTick(spec, t)
    )
      upcoming.push(t);
    out.push({
      key,
      ...(spec.cron !== undefined ? { cron: spec.cron, tz: spec.tz ?? 'UTC' } : { everyMs: spec.everyMs! }),
      data: spec.data as Data,
      opts: spec.opts,
      catchUp: spec.catchUp,
      ...(spec.startAt !== undefined ? { startAt: spec.startAt } : {}),
      ...(spec.endAt !== undefined ? { endAt: spec.endAt } : {}),
      ...(spec.limit !== undefined ? { limit: spec.limit } : {}),
      ...(spec.immediately ? { immediately: true } : {}),
      version: p.version,
      count: p.count,
      ended: p.ended,
      pendingJobId: p.id,
      nextRunAt,
      upcoming,
    });
  }
  return out;
}

/** Deletes a schedule (and its next occurrence if it has not started); false if there was none. */
export async function removeSchedule(ctx: QueueContext, key: string): Promise<boolean> {
  const keys = homeOf(await ctx.open(), key);
  return callScript(ctx.client, scripts.unschedule, keys, { key });
}

/**
 * Advances every schedule whose pending occurrence has started or finished (or vanished): the safety
 * net for a worker that died between claiming an occurrence and creating the next one.
 */
export async function repairSchedules(client: RedisClient, keys: QueueKeys): Promise<number> {
  const pendings = await untilClosed(client, client.hgetall(keys.schedulePending));
  // An ended schedule has nothing to advance.
  const entries = Object.entries(pendings).filter(([, p]) => !parsePending(p).ended);
  if (entries.length === 0) return 0;
  const ids = entries.map(([, p]) => parsePending(p).id);
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
