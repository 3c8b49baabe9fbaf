/**
 * Queue: adds jobs, and is the admin API (inspect, count, retry, remove, pause) that the CLI and
 * the dashboard are built on. Holds no state besides its connections.
 */
import { type Connection, checkServer, closeConnection, connect, duplicate } from './connection.js';
import { BULK_CHUNK, SCRIPT_BATCH_LIMIT } from './defaults.js';
import { DoneListener } from './done-listener.js';
import {
  ClosedError,
  errorFromScriptReply,
  JobFailedError,
  JobNotFoundError,
  ValidationError,
  WaitTimeoutError,
} from './errors.js';
import { type QueueEvent, type ReadEventsOptions, readEvents } from './events.js';
import { annexFields, annexOf, decodeRecord, encodeOptionTail } from './job-record.js';
import { type QueueKeys, queueKeys } from './keys.js';
import {
  type QueueOptions,
  type ResolvedQueueOptions,
  resolveAddOptions,
  resolveQueueOptions,
} from './options.js';
import { type RecoveredJobs, recoverExpired } from './recovery.js';
import {
  listSchedules,
  removeSchedule,
  type ScheduleInfo,
  type ScheduleOptions,
  type ScheduleTiming,
  serverNow,
  upsertSchedule,
} from './schedules.js';
import { type RedisClient, runScript, scripts } from './scripts.js';
import { stateName } from './states.js';
import type {
  AddedJob,
  JobCounts,
  JobInfo,
  JobOptions,
  JobState,
  QueueMetrics,
  RetentionRule,
  WorkerDescription,
} from './types.js';
import { checkInt, checkJobId, checkQueueName, toJson } from './validate.js';

type AddRow = Record<
  'id' | 'priority' | 'delayMs' | 'runAt' | 'optionTail' | 'data' | 'dependsOn' | 'depMode',
  string | number
>;

export class Queue<Data = unknown, Result = unknown> {
  readonly name: string;
  readonly keys: QueueKeys;
  readonly options: ResolvedQueueOptions;
  private readonly conn: Connection;
  private subscriber: RedisClient | null = null;
  private doneListener: DoneListener | null = null;
  private closed = false;

  constructor(name: string, opts: QueueOptions = {}) {
    this.name = checkQueueName(name);
    this.options = resolveQueueOptions(opts);
    this.keys = queueKeys(this.options.prefix, name);
    this.conn = connect(opts.connection, 'queue');
  }

  /** The ioredis client this queue uses (shared with a Worker if you passed it one). */
  get client(): RedisClient {
    return this.conn.client;
  }

  private async ready(): Promise<RedisClient> {
    if (this.closed) throw new ClosedError(`Queue ${this.name}`);
    await checkServer(this.conn.client, this.options.strict, this.options.logger);
    return this.conn.client;
  }

  private row(data: Data, opts: JobOptions | undefined, what: string): AddRow {
    const o = resolveAddOptions(opts, this.options.defaults);
    return {
      id: o.id,
      priority: o.priority,
      delayMs: o.delayMs,
      runAt: o.runAt,
      optionTail: encodeOptionTail(o),
      data: toJson(what, data, this.options.maxPayloadBytes),
      dependsOn: o.dependsOn,
      depMode: o.depMode,
    };
  }

  private async runAdd(rows: AddRow[]): Promise<AddedJob[]> {
    const client = await this.ready();
    const reply = (await runScript(
      client,
      scripts.add,
      this.keys,
      { now: '', wakeChannel: this.keys.wakeChannel, eventsMaxLen: this.options.eventsMaxLen },
      rows,
    ).catch((err: unknown) => {
      const parent = /SURETY_UNKNOWN_PARENT (.*)$/.exec(err instanceof Error ? err.message : '');
      throw parent ? new JobNotFoundError(parent[1] as string) : err;
    })) as (string | number)[];
    const out: AddedJob[] = [];
    for (let i = 0; i < reply.length; i += 3) {
      out.push({
        id: String(reply[i]),
        isNew: reply[i + 1] === 1,
        state: stateName(reply[i + 2] as string) ?? 'waiting',
      });
    }
    return out;
  }

  /** Adds one job. With an `id` that exists, returns that job (`isNew: false`) and enqueues nothing. */
  async add(data: Data, opts?: JobOptions): Promise<AddedJob> {
    const [added] = await this.runAdd([this.row(data, opts, 'job data')]);
    return added!;
  }

  /**
   * Adds many jobs, BULK_CHUNK per round trip; each chunk is atomic. Every item is validated before
   * anything is sent, so one bad item rejects the whole call and writes nothing.
   */
  async addBulk(items: readonly { data: Data; opts?: JobOptions }[]): Promise<AddedJob[]> {
    if (!Array.isArray(items)) throw new ValidationError('addBulk expects an array of { data, opts }');
    const rows = items.map((item, i) => this.row(item.data, item.opts, `item ${i} data`));
    const chunks: Promise<AddedJob[]>[] = [];
    for (let i = 0; i < rows.length; i += BULK_CHUNK) chunks.push(this.runAdd(rows.slice(i, i + BULK_CHUNK)));
    return (await Promise.all(chunks)).flat();
  }

  async getJob(id: string): Promise<JobInfo<Data, Result> | null> {
    checkJobId(id);
    const client = await this.ready();
    const [record, annex] = await Promise.all([
      client.hget(this.keys.jobs, id),
      client.hmget(this.keys.errors, ...annexFields(id)),
    ]);
    return record === null ? null : decodeRecord<Data, Result>(id, record, annexOf(annex, 0));
  }

  /** Jobs in one state, oldest first (waiting: in claim order for priority 0), paged. */
  async getJobs(
    state: JobState,
    opts: { offset?: number; limit?: number } = {},
  ): Promise<JobInfo<Data, Result>[]> {
    const offset = checkInt('offset', opts.offset ?? 0, 0);
    const limit = checkInt('limit', opts.limit ?? 100, 1, 10_000);
    const client = await this.ready();
    const k = this.keys;
    let ids: string[];
    if (state === 'waiting') {
      const urgent = await client.zrangebyscore(k.prio, '-inf', '(0');
      const listed = await client.lrange(k.waiting, 0, offset + limit);
      const rest = await client.zrangebyscore(k.prio, 0, '+inf', 'LIMIT', 0, offset + limit);
      ids = [...urgent, ...listed, ...rest].slice(offset, offset + limit);
    } else if (state === 'blocked') {
      // A hash has no order: blocked jobs are listed in id order.
      ids = (await client.hkeys(k.deps)).sort().slice(offset, offset + limit);
    } else {
      const set = { delayed: k.delayed, active: k.active, completed: k.completed, dead: k.dead }[state];
      if (!set)
        throw new ValidationError(
          `state must be waiting, delayed, blocked, active, completed or dead, got ${state}`,
        );
      // Scores below +inf: skips the active set's sentinel member.
      ids = await client.zrangebyscore(set, '-inf', '(+inf', 'LIMIT', offset, limit);
    }
    if (ids.length === 0) return [];
    const [records, annex] = await Promise.all([
      client.hmget(k.jobs, ...ids),
      client.hmget(k.errors, ...ids.flatMap(annexFields)),
    ]);
    const out: JobInfo<Data, Result>[] = [];
    ids.forEach((id, i) => {
      const rec = records[i];
      if (rec) out.push(decodeRecord<Data, Result>(id, rec, annexOf(annex, i)));
    });
    return out;
  }

  async counts(): Promise<JobCounts> {
    const client = await this.ready();
    const k = this.keys;
    const [waiting, prio, delayed, blocked, active, completed, dead] = await Promise.all([
      client.llen(k.waiting),
      client.zcard(k.prio),
      client.zcard(k.delayed),
      client.hlen(k.deps),
      client.zcard(k.active),
      client.zcard(k.completed),
      client.zcard(k.dead),
    ]);
    // `active` holds a sentinel member besides the jobs (see includes/active_sentinel.lua).
    return { waiting: waiting + prio, delayed, blocked, active: Math.max(active - 1, 0), completed, dead };
  }

  /**
   * Resolves with the job's result once it completes; rejects with JobFailedError (every attempt's
   * error) if it ends dead, WaitTimeoutError after `timeoutMs`, JobNotFoundError if it does not exist.
   */
  async waitFor(id: string, opts: { timeoutMs?: number } = {}): Promise<Result> {
    checkJobId(id);
    const timeoutMs = checkInt('timeoutMs', opts.timeoutMs ?? 60_000, 1);
    const client = await this.ready();
    if (!this.doneListener) {
      this.subscriber = duplicate(client);
      this.doneListener = new DoneListener(this.subscriber, this.keys.doneChannel);
    }
    return new Promise<Result>((resolve, reject) => {
      let settled = false;
      let unwatch: () => void = () => {};
      let timer: NodeJS.Timeout | undefined;
      const finish = (fn: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        unwatch();
        fn();
      };
      const check = () => {
        this.getJob(id).then(
          (job) => {
            if (!job) finish(() => reject(new JobNotFoundError(id)));
            else if (job.state === 'completed') finish(() => resolve(job.result as Result));
            else if (job.state === 'dead') finish(() => reject(new JobFailedError(id, job.errors)));
          },
          (err) => finish(() => reject(err)),
        );
      };
      timer = setTimeout(() => finish(() => reject(new WaitTimeoutError(id, timeoutMs))), timeoutMs);
      this.doneListener!.watch(id, check).then(
        (u) => {
          unwatch = u;
          if (settled) u();
          else check();
        },
        (err) => finish(() => reject(err)),
      );
    });
  }

  private async adminScript(
    spec: typeof scripts.retry | typeof scripts.promote | typeof scripts.remove,
    id: string,
    operation: string,
  ): Promise<void> {
    checkJobId(id);
    const client = await this.ready();
    const reply = (await runScript(client, spec, this.keys, {
      id,
      wakeChannel: this.keys.wakeChannel,
      doneChannel: this.keys.doneChannel,
      eventsMaxLen: this.options.eventsMaxLen,
    })) as string;
    const err = errorFromScriptReply(reply, id, operation);
    if (err) throw err;
  }

  /** Dead or completed -> waiting, with a fresh budget of maxAttempts. Errors so far are kept. */
  retry(id: string): Promise<void> {
    return this.adminScript(scripts.retry, id, 'retry');
  }

  /** Deletes a job that is not active. */
  remove(id: string): Promise<void> {
    return this.adminScript(scripts.remove, id, 'remove');
  }

  /** Makes a delayed job due now. */
  promote(id: string): Promise<void> {
    return this.adminScript(scripts.promote, id, 'promote');
  }

  /**
   * Ends a job that has not finished, at once, as dead with a CancelledError (no retry). A running job's
   * worker is told to abort it (job.signal fires) and its late outcome is refused.
   */
  async cancel(id: string): Promise<void> {
    checkJobId(id);
    const k = this.keys;
    const reply = (await runScript(await this.ready(), scripts.cancel, k, {
      now: '',
      id,
      wakeChannel: k.wakeChannel,
      doneChannel: k.doneChannel,
      eventsMaxLen: this.options.eventsMaxLen,
    })) as string;
    const err = errorFromScriptReply(reply, id, 'cancel');
    if (err) throw err;
  }

  /**
   * Deletes completed or dead jobs that finished more than `olderThanMs` ago (Redis clock; 0: all),
   * oldest first, atomically per batch of up to 1 000, at most `limit` in all (default 10 000).
   * Resolves with how many went and whether old ones remain.
   */
  async clean(
    state: 'completed' | 'dead',
    opts: { olderThanMs?: number; limit?: number } = {},
  ): Promise<{ removed: number; more: boolean }> {
    if (state !== 'completed' && state !== 'dead') {
      throw new ValidationError(`clean takes the state 'completed' or 'dead', got ${JSON.stringify(state)}`);
    }
    const olderThanMs = checkInt('olderThanMs', opts.olderThanMs ?? 0, 0);
    const limit = checkInt('limit', opts.limit ?? 10_000, 1, 1_000_000);
    const client = await this.ready();
    const cutoff = (await serverNow(client)) - olderThanMs;
    const keys = { ...this.keys, finished: state === 'completed' ? this.keys.completed : this.keys.dead };
    let removed = 0;
    for (;;) {
      const batch = Math.min(SCRIPT_BATCH_LIMIT, limit - removed);
      const [n, more] = (await runScript(client, scripts.clean, keys, { cutoff, limit: batch })) as [
        number,
        number,
      ];
      removed += n;
      if (more === 0) return { removed, more: false };
      if (removed >= limit) return { removed, more: true };
    }
  }

  /** Stops every worker of this queue from claiming jobs (active ones finish). */
  async pause(): Promise<void> {
    await runScript(await this.ready(), scripts.setPaused, this.keys, {
      paused: '1',
      wakeChannel: this.keys.wakeChannel,
    });
  }

  async resume(): Promise<void> {
    await runScript(await this.ready(), scripts.setPaused, this.keys, {
      paused: '0',
      wakeChannel: this.keys.wakeChannel,
    });
  }

  /**
   * Caps the number of active jobs of this queue across all workers (`null` removes the cap). Enforced
   * when jobs are claimed; workers held back are woken as soon as an active job finishes.
   */
  async setGlobalConcurrency(limit: number | null): Promise<void> {
    const client = await this.ready();
    if (limit === null) await client.hdel(this.keys.meta, 'concurrency');
    else await client.hset(this.keys.meta, 'concurrency', checkInt('globalConcurrency', limit, 1, 1_000_000));
  }

  async getGlobalConcurrency(): Promise<number | null> {
    const v = await (await this.ready()).hget(this.keys.meta, 'concurrency');
    return v === null ? null : Number(v);
  }

  async isPaused(): Promise<boolean> {
    return (await (await this.ready()).hexists(this.keys.meta, 'paused')) === 1;
  }

  /**
   * Creates or replaces the repeatable schedule `key`: `{ cron, tz? }` (tz defaults to UTC) or
   * `{ everyMs }`. Exactly one job runs per tick however many workers run. Upserting an identical
   * schedule changes nothing, so it is safe to call at every start.
   */
  async schedule(
    key: string,
    timing: ScheduleTiming,
    options: ScheduleOptions<Data>,
  ): Promise<{ version: number; changed: boolean }> {
    return upsertSchedule(await this.ready(), this.keys, key, timing, options, this.options.maxPayloadBytes);
  }

  /** Every schedule with its pending occurrence and next run times, soonest first. */
  async schedules(): Promise<ScheduleInfo<Data>[]> {
    return listSchedules<Data>(await this.ready(), this.keys);
  }

  /** Deletes a schedule (and its next occurrence if it has not started). Returns false if there was none. */
  async unschedule(key: string): Promise<boolean> {
    return removeSchedule(await this.ready(), this.keys, key);
  }

  /**
   * One recovery pass (what every worker does every recoverIntervalMs): jobs whose lease expired go
   * back to waiting, or dead when their attempts are spent. For queues whose workers are all gone.
   */
  async recoverExpired(opts: { deadRetention?: RetentionRule } = {}): Promise<RecoveredJobs> {
    return recoverExpired(await this.ready(), this.keys, opts.deadRetention, this.options.eventsMaxLen);
  }

  /**
   * Lifecycle events of this queue (added, active, progress, completed, failed, retrying, dead,
   * recovered, retried, promoted, cancelled, removed), from any process, as an async iterator.
   * Uses its own connection, closed when the loop ends (break, or `signal` aborted).
   */
  async *events(opts: ReadEventsOptions = {}): AsyncGenerator<QueueEvent> {
    const client = duplicate(await this.ready());
    const onAbort = () => client.disconnect();
    opts.signal?.addEventListener('abort', onAbort);
    try {
      yield* readEvents(client, this.keys.events, opts);
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
      client.disconnect();
    }
  }

  /**
   * Completed jobs, failed attempts and dead jobs per minute over the last `windowMs` (at most an hour),
   * on Redis's clock: what dashboards chart as throughput and failure rate.
   */
  async metrics(opts: { windowMs?: number } = {}): Promise<QueueMetrics> {
    const windowMs = checkInt('windowMs', opts.windowMs ?? 3_600_000, 60_000, 3_600_000);
    const client = await this.ready();
    const nowMinute = Math.floor((await serverNow(client)) / 60_000);
    const minutes = Array.from(
      { length: Math.ceil(windowMs / 60_000) },
      (_, i) => nowMinute - Math.ceil(windowMs / 60_000) + 1 + i,
    );
    const values = await client.hmget(
      this.keys.stats,
      ...minutes.flatMap((m) => [`${m}:c`, `${m}:f`, `${m}:x`]),
    );
    const out: QueueMetrics = { bucketMs: 60_000, buckets: [], completed: 0, failed: 0, dead: 0 };
    minutes.forEach((m, i) => {
      const b = {
        at: m * 60_000,
        completed: Number(values[i * 3] ?? 0),
        failed: Number(values[i * 3 + 1] ?? 0),
        dead: Number(values[i * 3 + 2] ?? 0),
      };
      out.buckets.push(b);
      out.completed += b.completed;
      out.failed += b.failed;
      out.dead += b.dead;
    });
    return out;
  }

  /** Workers whose heartbeat has not expired. */
  async workers(): Promise<WorkerDescription[]> {
    const client = await this.ready();
    const now = await serverNow(client);
    const ids = await client.zrangebyscore(this.keys.workers, now, '+inf');
    if (ids.length === 0) return [];
    const infos = await client.hmget(this.keys.workerInfo, ...ids);
    const out: WorkerDescription[] = [];
    ids.forEach((id, i) => {
      const info = infos[i];
      if (info) out.push({ id, ...(JSON.parse(info) as Omit<WorkerDescription, 'id'>) });
    });
    return out;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.subscriber) await closeConnection({ client: this.subscriber, owned: true });
    await closeConnection(this.conn);
  }
}
