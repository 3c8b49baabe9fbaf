/**
 * Queue: adds jobs, and is the admin API (inspect, count, retry, remove, pause) that the CLI and
 * the dashboard are built on. Holds no state besides its connections.
 */
import { type Connection, checkServer, closeConnection, connect, duplicate } from './connection.js';
import { DEFAULT_RETENTION, MAX_BULK, SCRIPT_BATCH_LIMIT } from './defaults.js';
import { DoneListener } from './done-listener.js';
import {
  ClosedError,
  CrossPartitionError,
  DurabilityError,
  errorFromScriptReply,
  JobFailedError,
  JobNotFoundError,
  PartitionMismatchError,
  redisFullError,
  ValidationError,
  WaitTimeoutError,
} from './errors.js';
import { type QueueEvent, type ReadEventsOptions, readEvents } from './events.js';
import { asConnectionError, settling, untilClosed } from './in-flight.js';
import { encodeOptionTail } from './job-record.js';
import { type QueueKeys, queueKeys } from './keys.js';
import { mergeIterators } from './merge-iterators.js';
import {
  type QueueOptions,
  type ResolvedQueueOptions,
  resolveAddOptions,
  resolveQueueOptions,
  resolveRetentionRule,
} from './options.js';
import { Layout, resolveLayout, setPausedAll } from './partitions.js';
import { countJobs, listJobs, listWorkers, locate, readJob, readMetrics } from './queue-reads.js';
import { type RecoveredJobs, recoverExpired } from './recovery.js';
import {
  listSchedules,
  occurrenceId,
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
import {
  checkCallOptions,
  checkInt,
  checkJobId,
  checkKnownKeys,
  checkObject,
  checkQueueAddress,
  checkQueueName,
  checkStreamFrom,
  checkTimerMs,
  show,
  toJson,
} from './validate.js';

type AddRow = Record<
  'id' | 'priority' | 'delayMs' | 'runAt' | 'optionTail' | 'data' | 'dependsOn' | 'depMode',
  string | number
>;

export class Queue<Data = unknown, Result = unknown> {
  readonly name: string;
  readonly options: ResolvedQueueOptions;
  private readonly conn: Connection;
  /** Known at construction for a numeric `partitions`; read from Redis on first use for 'auto'. */
  private layout: Layout | null;
  private opened: Promise<Layout> | null = null;
  private subscriber: RedisClient | null = null;
  private doneListener: DoneListener | null = null;
  private closed = false;

  constructor(name: string, opts: QueueOptions = {}) {
    this.name = checkQueueName(name);
    this.options = resolveQueueOptions(opts);
    const { prefix, partitions } = this.options;
    checkQueueAddress(prefix, name);
    this.layout = partitions === 0 ? null : new Layout(prefix, name, partitions);
    this.conn = connect(opts.connection, 'queue');
  }

  /** The ioredis client this queue uses (shared with a Worker if you passed it one). */
  get client(): RedisClient {
    return this.conn.client;
  }

  /** Keys of partition 0: the queue's only keys when it is not partitioned. */
  get keys(): QueueKeys {
    return this.layout?.parts[0] ?? queueKeys(this.options.prefix, this.name);
  }

  /** The number of partitions (for `partitions: 'auto'`, known once the queue has been used). */
  get partitions(): number {
    return this.layout?.count ?? 0;
  }

  /** Checks the server and the partition count once (again after a failure), and returns the layout. */
  private open(): Promise<Layout> {
    if (this.closed) return Promise.reject(new ClosedError(`Queue ${this.name}`));
    if (!this.opened) {
      const opening = (async () => {
        await checkServer(this.conn.client, this.options.strict, this.options.logger);
        const { prefix, partitions } = this.options;
        this.layout = await resolveLayout(this.conn.client, prefix, this.name, partitions);
        return this.layout;
      })();
      // A failed open (server unreachable, count refused) is tried again by the next call.
      opening.catch(() => {
        if (this.opened === opening) this.opened = null;
      });
      this.opened = opening;
    }
    return this.opened;
  }

  private row(data: Data, opts: JobOptions | undefined, what: string): AddRow & { partitionKey: string } {
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
      partitionKey: o.partitionKey,
    };
  }

  /** The partition a new job goes to; a job's parents must share one partition. */
  private route(layout: Layout, row: AddRow & { partitionKey: string }): number {
    const parents = row.dependsOn === '' ? [] : String(row.dependsOn).split('\n');
    const p = layout.route(String(row.id), row.partitionKey, parents);
    if (row.partitionKey === '' && parents.some((parent) => layout.home(parent) !== p)) {
      throw new CrossPartitionError(
        `job ${row.id === '' ? '(new)' : JSON.stringify(row.id)} depends on jobs in different partitions (${parents
          .map((x) => `${x}: ${layout.home(x)}`)
          .join(', ')}); give the parents and the child one partitionKey`,
      );
    }
    return p;
  }

  /** Sends routed rows (`parts[i]` is row i's partition): one atomic script call per partition. */
  private async runAdd(layout: Layout, rows: AddRow[], parts: number[]): Promise<AddedJob[]> {
    const client = this.conn.client;
    // Group by partition (one atomic call per partition), keeping each job's place in the answer.
    const groups = new Map<number, number[]>();
    parts.forEach((p, i) => {
      const g = groups.get(p);
      if (g) g.push(i);
      else groups.set(p, [i]);
    });
    if (groups.size > 1) {
      // Check every partition (layout, parents) before writing to any, so that a refusal writes
      // nothing anywhere. Only the rows the check reads go, without their data.
      await Promise.all(
        [...groups].map(([p, indexes]) => {
          const checked = indexes
            .map((i) => rows[i]!)
            .filter((r) => r.id !== '' || r.dependsOn !== '')
            .map((r) => ({ ...r, data: '' }));
          return this.addScript(client, layout.parts[p]!, p, layout, checked, true);
        }),
      );
    }
    const out: AddedJob[] = new Array(rows.length);
    await Promise.all(
      [...groups].map(async ([p, indexes]) => {
        const k = layout.parts[p]!;
        const reply = await this.addScript(
          client,
          k,
          p,
          layout,
          indexes.map((i) => rows[i]!),
        );
        indexes.forEach((rowIndex, j) => {
          out[rowIndex] = {
            id: String(reply[j * 3]),
            isNew: reply[j * 3 + 1] === 1,
            state: stateName(reply[j * 3 + 2] as string) ?? 'waiting',
          };
        });
        await this.waitReplicas(client, k);
      }),
    );
    return out;
  }

  private async addScript(
    client: RedisClient,
    k: QueueKeys,
    p: number,
    layout: Layout,
    rows: AddRow[],
    checkOnly = false,
  ): Promise<(string | number)[]> {
    const args = {
      now: '',
      wakeChannel: k.wakeChannel,
      eventsMaxLen: this.options.eventsMaxLen,
      partitions: layout.count,
      idSuffix: layout.idSuffix(p),
      checkOnly: checkOnly ? '1' : '',
    };
    try {
      return (await runScript(client, scripts.add, k, args, rows)) as (string | number)[];
    } catch (err) {
      const message = err instanceof Error ? err.message : '';
      const parent = /SURETY_UNKNOWN_PARENT (.*)$/.exec(message);
      if (parent) throw new JobNotFoundError(parent[1] as string);
      const moved = /SURETY_PARTITIONS (\d+)/.exec(message);
      if (moved) throw new PartitionMismatchError(this.name, layout.count, Number(moved[1]));
      throw err;
    }
  }

  /**
   * With `durability.waitReplicas`, blocks until that many replicas have every write sent so far on the
   * connection to this partition's master (Redis WAIT). On a Cluster, WAIT rides in a pipeline with a
   * read of the partition's keys, so it reaches the master that ran the add.
   */
  private async waitReplicas(client: RedisClient, k: QueueKeys): Promise<void> {
    const { waitReplicas, timeoutMs } = this.options.durability;
    if (waitReplicas === 0) return;
    // untilClosed: a pipeline whose replies are all lost with the connection would never settle; one
    // cut halfway reports an untyped AbortError for WAIT. Both become a ConnectionError.
    const replies = await untilClosed(
      client,
      client.pipeline().exists(k.jobs).wait(waitReplicas, timeoutMs).exec(),
    );
    const [err, acked] = replies?.[1] ?? [new Error('no reply to WAIT'), 0];
    if (err) throw asConnectionError(err);
    if (Number(acked) < waitReplicas) {
      throw new DurabilityError(
        `only ${acked} of ${waitReplicas} replica(s) confirmed the add within ${timeoutMs} ms; the job is on the master but may be lost if it fails now`,
        Number(acked),
        waitReplicas,
      );
    }
  }

  /** Adds one job. With an `id` that exists, returns that job (`isNew: false`) and enqueues nothing. */
  async add(data: Data, opts?: JobOptions): Promise<AddedJob> {
    const row = this.row(data, opts, 'job data');
    const layout = await this.open();
    const [added] = await this.runAdd(layout, [row], [this.route(layout, row)]);
    return added!;
  }

  /**
   * Adds up to MAX_BULK (10 000) jobs, in order; an id given twice (or one that exists) is reported with
   * `isNew: false` and written once. Each partition's share is written by one atomic script call.
   *
   * A refused call writes nothing: every item is validated (options, data, routing) before anything is
   * sent, and each partition's script checks every parent and the queue's layout before its first
   * write. In a partitioned queue with jobs in more than one partition, every partition is checked
   * first and written only when all passed. What remains in that case: a parent removed (or trimmed by
   * retention), or a repartition started, between the check and the writes makes that partition's
   * write fail after the others succeeded; as after an `ERR_CONNECTION`, calling again with the same
   * explicit ids is safe (ids that exist are not written twice).
   */
  async addBulk(items: readonly { data: Data; opts?: JobOptions }[]): Promise<AddedJob[]> {
    if (!Array.isArray(items)) throw new ValidationError('addBulk expects an array of { data, opts }');
    if (items.length > MAX_BULK) {
      throw new ValidationError(`addBulk takes at most ${MAX_BULK} jobs per call, got ${items.length}`);
    }
    const rows = items.map((item, i) => {
      checkKnownKeys(`item ${i}`, checkObject(`item ${i}`, item), ['data', 'opts']);
      return this.row(item.data, item.opts, `item ${i} data`);
    });
    const layout = await this.open();
    // Route every item before sending anything: one refused (CrossPartitionError) writes nothing.
    const parts = rows.map((row) => this.route(layout, row));
    return this.runAdd(layout, rows, parts);
  }

  async getJob(id: string): Promise<JobInfo<Data, Result> | null> {
    checkJobId(id);
    const layout = await this.open();
    return readJob<Data, Result>(this.conn.client, layout, id);
  }

  /** Jobs in one state, oldest first (waiting: in claim order for priority 0), paged. */
  async getJobs(
    state: JobState,
    opts: { offset?: number; limit?: number } = {},
  ): Promise<JobInfo<Data, Result>[]> {
    checkCallOptions('getJobs options', opts, ['offset', 'limit']);
    const offset = checkInt('offset', opts.offset ?? 0, 0);
    const limit = checkInt('limit', opts.limit ?? 100, 1, 10_000);
    const layout = await this.open();
    return listJobs<Data, Result>(this.conn.client, layout, state, offset, limit);
  }

  async counts(): Promise<JobCounts> {
    return countJobs(this.conn.client, await this.open());
  }

  /**
   * Resolves with the job's result once it completes; rejects with JobFailedError (every attempt's
   * error) if it ends dead, WaitTimeoutError after `timeoutMs`, JobNotFoundError if it does not exist.
   */
  async waitFor(id: string, opts: { timeoutMs?: number } = {}): Promise<Result> {
    checkJobId(id);
    checkCallOptions('waitFor options', opts, ['timeoutMs']);
    const timeoutMs = checkTimerMs('timeoutMs', opts.timeoutMs ?? 60_000, 1);
    const layout = await this.open();
    if (!this.doneListener) {
      this.subscriber = duplicate(this.conn.client);
      this.doneListener = new DoneListener(
        this.subscriber,
        layout.parts.map((k) => k.doneChannel),
      );
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

  /** Runs a single-job admin script in the partition that holds the job; unknown ids fail in their home. */
  private async jobScript(
    spec: typeof scripts.retry | typeof scripts.promote | typeof scripts.remove | typeof scripts.cancel,
    id: string,
    operation: string,
  ): Promise<void> {
    checkJobId(id);
    const layout = await this.open();
    const client = this.conn.client;
    // One partition: the script itself answers NOT_FOUND, no lookup needed.
    const found = layout.partitioned ? await locate(client, layout, id) : 0;
    const k = layout.parts[found < 0 ? layout.home(id) : found]!;
    const reply = (await runScript(client, spec, k, {
      now: '',
      id,
      wakeChannel: k.wakeChannel,
      doneChannel: k.doneChannel,
      eventsMaxLen: this.options.eventsMaxLen,
    })) as string;
    const err = errorFromScriptReply(reply, id, operation);
    if (err) throw err;
  }

  /** Dead or completed -> waiting, with a fresh budget of maxAttempts. Errors so far are kept. */
  retry(id: string): Promise<void> {
    return this.jobScript(scripts.retry, id, 'retry');
  }

  /** Deletes a job that is not active. */
  remove(id: string): Promise<void> {
    return this.jobScript(scripts.remove, id, 'remove');
  }

  /** Makes a delayed job due now. */
  promote(id: string): Promise<void> {
    return this.jobScript(scripts.promote, id, 'promote');
  }

  /**
   * Ends a job that has not finished, at once, as dead with a CancelledError (no retry). A running job's
   * worker is told to abort it (job.signal fires) and its late outcome is refused.
   */
  cancel(id: string): Promise<void> {
    return this.jobScript(scripts.cancel, id, 'cancel');
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
      throw new ValidationError(`clean takes the state 'completed' or 'dead', got ${show(state)}`);
    }
    checkCallOptions('clean options', opts, ['olderThanMs', 'limit']);
    const olderThanMs = checkInt('olderThanMs', opts.olderThanMs ?? 0, 0);
    const limit = checkInt('limit', opts.limit ?? 10_000, 1, 1_000_000);
    const layout = await this.open();
    const client = this.conn.client;
    const cutoff = (await serverNow(client)) - olderThanMs;
    let removed = 0;
    for (const part of layout.parts) {
      const keys = { ...part, finished: state === 'completed' ? part.completed : part.dead };
      for (;;) {
        if (removed >= limit) return { removed, more: true };
        const batch = Math.min(SCRIPT_BATCH_LIMIT, limit - removed);
        const [n, more] = (await runScript(client, scripts.clean, keys, { cutoff, limit: batch })) as [
          number,
          number,
        ];
        removed += n;
        if (more === 0) break;
      }
    }
    return { removed, more: false };
  }

  private async setPaused(paused: boolean): Promise<void> {
    await setPausedAll(this.conn.client, (await this.open()).parts, paused);
  }

  /** Stops every worker of this queue from claiming jobs (active ones finish). */
  pause(): Promise<void> {
    return this.setPaused(true);
  }

  resume(): Promise<void> {
    return this.setPaused(false);
  }

  /**
   * Caps the number of active jobs of this queue across all workers (`null` removes the cap). Enforced
   * when jobs are claimed; workers held back are woken as soon as an active job finishes. In a
   * partitioned queue the cap applies to each partition (see docs/scaling.md).
   */
  async setGlobalConcurrency(limit: number | null): Promise<void> {
    const checked = limit === null ? null : checkInt('globalConcurrency', limit, 1, 1_000_000);
    const layout = await this.open();
    const client = settling(this.conn.client);
    await Promise.all(
      layout.parts.map((k) =>
        checked === null ? client.hdel(k.meta, 'concurrency') : client.hset(k.meta, 'concurrency', checked),
      ),
    ).catch((err: unknown) => {
      throw redisFullError(err, 'setGlobalConcurrency') ?? err;
    });
  }

  async getGlobalConcurrency(): Promise<number | null> {
    const layout = await this.open();
    const v = await settling(this.conn.client).hget(layout.parts[0]!.meta, 'concurrency');
    return v === null ? null : Number(v);
  }

  /** True when the queue is paused (in a partitioned queue: when any partition is). */
  async isPaused(): Promise<boolean> {
    const layout = await this.open();
    const reads = settling(this.conn.client);
    const flags = await Promise.all(layout.parts.map((k) => reads.hexists(k.meta, 'paused')));
    return flags.includes(1);
  }

  /** The keys of the partition that holds schedule `key` (and its occurrence jobs). */
  private async scheduleKeys(key: string): Promise<QueueKeys> {
    const layout = await this.open();
    return layout.parts[layout.home(occurrenceId(key, 0))]!;
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
    const k = await this.scheduleKeys(key);
    return upsertSchedule(this.conn.client, k, key, timing, options, this.options.maxPayloadBytes);
  }

  /** Every schedule with its pending occurrence and next run times, soonest first. */
  async schedules(): Promise<ScheduleInfo<Data>[]> {
    const layout = await this.open();
    const all = await Promise.all(layout.parts.map((k) => listSchedules<Data>(this.conn.client, k)));
    return all.flat().sort((a, b) => a.nextRunAt - b.nextRunAt || (a.key < b.key ? -1 : 1));
  }

  /** Deletes a schedule (and its next occurrence if it has not started). Returns false if there was none. */
  async unschedule(key: string): Promise<boolean> {
    return removeSchedule(this.conn.client, await this.scheduleKeys(key), key);
  }

  /**
   * One recovery pass (what every worker does every recoverIntervalMs): jobs whose lease expired go
   * back to waiting, or dead when their attempts are spent. For queues whose workers are all gone.
   */
  async recoverExpired(opts: { deadRetention?: RetentionRule } = {}): Promise<RecoveredJobs> {
    checkCallOptions('recoverExpired options', opts, ['deadRetention']);
    const deadRetention =
      opts.deadRetention === undefined
        ? undefined
        : resolveRetentionRule('deadRetention', opts.deadRetention, DEFAULT_RETENTION.dead);
    const layout = await this.open();
    const out: RecoveredJobs = { requeued: [], dead: [], repairedSchedules: 0 };
    for (const k of layout.parts) {
      const r = await recoverExpired(this.conn.client, k, deadRetention, this.options.eventsMaxLen);
      out.requeued.push(...r.requeued);
      out.dead.push(...r.dead);
      out.repairedSchedules += r.repairedSchedules;
    }
    return out;
  }

  /**
   * Lifecycle events of this queue (added, active, progress, completed, failed, retrying, dead,
   * recovered, retried, promoted, cancelled, removed), from any process, as an async iterator.
   * Uses its own connection(s), closed when the loop ends (break, or `signal` aborted). A partitioned
   * queue reads each partition's stream and yields events as they arrive (ordered per partition;
   * `event.partition` says which, and a `from` stream id applies to every partition's stream).
   */
  async *events(opts: ReadEventsOptions = {}): AsyncGenerator<QueueEvent> {
    checkCallOptions('events options', opts, ['from', 'signal']);
    const from = checkStreamFrom(opts.from);
    const layout = await this.open();
    const clients = layout.parts.map(() => duplicate(this.conn.client));
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    opts.signal?.addEventListener('abort', onAbort);
    stop.signal.addEventListener('abort', () => {
      for (const c of clients) c.disconnect();
    });
    try {
      const readers = layout.parts.map((k, p) =>
        readEvents(
          clients[p]!,
          k.events,
          { ...opts, from, signal: stop.signal },
          layout.partitioned ? p : undefined,
        ),
      );
      yield* mergeIterators(readers);
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
      stop.abort();
    }
  }

  /**
   * Completed jobs, failed attempts and dead jobs per minute over the last `windowMs` (at most an hour),
   * on Redis's clock: what dashboards chart as throughput and failure rate.
   */
  async metrics(opts: { windowMs?: number } = {}): Promise<QueueMetrics> {
    checkCallOptions('metrics options', opts, ['windowMs']);
    const windowMs = checkInt('windowMs', opts.windowMs ?? 3_600_000, 60_000, 3_600_000);
    return readMetrics(this.conn.client, await this.open(), windowMs);
  }

  /** Workers whose heartbeat has not expired. */
  async workers(): Promise<WorkerDescription[]> {
    return listWorkers(this.conn.client, await this.open());
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.subscriber) await closeConnection({ client: this.subscriber, owned: true });
    await closeConnection(this.conn);
  }
}
