/**
 * Moving BullMQ job schedulers (`upsertJobScheduler`, cron `pattern` or `every`) to `queue.schedule()`s,
 * so that every tick runs once, in one system. For each scheduler: create the schedule here, its first
 * tick being the one after BullMQ's pending tick; then remove the scheduler from BullMQ while that
 * pending tick is still the one read (bullmq-drop-scheduler.lua). The pending occurrence stays a BullMQ
 * job: a BullMQ worker runs it, or the jobs pass moves it like any delayed job. The schedule here never
 * holds a tick BullMQ may run: had it started at the pending tick, a tick falling due between the read
 * and the removal would run in both systems. A run cut off between the two steps leaves the schedule
 * in both systems until it is run again (an identical schedule here is recognised as its own).
 */
import { SuretyError } from '../errors.js';
import type { Queue } from '../queue/queue.js';
import type { ScheduleOptions, ScheduleTiming } from '../queue/schedule-timing.js';
import type { RedisClient } from '../redis/client.js';
import { callScript, scripts } from '../scripts/specs.js';
import type { QueueKeys } from '../store/keys.js';
import { SCHEDULE_KEY_RE } from '../store/occurrence-id.js';
import { mapRetries } from './bullmq-job.js';
import { type BullMQKeys, bullmqSchedulerKey } from './bullmq-keys.js';

export interface SchedulerTally {
  moved: string[];
  kept: { id: string; reason: 'invalid' | 'id-taken' | 'ended' | 'busy'; detail: string }[];
  dropped: Map<string, number>;
}

export interface SchedulerContext {
  bullmq: RedisClient;
  bull: BullMQKeys;
  queue: Queue;
  /** The keys the drop script is called with (only its BullMQ keys are used). */
  keys: QueueKeys;
  dryRun: boolean;
}

const READS = 3;

/** Scheduler ids in BullMQ now. */
export async function bullSchedulerIds(client: RedisClient, bull: BullMQKeys): Promise<Set<string>> {
  return new Set(await client.zrange(bull.repeat, 0, -1));
}

export async function moveSchedulers(s: SchedulerContext, tally: SchedulerTally): Promise<void> {
  for (const id of await bullSchedulerIds(s.bullmq, s.bull)) {
    for (let read = 1; ; read++) {
      const outcome = await moveScheduler(s, id, tally);
      if (outcome !== 'changed') break;
      if (read === READS) {
        tally.kept.push({ id, reason: 'busy', detail: 'its next tick kept moving on; run again' });
        break;
      }
    }
  }
}

interface Spec {
  timing: ScheduleTiming;
  options: ScheduleOptions<unknown>;
}

async function moveScheduler(
  s: SchedulerContext,
  id: string,
  tally: SchedulerTally,
): Promise<'done' | 'changed'> {
  const [millisText, hash] = await Promise.all([
    s.bullmq.zscore(s.bull.repeat, id),
    s.bullmq.hgetall(bullmqSchedulerKey(s.bull, id)),
  ]);
  if (millisText === null) return 'done'; // removed in BullMQ meanwhile
  const millis = Number(millisText);
  const dropped: string[] = [];
  const spec = mapScheduler(id, hash, millis, dropped);
  if (typeof spec === 'string') {
    tally.kept.push({
      id,
      reason: spec === 'ended' ? 'ended' : 'invalid',
      detail: spec === 'ended' ? 'its limit is reached' : spec,
    });
    return 'done';
  }
  const existing = (await s.queue.schedules()).find((info) => info.key === id);
  if (existing && !sameSchedule(existing, spec)) {
    tally.kept.push({ id, reason: 'id-taken', detail: 'the target queue has another schedule of this key' });
    return 'done';
  }
  if (s.dryRun) {
    countDropped(tally, dropped);
    tally.moved.push(id);
    return 'done';
  }
  try {
    await s.queue.schedule(id, spec.timing, spec.options);
  } catch (err) {
    if (!(err instanceof SuretyError)) throw err;
    tally.kept.push({ id, reason: 'invalid', detail: err.message });
    return 'done';
  }
  const drop = await callScript(
    s.bullmq,
    scripts.bullmqDropScheduler,
    { ...s.keys, bullRepeat: s.bull.repeat, bullScheduler: bullmqSchedulerKey(s.bull, id) },
    { scheduler: id, millis },
  );
  if (drop === 'changed') return 'changed';
  if (drop === 'gone') return 'done';
  countDropped(tally, dropped);
  tally.moved.push(id);
  return 'done';
}

/**
 * The schedule a BullMQ scheduler becomes, or why it cannot: its first tick is the one after BullMQ's
 * pending tick `millis`, whose occurrence stays a BullMQ job.
 */
export function mapScheduler(
  id: string,
  h: Record<string, string>,
  millis: number,
  dropped: string[],
): Spec | string {
  if (!SCHEDULE_KEY_RE.test(id)) return `its id is not a schedule key here (${SCHEDULE_KEY_RE})`;
  let timing: ScheduleTiming;
  if (h.pattern) {
    timing = h.tz ? { cron: h.pattern, tz: h.tz } : { cron: h.pattern };
    // BullMQ read a pattern without tz in its process's local time; a schedule here reads it in UTC.
    if (!h.tz) dropped.push('scheduler without tz (its cron runs in UTC here)');
  } else if (h.every) timing = { everyMs: Number(h.every) };
  else return 'it has neither a pattern nor every';
  let data: unknown = {};
  let template: Record<string, unknown> = {};
  try {
    if (h.data) data = JSON.parse(h.data);
    if (h.opts) template = JSON.parse(h.opts) as Record<string, unknown>;
  } catch {
    return 'its data or options are not JSON';
  }
  const opts = mapRetries(template.attempts, template.backoff, template.priority, dropped);
  for (const key of Object.keys(template)) {
    if (!['attempts', 'backoff', 'priority', 'jobId', 'delay', 'repeat'].includes(key))
      dropped.push(`scheduler ${key}`);
  }
  if (h.name && h.name !== id) dropped.push('scheduler job name');
  const every = 'everyMs' in timing ? timing.everyMs : 0;
  // The first tick here: the one after BullMQ's pending one.
  let startAt = every > 0 ? millis + every : millis + 1;
  if (h.startDate && Number(h.startDate) > startAt) startAt = Number(h.startDate);
  const options: ScheduleOptions<unknown> = { data, opts, startAt };
  if (h.endDate) options.endAt = Number(h.endDate);
  if (h.limit) {
    // `ic` counts the occurrences BullMQ created, the pending one included (it runs as a job).
    const left = Number(h.limit) - Number(h.ic ?? 1);
    if (left <= 0) return 'ended';
    options.limit = left;
  }
  return { timing, options };
}

function sameSchedule(
  info: { cron?: string; tz?: string; everyMs?: number; data: unknown },
  spec: Spec,
): boolean {
  const t = spec.timing;
  const timingSame =
    'cron' in t ? info.cron === t.cron && (info.tz ?? 'UTC') === (t.tz ?? 'UTC') : info.everyMs === t.everyMs;
  return timingSame && JSON.stringify(info.data) === JSON.stringify(spec.options.data);
}

function countDropped(tally: SchedulerTally, dropped: readonly string[]): void {
  for (const name of dropped) tally.dropped.set(name, (tally.dropped.get(name) ?? 0) + 1);
}
