/**
 * Operator reads over the admin API: searching jobs by their data (queue.search) and a queue's health
 * figures (queue.stats: how long the oldest waiting job has waited, completions per minute). Both are
 * bounded: search scans at most `scan` jobs in pages of SEARCH_PAGE; stats reads the fronts of the
 * queue's lines and of its STATS_GROUPS largest groups.
 */

import { ValidationError } from '../errors.js';
import { settling } from '../redis/in-flight.js';
import { serverNow } from '../redis/server-clock.js';
import { isJobState, JOB_STATES } from '../states.js';
import { annexOf, decodeRecord } from '../store/job-record.js';
import { groupKeys } from '../store/keys.js';
import type { JobInfo, JobState } from '../types.js';
import { checkCallOptions, checkInt, show } from '../validate.js';
import type { QueueContext } from './context.js';
import { readMetrics } from './metrics-history.js';
import { listJobs } from './reads.js';

/** Jobs read per page while searching. */
export const SEARCH_PAGE = 200;
/** Most jobs one search scans (its `scan` option). */
export const MAX_SEARCH_SCAN = 10_000;
/** Groups whose first waiting job stats() looks at: the largest backlogs. */
export const STATS_GROUPS = 20;

export interface SearchOptions {
  /** The state to search (default 'waiting'). */
  state?: JobState;
  /** Case-insensitive substring of the job's data as JSON (or of its name). */
  text?: string;
  /** A data field by dotted path (`user.id`), matched against `value`. */
  field?: string;
  /** `field`'s value: equal as JSON, or for a string, equal to the field's value as a string. */
  value?: unknown;
  /** Most matches to return (default 50, at most 500). */
  limit?: number;
  /** Most jobs to look at, newest first (default 1 000, at most MAX_SEARCH_SCAN). */
  scan?: number;
}

export interface SearchResult<D, R> {
  jobs: JobInfo<D, R>[];
  /** Jobs looked at. */
  scanned: number;
  /** True when the scan stopped at `scan` (or at `limit` matches) before the end of the state. */
  more: boolean;
}

function fieldOf(data: unknown, path: string[]): unknown {
  let v: unknown = data;
  for (const p of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[p];
  }
  return v;
}

/** Jobs of one state whose data matches, newest first, looking at the `scan` newest jobs at most. */
export async function searchJobs<D, R>(ctx: QueueContext, opts: SearchOptions): Promise<SearchResult<D, R>> {
  checkCallOptions('search options', opts, ['state', 'text', 'field', 'value', 'limit', 'scan']);
  const state = opts.state ?? 'waiting';
  if (!isJobState(state))
    throw new ValidationError(`state must be one of ${JOB_STATES.join(', ')}, got ${show(state)}`);
  const limit = checkInt('limit', opts.limit ?? 50, 1, 500);
  const scan = checkInt('scan', opts.scan ?? 1_000, 1, MAX_SEARCH_SCAN);
  const { text, field } = opts;
  if (text !== undefined && (typeof text !== 'string' || text === '' || text.length > 200))
    throw new ValidationError(`text must be a string of 1 to 200 characters, got ${show(text)}`);
  if (
    field !== undefined &&
    (typeof field !== 'string' || !/^[^.]+(\.[^.]+)*$/.test(field) || field.length > 200)
  )
    throw new ValidationError(`field must be a dotted path such as "user.id", got ${show(field)}`);
  if (text === undefined && field === undefined)
    throw new ValidationError('search needs text or field (with value)');
  const needle = text?.toLowerCase();
  const path = field?.split('.');
  const wanted = JSON.stringify(opts.value);
  const matches = (j: JobInfo<D, R>): boolean => {
    if (needle !== undefined) {
      const hay = `${JSON.stringify(j.data) ?? ''}\n${j.name ?? ''}`.toLowerCase();
      if (!hay.includes(needle)) return false;
    }
    if (path !== undefined) {
      const v = fieldOf(j.data, path);
      if (v === undefined) return false;
      if (JSON.stringify(v) !== wanted && !(typeof opts.value === 'string' && String(v) === opts.value))
        return false;
    }
    return true;
  };
  const jobs: JobInfo<D, R>[] = [];
  let scanned = 0;
  while (scanned < scan && jobs.length < limit) {
    const n = Math.min(SEARCH_PAGE, scan - scanned);
    const page = await listJobs<D, R>(ctx, state, { offset: scanned, limit: n, order: 'desc' });
    scanned += page.length;
    for (const j of page) if (jobs.length < limit && matches(j)) jobs.push(j);
    if (page.length < n) return { jobs, scanned, more: false };
  }
  return { jobs, scanned, more: true };
}

export interface QueueStats {
  /** The oldest job among the fronts of the waiting lines: its id, and since when it has been due. */
  oldestWaiting: { id: string; since: number; ageMs: number } | null;
  /** Completed jobs per minute, over the last 5 minutes (Redis clock). */
  completedPerMinute: number;
  /** Failed attempts per minute, over the last 5 minutes. */
  failedPerMinute: number;
  /** Redis's clock when read. */
  at: number;
}

/**
 * Latency and throughput. The oldest waiting job is looked for at the fronts of the lines (the
 * queue's list, its most and least urgent priorities, and the first job of its STATS_GROUPS largest
 * groups): the job next in line of each, so in a FIFO queue it is the oldest one.
 */
export async function queueStats(ctx: QueueContext): Promise<QueueStats> {
  const layout = await ctx.open();
  const client = settling(ctx.client);
  const now = await serverNow(client);
  let oldest: QueueStats['oldestWaiting'] = null;
  for (const k of layout.parts) {
    const fronts = [k.waiting].concat(
      (await client.zrevrange(k.groupBacklog, 0, STATS_GROUPS - 1)).map((g) => groupKeys(k, g).waiting),
    );
    const [heads, urgent, last] = await Promise.all([
      Promise.all(fronts.map((list) => client.lindex(list, 0))),
      client.zrange(k.prio, 0, 0),
      client.zrange(k.prio, -1, -1),
    ]);
    const ids = new Set<string>([...heads.filter((id): id is string => id !== null), ...urgent, ...last]);
    if (ids.size === 0) continue;
    const list = [...ids];
    const records = await client.hmget(k.jobs, ...list);
    records.forEach((rec, i) => {
      if (!rec) return;
      const job = decodeRecord(list[i] as string, rec, annexOf([], 0));
      const since = Math.min(job.runAt, now);
      if (oldest === null || since < oldest.since) oldest = { id: job.id, since, ageMs: now - since };
    });
  }
  const m = await readMetrics(ctx, { windowMs: 300_000 });
  return {
    oldestWaiting: oldest,
    completedPerMinute: m.completed / 5,
    failedPerMinute: m.failed / 5,
    at: now,
  };
}
