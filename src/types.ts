import type { JobStateName } from './states.js';

/** One attempt's error as a job keeps it (JobInfo.errors); `code` is a SuretyError code when it has one. */
export interface JobAttemptError {
  attempt: number;
  name: string;
  message: string;
  stack?: string;
  code?: string;
  /** Epoch ms (Redis server clock) at which the attempt ended. */
  at: number;
}

/** A parent job of another queue under the same prefix (the `dependsOn` option). */
export interface CrossQueueParent {
  /** The parent's queue (a queue name: the same prefix is implied). */
  queue: string;
  /** The parent's job id in that queue. */
  id: string;
}

/** `blocked`: waiting for the jobs it depends on (dependsOn) to complete. */
export type JobState = JobStateName;

export interface BackoffOptions {
  /** `fixed`: delayMs each time; `exponential`: delayMs * 2^(n-1); `custom`: Worker's backoffStrategies[name]. */
  type: 'fixed' | 'exponential' | 'custom';
  /** Base delay in ms (fixed and exponential). */
  delayMs?: number;
  /** Cap for exponential delays. Default 3 600 000 (1 h). */
  maxDelayMs?: number;
  /** Randomise each delay to 50-100 % of its value, so failures do not retry in lockstep. */
  jitter?: boolean;
  /** Name of a strategy in the Worker's `backoffStrategies` (custom only). */
  name?: string;
}

/** A child for job.addChildren: a job of this queue, or of `queue` (same prefix). */
export interface ChildJob<Data = unknown> {
  /** The child's queue; default the parent's. */
  queue?: string;
  data: Data;
  /**
   * queue.add's options but `dedupe`. `id`: the child's id (default: a new UUID, the same in every
   * run of the parent). `ignoreDependencyFailure`: if the child ends dead, waitForChildren resolves
   * (its result undefined) instead of throwing DependencyFailedError.
   */
  opts?: Omit<JobOptions, 'dedupe'>;
}

/** A child job.addChildren added: its queue and id. */
export interface ChildRef {
  queue: string;
  id: string;
}

export interface JobOptions {
  /** Your id: adding an id that exists returns the existing job and enqueues nothing. */
  id?: string;
  /**
   * The job's name (e.g. 'send-email'): shown by getJob, the CLI and the dashboard; a Worker given a
   * `{ [name]: processor }` map runs the processor of that name. 1-256 characters, no '|' or control
   * characters.
   */
  name?: string;
  /**
   * A job not started by this time (epoch ms or Date) never runs: it ends dead with an ExpiredError.
   * Give either expireAt or ttlMs.
   */
  expireAt?: Date | number;
  /** As expireAt, this many ms after the add (Redis clock). */
  ttlMs?: number;
  /**
   * The job's own retention, beside the worker's rules: `completed: false` deletes the job as soon as it
   * completes, `dead: false` as soon as it ends dead. Default: kept by the worker's retention rules.
   */
  keep?: { completed?: boolean; dead?: boolean };
  /** Run no earlier than this many ms from now (Redis clock). */
  delayMs?: number;
  /** Run no earlier than this time (epoch ms or Date). */
  runAt?: Date | number;
  /** Lower runs first; FIFO within a priority. Integer in [-1 000 000, 1 000 000], default 0. */
  priority?: number;
  /**
   * Last in, first out: the job goes to the front of its priority (of its group's line, when it has a
   * group) instead of the back, so the newest such job runs first. It goes to the front each time it
   * becomes waiting: at the add, when it falls due (delayMs, runAt, a retry's backoff, a snooze), on a
   * retry without backoff, and on promote, retry, changeDelay or changePriority. Default false. See
   * docs/data-layout.md, "Order inside a priority".
   */
  lifo?: boolean;
  /** Attempts before the job goes dead. Integer 1..1000, default 3. */
  maxAttempts?: number;
  /** Lease (visibility timeout) of one attempt, renewed by the worker while it runs. Default 30 000. */
  leaseMs?: number;
  /** Delay between failed attempts. Default exponential from 1 s, capped at 1 h, with jitter. */
  backoff?: BackoffOptions;
  /**
   * Fail an attempt that runs longer than this (TimeoutError, retried like any failure); the
   * processor's job.signal aborts at that moment. Default: no timeout.
   */
  timeoutMs?: number;
  /**
   * Jobs that must complete before this one runs (it is `blocked` until then): ids of this queue's
   * jobs, or `{ queue, id }` for a job of another queue under the same prefix (partitioned or not). If
   * one of them ends dead, this job ends dead with a DependencyFailedError, unless
   * ignoreDependencyFailure. Parents must exist already (or, of this queue, be added earlier in the
   * same addBulk call); a missing one is refused with ERR_JOB_NOT_FOUND and nothing is written.
   */
  dependsOn?: (string | CrossQueueParent)[];
  /** Run once every parent has finished, even if some ended dead. Default false. */
  ignoreDependencyFailure?: boolean;
  /**
   * Partitioned queues only: jobs with the same partitionKey live in one partition (e.g. a dependency
   * graph, or jobs whose relative order matters). Default: the job's id decides (see docs/scaling.md).
   */
  partitionKey?: string;
  /**
   * The job's group (e.g. a tenant): workers serve groups round-robin, and queue.setGroupLimits caps
   * each group's concurrency and rate. 1-256 characters, no '|' or control characters. In a
   * partitioned queue the group decides the partition (unless partitionKey is given). See docs/groups.md.
   */
  group?: string;
  /**
   * Deduplication by key (see docs/groups.md#dedupe). `throttle` (default): while the job that took
   * the key is unfinished, or for `ttlMs` after it was added when given, adds with the key return that
   * job (`isNew: false`) and enqueue nothing. `debounce`: while that job is waiting or delayed, an add
   * rewrites it (new data and options, due time pushed back) and returns it with `isNew: false`; once
   * it has started, an add creates a new job (with `keepLastIfActive`, one that waits until the running
   * job has finished). Not with dependsOn.
   */
  dedupe?: DedupeOptions;
}

export interface DedupeOptions {
  /** 1-256 characters, no '|' or control characters. */
  key: string;
  /** Default 'throttle'. */
  mode?: 'throttle' | 'debounce';
  /** Throttle: the window lasts this long from the add, whether or not the job finished. Debounce: the key is forgotten after this long. 1 ms .. 2^31-1 ms. */
  ttlMs?: number;
  /**
   * Debounce only (not with ttlMs): while the key's job has started and not finished (it runs, or
   * waits for its retry), an add is not run beside it: it becomes the key's one pending successor,
   * `blocked` behind that job (a later add rewrites the successor), and it becomes waiting only when
   * that job completes, ends dead, or is cancelled or removed. Two jobs of the key never run at once.
   * Default false. See docs/groups.md, "Keep the last add while the job runs".
   */
  keepLastIfActive?: boolean;
}

export interface JobInfo<Data = unknown, Result = unknown> {
  id: string;
  state: JobState;
  data: Data;
  /** Attempts started so far (every start: before a manual retry, snoozed, slept, rate-limited). */
  attempts: number;
  maxAttempts: number;
  /**
   * Attempts the job may still start before it ends dead: maxAttempts minus the attempts charged since
   * the last manual retry. Snoozes, sleeps and rate limits give their budget back; a lease lost before
   * the start was recorded is never charged: see docs/guarantees.md.
   * On a finished job (completed, dead) it is the budget it ended with, which nothing will use unless
   * the job is retried by hand (queue.retry gives it a fresh maxAttempts).
   */
  attemptsLeft: number;
  priority: number;
  leaseMs: number;
  backoff: BackoffOptions;
  /** 0 = no timeout. */
  timeoutMs: number;
  /** The job's group, when it has one. */
  group?: string;
  /** The job's name, when it has one. */
  name?: string;
  /** When it expires if not started (epoch ms), when it has a limit. */
  expireAt?: number;
  /** Times a processor snoozed it (SnoozeError). */
  snoozes: number;
  /** Its batch id, when added by addBatch. */
  batch?: string;
  /** Its own retention, when set at add. */
  keep?: { completed: boolean; dead: boolean };
  /** True when it was added with `lifo: true`. */
  lifo?: boolean;
  result?: Result;
  errors: JobAttemptError[];
  /** Results of the job's durable steps (job.step), by step name, when it has any. */
  steps?: Record<string, unknown>;
  /** The signal a parked job waits for (job.waitForSignal), and its deadline (epoch ms) if it has one. */
  waitingForSignal?: { name: string; deadline?: number };
  /**
   * The children job.addChildren added, in order, each with how it ended (absent while it runs or
   * its end is on its way); absent when it has none.
   */
  children?: { queue: string; id: string; ended?: 'completed' | 'dead' }[];
  /** The job that added this one as its child (job.addChildren). */
  parent?: { queue: string; id: string };
  /** Signals sent to the job (queue.signal) that no wait has taken yet, oldest first. */
  pendingSignals?: { name: string; payload: unknown }[];
  /** Last value passed to job.progress() by the latest attempt that reported any. */
  progress?: unknown;
  /** Lines from job.log(), oldest first (the last 100 are kept). */
  logs: string[];
  /** Jobs of this queue this one depends on (dependsOn). */
  dependsOn: string[];
  /** Jobs of other queues this one depends on (dependsOn `{ queue, id }`); absent when none. */
  dependsOnQueues?: CrossQueueParent[];
  createdAt: number;
  runAt: number;
  startedAt?: number;
  finishedAt?: number;
}

export interface AddedJob {
  id: string;
  /** False when a job with this id already existed: nothing was enqueued. */
  isNew: boolean;
  /**
   * The job's state right after the add: `waiting`, `delayed`, `blocked` (waits for parents), `dead`
   * (a parent already died), or `active` when an idle worker took it inside the add itself (a
   * handoff, docs/design.md). For an id that existed, that job's state.
   */
  state: JobState;
}

/** Options of queue.addBatch (docs/batches.md). */
export interface BatchOptions<CallbackData = unknown> {
  /**
   * The job added (once) when every member has finished, completed or dead. Its data is
   * `{ batch, total, completed, dead, deadIds, data }` (BatchCallbackData), `data` being this `data`.
   * Its options are those of queue.add, except `dedupe`, `dependsOn` and `partitionKey`.
   */
  onComplete?: { data?: CallbackData; opts?: JobOptions };
  /** The batch id (rules of job ids); default a random UUID. An id that exists is refused (BatchExistsError). */
  id?: string;
}

/** What queue.addBatch added: the batch id and one AddedJob per item, in order. */
export interface AddedBatch {
  id: string;
  /** Items with an id that existed (`isNew: false`) are not members of the batch. */
  jobs: AddedJob[];
}

/** A batch's progress (queue.batch). Kept 7 days after it finishes. */
export interface BatchInfo {
  id: string;
  /** Members: the jobs the addBatch call created. */
  total: number;
  /** Members not finished yet. */
  pending: number;
  completed: number;
  /** Members that ended dead, were cancelled, or were removed before finishing. */
  dead: number;
  /** The first 100 dead members' ids. */
  deadIds: string[];
  /** Epoch ms (Redis clock) of the addBatch call. */
  createdAt: number;
  /** The callback job's id, once the batch has finished (when it has onComplete). */
  callbackId?: string;
  /** Epoch ms at which the last member finished. */
  finishedAt?: number;
}

/** The data of a batch's onComplete job. */
export interface BatchCallbackData<CallbackData = unknown> {
  batch: string;
  total: number;
  completed: number;
  dead: number;
  /** The first 100 dead members' ids. */
  deadIds: string[];
  /** onComplete.data (absent when it was undefined). */
  data?: CallbackData;
}

export interface JobCounts {
  waiting: number;
  delayed: number;
  blocked: number;
  active: number;
  completed: number;
  dead: number;
}

/** Per-minute outcome counts of a queue (queue.metrics()). */
export interface QueueMetrics {
  /** Width of a bucket: one minute unless asked otherwise (`bucketMs`). */
  bucketMs: number;
  /** One bucket per `bucketMs` of the window, oldest first, empty ones included. */
  buckets: { at: number; completed: number; failed: number; dead: number }[];
  /** Totals over the window: completed jobs, failed attempts (retried or not), jobs that ended dead. */
  completed: number;
  failed: number;
  dead: number;
  /** How long the counters are kept (queue.setMetricsRetention; default one hour). */
  retentionMs: number;
}

export interface WorkerDescription {
  id: string;
  host: string;
  pid: number;
  startedAt: number;
  lastBeat: number;
  concurrency: number;
  activeJobIds: string[];
}

export interface RetentionRule {
  /** Keep at most this many finished jobs (0 = delete at once). */
  maxCount: number;
  /** Delete finished jobs older than this. */
  maxAgeMs: number;
}

export interface Retention {
  completed: RetentionRule;
  dead: RetentionRule;
}
