/**
 * Queue: adds jobs, and is the admin API (inspect, count, retry, remove, pause) that the CLI and
 * the dashboard are built on. A thin facade: each method delegates to the module that does the work,
 * which validates the call's options before it touches Redis (files named for what they do):
 *
 *   enqueue.ts    add, addBulk: validation, routing to partitions, add.lua, WAIT for replicas
 *   batches.ts    addBatch, batch: jobs counted together, with a callback job when all finished
 *   wait-for.ts   waitFor (done channel, no polling)
 *   reads.ts      getJob, getJobs, counts, exists, workers (insights.ts: search, stats;
 *                 metrics-history.ts: metrics and their retention; priority-counts.ts:
 *                 getCountsPerPriority)
 *   explain.ts    explain: why a job is where it is
 *   flow.ts       flow, and cancel (with `flow`: the jobs below it too)
 *   admin.ts      retry, remove, promote, cancel, addJobLog, clean, pause/resume, global concurrency,
 *                 recovery
 *   flow-control.ts  stored rate limit, group limits, the list of groups
 *   bulk.ts       retryJobs / removeJobs over many jobs (used by the CLI and the dashboard)
 *   job-edits.ts  updateData, changePriority, changeDelay, drain, obliterate
 *   schedules.ts  schedule, schedules, unschedule (timing in schedule-timing.ts)
 *   events.ts     events() (and the QueueEvents class)
 *
 * Holds no state besides its connections and layout (opener.ts).
 */

import { type QueueOptions, type ResolvedQueueOptions, resolveQueueOptions } from '../options/queue.js';
import { type Connection, closeConnection, connect } from '../redis/connection.js';
import type { RedisClient } from '../scripts/specs.js';
import { type QueueKeys, queueKeys } from '../store/keys.js';
import type {
  AddedBatch,
  AddedJob,
  BatchInfo,
  BatchOptions,
  JobCounts,
  JobInfo,
  JobOptions,
  JobState,
  QueueMetrics,
  RetentionRule,
  WorkerDescription,
} from '../types.js';
import { checkJobId, checkQueueAddress, checkQueueName } from '../validate.js';
import * as admin from './admin.js';
import { addBatch, readBatch } from './batches.js';
import { type BulkOptions, type BulkOutcome, removeJobs, retryJobs } from './bulk.js';
import type { QueueContext } from './context.js';
import { addJob, addJobs } from './enqueue.js';
import { type QueueEvent, queueEvents, type ReadEventsOptions } from './events.js';
import { type Explanation, explainJob } from './explain.js';
import {
  type CancelOptions,
  type CancelOutcome,
  cancelJobs,
  type Flow,
  type FlowOptions,
  readFlow,
} from './flow.js';
import {
  type EffectiveGroupLimits,
  type GroupLimits,
  type GroupPage,
  getGroupLimits,
  getRateLimit,
  listGroups,
  type RateLimit,
  setGroupLimits,
  setRateLimit,
} from './flow-control.js';
import {
  type QueueStats,
  queueStats,
  type SearchOptions,
  type SearchResult,
  searchJobs,
} from './insights.js';
import type { DrainOptions } from './job-edits.js';
import * as edits from './job-edits.js';
import { readMetrics, setMetricsRetention } from './metrics-history.js';
import { LayoutOpener } from './opener.js';
import type { Layout } from './partitions.js';
import { countPerPriority } from './priority-counts.js';
import { countJobs, type ListOptions, listJobs, listWorkers, queueExists, readJob } from './reads.js';
import type { RecoveredJobs } from './recovery.js';
import type { ScheduleInfo, ScheduleOptions, ScheduleTiming } from './schedule-timing.js';
import { listSchedules, removeSchedule, upsertSchedule } from './schedules.js';
import type { SignalResult } from './signals.js';
import * as signals from './signals.js';
import { JobWaiter, type WaitOptions } from './wait-for.js';

/** Each Queue's context, for the library's own modules (a Worker adding children: contextOf). */
const contexts = new WeakMap<Queue<unknown, unknown>, QueueContext>();

/** @internal The context of `queue`, for modules of this library that add through it. */
export function contextOf(queue: Queue<unknown, unknown>): QueueContext {
  return contexts.get(queue)!;
}

export class Queue<Data = unknown, Result = unknown> {
  readonly name: string;
  readonly options: ResolvedQueueOptions;
  private readonly conn: Connection;
  private readonly opener: LayoutOpener;
  private readonly ctx: QueueContext;
  private readonly waiter: JobWaiter;

  constructor(name: string, opts: QueueOptions = {}) {
    this.name = checkQueueName(name);
    this.options = resolveQueueOptions(opts);
    checkQueueAddress(this.options.prefix, name);
    this.conn = connect(opts.connection, 'queue', this.options.clock);
    this.opener = new LayoutOpener(this.name, this.options, this.conn);
    this.ctx = { name: this.name, options: this.options, client: this.conn.client, open: () => this.open() };
    this.waiter = new JobWaiter(this.ctx);
    contexts.set(this as Queue<unknown, unknown>, this.ctx);
  }

  /** The ioredis client this queue uses (shared with a Worker if you passed it one). */
  get client(): RedisClient {
    return this.conn.client;
  }

  /** Keys of partition 0: the queue's only keys when it is not partitioned. */
  get keys(): QueueKeys {
    return this.opener.layout?.parts[0] ?? queueKeys(this.options.prefix, this.name);
  }

  /** The number of partitions (for `partitions: 'auto'`, known once the queue has been used). */
  get partitions(): number {
    return this.opener.layout?.count ?? 0;
  }

  /** Checks the server and the partition count once (again after a failure), and returns the layout. */
  private open(): Promise<Layout> {
    return this.opener.open();
  }

  // ---- producing -----------------------------------------------------------------------------

  /** Adds one job. With an `id` that exists, returns that job (`isNew: false`) and enqueues nothing. */
  add(data: Data, opts?: JobOptions): Promise<AddedJob> {
    return addJob(this.ctx, data, opts);
  }

  /**
   * Adds up to MAX_BULK (10 000) jobs, in order; an id given twice (or one that exists) is reported with
   * `isNew: false` and written once. A refused call writes nothing (what remains: addJobs, enqueue.ts).
   */
  addBulk(items: readonly { data: Data; opts?: JobOptions }[]): Promise<AddedJob[]> {
    return addJobs(this.ctx, items);
  }

  /**
   * Adds up to MAX_BULK jobs as one batch, atomically (one partition, chosen by the batch id); when all
   * of them have finished (completed or dead), `onComplete` is added once (docs/batches.md).
   */
  addBatch<CallbackData = unknown>(
    items: readonly { data: Data; opts?: JobOptions }[],
    opts?: BatchOptions<CallbackData>,
  ): Promise<AddedBatch> {
    return addBatch(this.ctx, items, opts);
  }

  /** A batch's progress, or null (never added, or expired 7 days after it finished). */
  batch(id: string): Promise<BatchInfo | null> {
    return readBatch(this.ctx, id);
  }

  /**
   * Resolves with the job's result once it completes; rejects with JobFailedError (every attempt's
   * error) if it ends dead, WaitTimeoutError after `timeoutMs`, JobNotFoundError if it does not exist,
   * or with `signal`'s reason once it aborts.
   */
  async waitFor(id: string, opts: WaitOptions = {}): Promise<Result> {
    return (await this.waiter.wait(id, opts)) as Result;
  }

  // ---- reading -------------------------------------------------------------------------------

  async getJob(id: string): Promise<JobInfo<Data, Result> | null> {
    checkJobId(id);
    return readJob<Data, Result>(this.conn.client, await this.open(), id);
  }

  /**
   * Jobs in one state, oldest first (waiting: ungrouped ones in claim order, then each group's in its own
   * claim order, groups with the most waiting first: claims interleave groups, so not the order of
   * claims across groups), paged (`offset`, default 0; `limit`, default 100, at most 10 000);
   * `order: 'desc'`: newest first. With `group` (state waiting only): that group's waiting jobs.
   *
   * Several states (`['completed', 'waiting']`, each at most once): their lists one after another,
   * in the order given, each in its own order (`order` applies inside each state), and `offset` and
   * `limit` page through that concatenation. Not a snapshot: a job that changes state during the
   * call may be listed twice or missed. docs/inspecting.md.
   */
  getJobs(state: JobState | readonly JobState[], opts: ListOptions = {}): Promise<JobInfo<Data, Result>[]> {
    return listJobs<Data, Result>(this.ctx, state, opts);
  }

  /**
   * How many jobs wait at each priority given (integers from -1 000 000 to 1 000 000, at most 1 000
   * of them): `{ 0: n, 1: n, ... }`, grouped jobs included, over every partition. Delayed and blocked
   * jobs are not waiting yet and are not counted. docs/inspecting.md.
   */
  getCountsPerPriority(priorities: readonly number[]): Promise<Record<number, number>> {
    return countPerPriority(this.ctx, priorities);
  }

  /** Jobs of one state whose data matches `text` or `field`/`value`, newest first; scans at most `scan`. */
  search(opts: SearchOptions): Promise<SearchResult<Data, Result>> {
    return searchJobs<Data, Result>(this.ctx, opts);
  }

  /** Latency (the oldest waiting job's age) and throughput (per minute, last 5 minutes). */
  stats(): Promise<QueueStats> {
    return queueStats(this.ctx);
  }

  async counts(): Promise<JobCounts> {
    return countJobs(this.conn.client, await this.open());
  }

  /** False for a name nothing has used yet (no job, schedule, setting or worker), or one obliterated. */
  async exists(): Promise<boolean> {
    return queueExists(this.conn.client, await this.open());
  }

  /**
   * Completed jobs, failed attempts and dead jobs per `bucketMs` (default a minute) over the last
   * `windowMs` (default an hour, within setMetricsRetention), on Redis's clock: throughput, failure rate.
   */
  metrics(opts: { windowMs?: number; bucketMs?: number } = {}): Promise<QueueMetrics> {
    return readMetrics(this.ctx, opts);
  }

  /** Keeps metrics for `retentionMs` (whole minutes, up to 7 days; default 1 h), in Redis, for every process. */
  setMetricsRetention(retentionMs: number): Promise<void> {
    return setMetricsRetention(this.ctx, retentionMs);
  }

  /**
   * Why a job is where it is: its state and reasons with stable codes (PAUSED, DELAYED, BLOCKED,
   * QUEUED with how many jobs are ahead, CONCURRENCY_LIMIT, NO_WORKERS, RUNNING, PREFETCHED, COMPLETED,
   * DEAD), for "why isn't this job running?". Throws JobNotFoundError for an unknown id.
   */
  async explain(id: string): Promise<Explanation> {
    checkJobId(id);
    return explainJob(this.conn.client, await this.open(), id);
  }

  /**
   * The flow around a job: every job reachable from it through dependsOn edges, up (its parents) and
   * down (the jobs that depend on it), across queues of the same prefix, breadth-first, at most
   * `maxNodes` (default 500, at most 10 000) jobs; `truncated` and `cut` say where the walk stopped.
   * Reads, not atomic across queues. Throws JobNotFoundError for an unknown id. docs/workflows.md.
   */
  async flow(id: string, opts?: FlowOptions): Promise<Flow> {
    return readFlow(this.ctx, id, opts);
  }

  /** Workers whose heartbeat has not expired. */
  async workers(): Promise<WorkerDescription[]> {
    return listWorkers(this.conn.client, await this.open());
  }

  // ---- changing jobs -------------------------------------------------------------------------

  /** Dead or completed -> waiting, with a fresh budget of maxAttempts. Errors so far are kept. */
  retry(id: string): Promise<void> {
    return admin.changeJob(this.ctx, 'retry', id);
  }

  /** Deletes a job that is not active. */
  remove(id: string): Promise<void> {
    return admin.changeJob(this.ctx, 'remove', id);
  }

  /**
   * Appends a line to a job's log from outside its processor (an operator's note, a webhook's
   * answer), in any state: the log `job.log` writes, read back with `getJob(id).logs`. Same limits: a
   * line is cut at 2 000 characters and the last 100 lines are kept. Resolves with the number of lines
   * the log holds; JobNotFoundError for an unknown id.
   */
  addJobLog(id: string, line: string): Promise<number> {
    return admin.addJobLog(this.ctx, id, line);
  }

  /** Makes a delayed job due now. */
  promote(id: string): Promise<void> {
    return admin.changeJob(this.ctx, 'promote', id);
  }

  /**
   * Ends a job that has not finished, at once, as dead with a CancelledError (no retry). A running job's
   * worker is told to abort it (job.signal fires) and its late outcome is refused.
   *
   * With `{ flow: true }`: the job and every job below it (its dependents, transitively, across queues)
   * that has not ended, children first, each by the same atomic cancel (a sequence of cancels, not
   * one); jobs already ended are reported, not refused. Bounded as flow() is (`maxNodes`).
   * Given options, resolves with what it cancelled (without, with nothing, as it always has).
   * docs/workflows.md.
   */
  cancel(id: string): Promise<void>;
  cancel(id: string, opts: CancelOptions): Promise<CancelOutcome>;
  cancel(id: string, opts?: CancelOptions): Promise<unknown> {
    if (opts === undefined) return admin.changeJob(this.ctx, 'cancel', id);
    return cancelJobs(this.ctx, id, opts);
  }

  /**
   * Sends signal `name` with `payload` (JSON, within maxPayloadBytes) to job `id`, for its processor's
   * `job.waitForSignal(name)`. A job that has not ended keeps it until a wait takes it (`delivered:
   * true`); a job parked waiting for this name runs again (`woke: true`). A job that has ended or does
   * not exist takes nothing, and the answer says so (`delivered: false` with the `reason`).
   */
  signal(id: string, name: string, payload?: unknown): Promise<SignalResult> {
    return signals.sendSignal(this.ctx, id, name, payload);
  }

  /** New data (validated like add) for a job that is not active (an active one: job.updateData). */
  updateData(id: string, data: Data): Promise<void> {
    return edits.updateData(this.ctx, id, data);
  }

  /** New priority for a waiting, delayed or blocked job; a waiting one moves to the back of that priority. */
  changePriority(id: string, priority: number): Promise<void> {
    return edits.changePriority(this.ctx, id, priority);
  }

  /** A waiting, delayed or blocked job becomes due `delayMs` from now (Redis clock; 0: waiting at once). */
  changeDelay(id: string, delayMs: number): Promise<void> {
    return edits.changeDelay(this.ctx, id, delayMs);
  }

  /**
   * Deletes every waiting job and every delayed one (`delayed: false` keeps the delayed ones), and
   * blocked ones with `blocked: true`; returns how many. docs/admin.md.
   */
  drain(opts: DrainOptions = {}): Promise<number> {
    return edits.drain(this.ctx, opts);
  }

  /**
   * Deletes every key of the queue (jobs, schedules, settings, events, metrics, groups, dedupe keys...)
   * in every partition. QueueActiveError while jobs are active, unless `force` (their workers' outcomes
   * are then refused). Stop the workers first: a running worker writes its heartbeat again. See docs/admin.md.
   */
  async obliterate(opts: { force?: boolean } = {}): Promise<void> {
    await edits.obliterate(this.ctx, opts);
    // The partition count was deleted with the rest: the next call records it again.
    this.opener.forget();
  }

  /**
   * Retries the jobs in `state` (default dead) at the time of the call, oldest first, at most `max`
   * (default and maximum 10 000): a snapshot, so jobs that die again are not looped on. `more` says
   * some were left (call again); `failed` lists the ids that could not be retried and why.
   */
  retryJobs(opts: BulkOptions<'dead' | 'completed'> = {}): Promise<BulkOutcome> {
    return retryJobs(this, opts);
  }

  /** Removes the jobs in `state` at the time of the call (not active ones), at most `max`; see retryJobs. */
  removeJobs(opts: BulkOptions<Exclude<JobState, 'active'>>): Promise<BulkOutcome> {
    return removeJobs(this, opts);
  }

  /**
   * Deletes completed or dead jobs that finished more than `olderThanMs` ago (Redis clock; 0: all),
   * oldest first, atomically per batch of up to 1 000, at most `limit` in all (default 10 000).
   * Resolves with how many went and whether old ones remain. Each batch appends a `cleaned` event.
   */
  clean(state: 'completed' | 'dead', opts: admin.CleanOptions = {}): Promise<admin.CleanOutcome> {
    return admin.cleanJobs(this.ctx, state, opts);
  }

  // ---- queue settings ------------------------------------------------------------------------

  /** Stops every worker of this queue from claiming jobs (active ones finish). A `paused` event if it was not paused. */
  pause(): Promise<void> {
    return admin.setPaused(this.ctx, true);
  }

  /**
   * Lets workers claim again; also lifts a pause set by a processor's RateLimitError. A `resumed`
   * event if it was paused (or held by a RateLimitError).
   */
  resume(): Promise<void> {
    return admin.setPaused(this.ctx, false);
  }

  /** True when the queue is paused (in a partitioned queue: when any partition is). */
  isPaused(): Promise<boolean> {
    return admin.isPaused(this.ctx);
  }

  /**
   * Caps the number of active jobs of this queue across all workers (`null` removes the cap). Enforced
   * when jobs are claimed; workers held back are woken as soon as an active job finishes (or the cap is
   * raised). In a partitioned queue the cap applies to each partition (see docs/scaling.md).
   */
  setGlobalConcurrency(limit: number | null): Promise<void> {
    return admin.setGlobalConcurrency(this.ctx, limit);
  }

  getGlobalConcurrency(): Promise<number | null> {
    return admin.getGlobalConcurrency(this.ctx);
  }

  /**
   * Caps job starts of this queue per window across all workers (`null` removes it). Stored in Redis
   * and obeyed by every worker at once; while set it replaces the workers' own `limiter` option. In a
   * partitioned queue each partition allows max / partitions (rounded up). See docs/groups.md.
   */
  setRateLimit(limit: RateLimit | null): Promise<void> {
    return setRateLimit(this.ctx, limit);
  }

  getRateLimit(): Promise<RateLimit | null> {
    return getRateLimit(this.ctx);
  }

  /**
   * Sets the default limits of every group, or with `{ group }` one group's override (fields left out
   * inherit the default; `null` fields mean no limit for that group). `null` limits remove them (the
   * override, or every default). Takes effect at the next claim, without restarts. See docs/groups.md.
   */
  setGroupLimits(limits: GroupLimits | null, opts?: { group?: string }): Promise<void> {
    return setGroupLimits(this.ctx, limits, opts);
  }

  /** The default group limits, or with `{ group }` the limits in force for that group and its override. */
  getGroupLimits(opts?: { group?: string }): Promise<EffectiveGroupLimits> {
    return getGroupLimits(this.ctx, opts);
  }

  /** Groups with waiting or active jobs, most waiting first, with their counts and limits; paged. */
  groups(opts?: { limit?: number; cursor?: string | null }): Promise<GroupPage> {
    return listGroups(this.ctx, opts);
  }

  /**
   * One recovery pass (what every worker does every recoverIntervalMs): jobs whose lease expired go
   * back to waiting, or dead when their attempts are spent. For queues whose workers are all gone.
   */
  recoverExpired(opts: { deadRetention?: RetentionRule } = {}): Promise<RecoveredJobs> {
    return admin.recoverAll(this.ctx, opts);
  }

  // ---- schedules -----------------------------------------------------------------------------

  /**
   * Creates or replaces the repeatable schedule `key`: `{ cron, tz? }` (tz defaults to UTC) or
   * `{ everyMs }`. Exactly one job runs per tick however many workers run. Upserting an identical
   * schedule changes nothing, so it is safe to call at every start.
   */
  schedule(
    key: string,
    timing: ScheduleTiming,
    options: ScheduleOptions<Data>,
  ): Promise<{ version: number; changed: boolean }> {
    return upsertSchedule(this.ctx, key, timing, options);
  }

  /** Every schedule with its pending occurrence and next run times, soonest first. */
  schedules(): Promise<ScheduleInfo<Data>[]> {
    return listSchedules<Data>(this.ctx);
  }

  /** Deletes a schedule (and its next occurrence if it has not started). Returns false if there was none. */
  unschedule(key: string): Promise<boolean> {
    return removeSchedule(this.ctx, key);
  }

  // ---- events and closing --------------------------------------------------------------------

  /**
   * Lifecycle events of this queue, from any process, as an async iterator: per job (added, active,
   * progress, completed with its `result`, failed, retrying, dead, recovered, retried, promoted,
   * cancelled, removed, released, snoozed, rateLimited, duplicated, deduplicated with its `key`) and
   * queue-wide, with jobId '' (paused, resumed, drained, cleaned with its `count`). docs/events.md.
   * Uses its own connection(s), closed when the loop ends (break, or `signal` aborted). A partitioned
   * queue reads each partition's stream and yields events as they arrive (ordered per partition;
   * `event.partition` says which, and a `from` stream id applies to every partition's stream).
   */
  events(opts: ReadEventsOptions = {}): AsyncGenerator<QueueEvent> {
    return queueEvents(this.ctx, opts);
  }

  async close(): Promise<void> {
    if (this.opener.closed) return;
    this.opener.closed = true;
    await this.waiter.close();
    await closeConnection(this.conn);
  }
}
