/**
 * Worker: runs a processor for the jobs of one queue, `concurrency` at a time.
 *
 * It is a few cooperating loops (each in its own file): the Fetcher claims jobs, the Acker writes
 * outcomes in batches, the LeaseRenewer keeps leases alive, the Recoverer puts back jobs of dead
 * workers, the Heartbeat keeps this worker listed. The first three work per partition, in a Lane
 * (lane.ts): a worker of a partitioned queue has one lane per partition, sharing its slots fairly. A processor decides a job's fate by what it
 * returns (completed) or throws (retried with backoff; UnrecoverableError: dead at once). Whatever it
 * throws or returns, the attempt ends with a recorded outcome (error-normaliser.ts), and user
 * listeners that throw are reported as `error` events (ListenerError), never into the engine.
 *
 * A claim starts at once only as many jobs as there are free slots; prefetched ones are reserved (no
 * attempt counted) and begun (begin.lua, beginner.ts) when they reach a slot, so a worker killed while
 * holding them spends none of their attempts.
 *
 * Shutdown order (close): stop fetching -> hand back jobs claimed but not started (release.lua: front
 * of waiting, attempt not spent; also those of claim or begin replies arriving during close) -> wait for running
 * jobs (up to closeTimeoutMs) -> fail those still running with ClosedError (recorded, retried like any
 * failure) -> write the outcomes -> stop renewing, recovering and beating -> unregister -> close
 * connections. No job starts once close() was called.
 */

import { randomBytes } from 'node:crypto';
import { captureRejectionSymbol, EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { type Connection, checkServer, closeConnection, connect, duplicate } from '../connection.js';
import {
  CancelledError,
  ClosedError,
  ConnectionError,
  LeaseExpiredError,
  ListenerError,
  PartitionMismatchError,
  RedisConfigError,
  redisFullError,
  StaleJobError,
  SuretyError,
  TimeoutError,
} from '../errors.js';
import { decodeClaimed } from '../job-record.js';
import { type QueueKeys, queueKeys } from '../keys.js';
import { Layout, resolveLayout } from '../partitions.js';
import { advanceSchedule, parseOccurrenceId } from '../schedules.js';
import type { RedisClient } from '../scripts.js';
import { safeTimeout } from '../timers.js';
import { checkCallOptions, checkQueueAddress, checkQueueName, checkTimerMs, toJson } from '../validate.js';
import type { CompleteRow, FailRow } from './acker.js';
import { retryDelayMs } from './backoff.js';
import type { BeginOutcome } from './beginner.js';
import {
  type AttemptError,
  isA,
  normaliseThrown,
  resultError,
  serializeAttemptError,
} from './error-normaliser.js';
import { Heartbeat } from './heartbeat.js';
import { Job } from './job.js';
import { Lane, type LaneHost, type Running } from './lane.js';
import { type ResolvedWorkerOptions, resolveWorkerOptions, type WorkerOptions } from './options.js';
import { Recoverer } from './recoverer.js';
import { handBack, settledWithin } from './shutdown.js';

const PREFETCH_HORIZON_MS = 20;
/** After closeTimeoutMs, how long close() still gives the outcomes of finished jobs to be written. */
const OUTCOME_GRACE_MS = 1_000;

export type Processor<Data, Result> = (job: Job<Data>) => Promise<Result> | Result;

export interface WorkerEvents<Data, Result> {
  completed: [job: Job<Data>, result: Result];
  failed: [job: Job<Data>, error: Error, outcome: 'waiting' | 'delayed' | 'dead'];
  /** Leases this worker held and lost (it stalled or was cut off): those jobs may run elsewhere. */
  leaseLost: [ids: string[]];
  /** Jobs of dead workers this worker put back (requeued) or ended (dead). */
  recovered: [result: { requeued: string[]; dead: string[] }];
  error: [error: SuretyError];
}

export class Worker<Data = unknown, Result = unknown> extends EventEmitter<WorkerEvents<Data, Result>> {
  readonly id: string;
  readonly name: string;
  readonly options: ResolvedWorkerOptions;
  private readonly conn: Connection;
  private readonly subscriber: RedisClient;
  /** One per partition; built at construction, or at start() for `partitions: 'auto'`. */
  private lanes: Lane[] = [];
  /** Jobs whose processor is running, over all lanes. */
  private runningCount = 0;
  /** Claimed (leased) jobs waiting for a free slot: prefetched so the next batch is ready when slots free. */
  private readonly buffer: Job<Data>[] = [];
  /** Moving average of attempt durations (ms), for the automatic prefetch; starts at "not short". */
  private avgDurationMs = 100;
  /** Lane the next pump starts with, so partitions take turns at freed slots. */
  private nextLane = 0;
  private readonly host: LaneHost;
  private readonly recoverer: Recoverer;
  private readonly heartbeat: Heartbeat;
  private readonly startedAt = Date.now();
  private tickScheduled = false;
  private state: 'new' | 'running' | 'closing' | 'closed' = 'new';
  private idleWaiters: (() => void)[] = [];
  private startPromise: Promise<void> | null = null;
  /** Release calls in flight: jobs claimed but never started, handed back by a closing worker. */
  private readonly handingBack = new Set<Promise<void>>();

  constructor(
    name: string,
    private readonly processor: Processor<Data, Result>,
    opts: WorkerOptions = {},
  ) {
    // Async listeners that reject are reported like listeners that throw (see notify), not left as
    // unhandled rejections.
    super({ captureRejections: true });
    this.name = checkQueueName(name);
    if (typeof processor !== 'function')
      throw new SuretyError('ERR_INVALID_OPTION', 'processor must be a function');
    this.options = resolveWorkerOptions(opts);
    checkQueueAddress(this.options.prefix, name);
    this.id = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    this.conn = connect(opts.connection, 'worker');
    this.subscriber = duplicate(this.conn.client);
    const onError = (err: unknown) => this.reportError(err);
    this.host = {
      subscriber: this.subscriber,
      claimable: (lane) => this.claimable(lane),
      startable: (count) => this.startable(count),
      isClosing: () => this.state !== 'running',
      onBegin: (lane, job, outcome) => this.onBegin(lane, job as Job<Data>, outcome),
      onJobs: (lane, flat) => this.startJobs(lane, flat),
      onCancelled: (lane, id) => this.onCancelled(lane, id),
      onLeaseLost: (lane, ids) => this.onLeaseLost(lane, ids),
      onReleased: () => {
        if (this.lanes.length > 1) this.scheduleTick();
      },
      complete: (lane, rows) => this.complete(lane, rows),
      fail: (lane, rows) => this.fail(lane, rows),
      onError,
    };
    if (this.options.partitions !== 0) {
      this.buildLanes(new Layout(this.options.prefix, name, this.options.partitions));
    }
    this.recoverer = new Recoverer({
      intervalMs: this.options.recoverIntervalMs,
      recover: (limit) => this.recover(limit),
      onRecovered: (r) => this.notify('recovered', r),
      onError,
    });
    this.heartbeat = new Heartbeat({
      intervalMs: this.options.heartbeatMs,
      // Workers are listed in partition 0 only: the list is for people (queue.workers()), and
      // recovery never needs it, so one entry per worker is enough however many partitions it claims.
      beat: async (ttl) => {
        await this.lanes[0]?.calls.beat(this.id, ttl, this.beatInfo());
      },
      onError,
    });
    if (this.options.autostart) this.start().catch((err) => this.reportError(err));
  }

  private buildLanes(layout: Layout): void {
    this.lanes = layout.parts.map((k, p) => new Lane(p, k, this.conn.client, this.options, this.host));
  }

  /** Keys of partition 0: the queue's only keys when it is not partitioned. */
  get keys(): QueueKeys {
    return this.lanes[0]?.keys ?? queueKeys(this.options.prefix, this.name);
  }

  /** The number of partitions this worker claims from (0 until started with `partitions: 'auto'`). */
  get partitions(): number {
    return this.lanes.length;
  }

  /** Starts the loops (called by the constructor unless `autostart: false`). Resolves once claiming has begun. */
  start(): Promise<void> {
    if (this.state === 'closing' || this.state === 'closed')
      return Promise.reject(new ClosedError(`Worker ${this.name}`));
    this.startPromise ??= (async () => {
      this.state = 'running';
      // A connection that drops during start-up must not leave a worker that looks alive and never
      // claims: retry until it works, or until close(). Only a refused Redis or layout stops it.
      for (let attempt = 1; ; attempt++) {
        try {
          await checkServer(this.conn.client, this.options.strict, this.options.logger);
          const layout = await resolveLayout(
            this.conn.client,
            this.options.prefix,
            this.name,
            this.options.partitions,
          );
          if (this.lanes.length === 0) this.buildLanes(layout);
          await this.heartbeat.start();
          for (const lane of this.lanes) await lane.fetcher.start();
          break;
        } catch (err) {
          if (err instanceof RedisConfigError || err instanceof PartitionMismatchError) throw err;
          if (this.state !== 'running') throw err;
          this.reportError(err);
          await new Promise((r) => setTimeout(r, Math.min(50 * 2 ** attempt, 2_000)));
          if (this.state !== 'running') return;
        }
      }
      for (const lane of this.lanes) lane.renewer.start();
      this.recoverer.start();
    })();
    return this.startPromise;
  }

  /** Number of jobs whose processor is running now. */
  get activeCount(): number {
    return this.runningCount;
  }

  /**
   * How many jobs `lane` may claim now: the worker's free slots (running, buffered and every lane's
   * claims in flight count against them), and in a partitioned queue at most a fair share per lane
   * among the lanes that are not drained, so one busy partition cannot starve the others.
   */
  private claimable(lane: Lane): number {
    const capacity = this.options.concurrency + this.prefetchLimit();
    let requested = 0;
    let busy = 0;
    for (const l of this.lanes) {
      requested += l.fetcher.requestedCount;
      if (!l.fetcher.isDrained) busy++;
    }
    const free = capacity - this.runningCount - this.buffer.length - requested;
    if (this.lanes.length === 1) return free;
    const share = Math.ceil(capacity / Math.max(1, busy)) - lane.fetcher.requestedCount;
    return Math.min(free, share);
  }

  /**
   * Of `count` jobs claimed now, how many claim.lua starts at once: the slots free for running once the
   * buffer and the other claims in flight are served. The rest are reserved (begun before they run).
   */
  private startable(count: number): number {
    let starting = 0;
    for (const l of this.lanes) starting += l.startsRequested;
    const free = this.options.concurrency - this.runningCount - this.buffer.length - starting;
    return Math.max(0, Math.min(count, free));
  }

  private async recover(limit: number): Promise<{ requeued: string[]; dead: string[] }> {
    const out = { requeued: [] as string[], dead: [] as string[] };
    for (const lane of this.lanes) {
      const r = await lane.calls.recover(limit);
      out.requeued.push(...r.requeued);
      out.dead.push(...r.dead);
    }
    return out;
  }

  // ---- outcomes written by the lanes' ackers -------------------------------------------------

  private async complete(lane: Lane, rows: CompleteRow[]): Promise<void> {
    const refusals = await lane.calls.complete(rows);
    rows.forEach((row, i) => {
      lane.release(row.id, row.token);
      const refusal = refusals[i];
      if (refusal) this.reportError(new StaleJobError(row.id, row.job.attempt, refusal));
      else this.notify('completed', row.job as Job<Data>, row.value as Result);
    });
  }

  private async fail(lane: Lane, rows: FailRow[]): Promise<void> {
    const results = await lane.calls.fail(rows);
    rows.forEach((row, i) => {
      const r = results[i]!;
      lane.release(row.id, row.token);
      if ('refused' in r) this.reportError(new StaleJobError(row.id, row.job.attempt, r.refused));
      else this.notify('failed', row.job as Job<Data>, row.cause, r.outcome);
    });
  }

  private beatInfo(): string {
    const activeJobIds: string[] = [];
    for (const lane of this.lanes) {
      for (const id of lane.running.keys()) if (activeJobIds.length < 100) activeJobIds.push(id);
    }
    return JSON.stringify({
      host: hostname(),
      pid: process.pid,
      startedAt: this.startedAt,
      concurrency: this.options.concurrency,
      activeJobIds,
    });
  }

  // ---- running jobs ------------------------------------------------------------------------

  /**
   * How many jobs to claim beyond free slots. Prefetching overlaps the next claim's round trip with the
   * current batch's work and batches claims, which only pays for short jobs. 'auto' prefetches about
   * as many jobs as this worker finishes in PREFETCH_HORIZON_MS, so a prefetched job waits locally
   * for ~20 ms at most and long jobs are never held back from idle workers.
   */
  private prefetchLimit(): number {
    const p = this.options.prefetch;
    if (p !== 'auto') return p;
    const c = this.options.concurrency;
    return Math.min(
      Math.floor((c * PREFETCH_HORIZON_MS) / Math.max(this.avgDurationMs, 0.01)),
      Math.max(c, 100),
    );
  }

  private startJobs(lane: Lane, flat: string[]): void {
    for (let i = 0; i < flat.length; i += 2) {
      const id = flat[i]!;
      const record = decodeClaimed(flat[i + 1]!);
      let data: Data;
      try {
        data = JSON.parse(record.dataJson) as Data;
      } catch {
        data = undefined as Data; // cannot happen for data written by add()
      }
      const job = new Job<Data>(this.name, id, record, data, lane.partition);
      job.writer = (j, progress, lines) => lane.calls.writeAnnex(j, progress, lines);
      job.parentReader = (j) => lane.calls.parentResults(j.id);
      lane.held.set(id, { token: job.token, leaseMs: job.leaseMs });
      lane.renewer.noteLease(job.leaseMs);
      this.buffer.push(job);
    }
    // A claim answered while closing: its jobs must not start; they go back at once.
    if (this.state === 'running') this.runBuffered();
    else this.handBackBuffered();
  }

  /** Hands every buffered (claimed, never started) job back to waiting; close() awaits these calls. */
  private handBackBuffered(): void {
    const jobs = this.buffer.splice(0) as Job<unknown>[];
    if (jobs.length === 0) return;
    const call = handBack(this.lanes, jobs, (err) => this.reportError(err));
    this.handingBack.add(call);
    void call.then(() => this.handingBack.delete(call));
  }

  /** Starts buffered jobs while slots are free (skipping any whose lease was lost meanwhile). */
  private runBuffered(): void {
    // A closing worker starts nothing: close() hands its buffered jobs back instead.
    while (
      this.state === 'running' &&
      this.runningCount < this.options.concurrency &&
      this.buffer.length > 0
    ) {
      const job = this.buffer.shift()!;
      const lane = this.lanes[job.partition]!;
      if (lane.held.get(job.id)?.token !== job.token) continue;
      this.runningCount++;
      // A reserved job takes its slot now and runs once begin.lua has counted its attempt (onBegin).
      if (job.reserved) lane.beginner.push(job as Job<unknown>);
      else this.startRun(lane, job);
    }
  }

  /** begin.lua answered for a reserved job holding a slot: run it, drop it (lease gone), or hand it back. */
  private onBegin(lane: Lane, job: Job<Data>, outcome: BeginOutcome): void {
    if (outcome === 'begun' && this.state === 'running') {
      this.startRun(lane, job);
      return;
    }
    this.runningCount--;
    if (outcome === 'lost') {
      if (lane.held.get(job.id)?.token === job.token) lane.held.delete(job.id);
    } else {
      // Closing: no job starts once close() was called. release.lua gives back the attempt if begun.
      this.buffer.push(job);
      this.handBackBuffered();
    }
    this.afterSlotFreed();
  }

  private startRun(lane: Lane, job: Job<Data>): void {
    lane.running.set(job.id, { job: job as Job<unknown>, startedAt: performance.now() });
    job.startedAt = Date.now();
    const occurrence = parseOccurrenceId(job.id);
    if (occurrence) {
      // The next tick's job is created as this one starts (the recovery loop repairs it if we die first).
      advanceSchedule(this.conn.client, lane.keys, occurrence.key, occurrence.tick).catch((err) =>
        this.reportError(err),
      );
    }
    this.runJob(lane, job);
  }

  private runJob(lane: Lane, job: Job<Data>): void {
    if (job.timeoutMs > 0) {
      const timer = safeTimeout(() => {
        if (job.decided) return;
        const err = new TimeoutError(job.id, job.timeoutMs);
        job.abort(err);
        this.onSettled(job, undefined, normaliseThrown(err));
      }, job.timeoutMs);
      lane.running.get(job.id)!.timer = timer;
    }
    let promise: Promise<Result>;
    try {
      promise = Promise.resolve(this.processor(job));
    } catch (err) {
      promise = Promise.reject(err);
    }
    // Whatever the processor threw or rejected with is read once, defensively (normaliseThrown never
    // throws), so every attempt ends with a recorded outcome and its slot freed.
    promise.then(
      (result) => this.onSettled(job, result, undefined),
      (err: unknown) => this.onSettled(job, undefined, normaliseThrown(err)),
    );
  }

  /** Frees the slot of a job that stopped running (settled, cancelled); returns its run, if any. */
  private stopRunning(lane: Lane, id: string): Running<unknown> | undefined {
    const run = lane.running.get(id);
    if (!run) return undefined;
    clearTimeout(run.timer);
    lane.running.delete(id);
    this.runningCount--;
    return run;
  }

  private onSettled(job: Job<Data>, result: Result | undefined, failure: AttemptError | undefined): void {
    if (job.decided) return; // timed out or cancelled earlier: this late outcome is not the attempt's
    job.decided = true;
    const lane = this.lanes[job.partition]!;
    const run = this.stopRunning(lane, job.id);
    if (run) this.avgDurationMs = this.avgDurationMs * 0.8 + (performance.now() - run.startedAt) * 0.2;
    if (!lane.held.has(job.id)) {
      // The lease was lost while running: the outcome is still sent, and will be refused or accepted by the fence.
      lane.held.set(job.id, { token: job.token, leaseMs: job.leaseMs });
    }
    if (failure === undefined) {
      let json: string | undefined;
      try {
        json =
          result === undefined ? '' : toJson(`result of job ${job.id}`, result, this.options.maxPayloadBytes);
      } catch (err) {
        // Not JSON, too large, or a getter / Proxy trap that throws: a typed error fails the attempt.
        failure = normaliseThrown(resultError(job.id, err));
      }
      if (json !== undefined) {
        lane.acker.pushComplete({ id: job.id, token: job.token, result: json, job, value: result });
      }
    }
    if (failure !== undefined) {
      let delay = -1;
      if (!failure.unrecoverable && !job.isLastAttempt) {
        try {
          delay = retryDelayMs(job as Job, failure.error, this.options.backoffStrategies);
        } catch (err) {
          this.reportError(err);
          delay = 0;
        }
      }
      lane.acker.pushFail({
        id: job.id,
        token: job.token,
        retryDelayMs: delay,
        error: serializeAttemptError(failure),
        job,
        cause: failure.error,
      });
    }
    this.afterSlotFreed();
  }

  private afterSlotFreed(): void {
    this.runBuffered();
    this.scheduleTick();
    if (this.runningCount === 0 && this.buffer.length === 0) for (const w of this.idleWaiters.splice(0)) w();
  }

  /** Once per event-loop turn: write buffered outcomes and claim for the freed slots, back to back. */
  private scheduleTick(): void {
    if (this.tickScheduled) return;
    this.tickScheduled = true;
    setImmediate(() => {
      this.tickScheduled = false;
      const n = this.lanes.length;
      for (const lane of this.lanes) lane.acker.flush();
      // Lanes take turns at going first, so freed slots are shared among busy partitions.
      const first = this.nextLane;
      this.nextLane = (first + 1) % n;
      for (let i = 0; i < n; i++) this.lanes[(first + i) % n]!.fetcher.pump();
    });
  }

  /** queue.cancel already moved the job to dead: abort it and free its slot, sending no outcome. */
  private onCancelled(lane: Lane, id: string): void {
    if (!lane.held.has(id)) return;
    lane.held.delete(id);
    const run = lane.running.get(id);
    if (run && !run.job.decided) {
      run.job.decided = true;
      run.job.abort(new CancelledError(id));
      this.stopRunning(lane, id);
      this.afterSlotFreed();
    }
  }

  private onLeaseLost(lane: Lane, ids: string[]): void {
    // Buffered jobs are skipped by runBuffered (their held entry is gone); running ones are told.
    for (const id of ids) {
      const r = lane.running.get(id);
      r?.job.abort(
        new LeaseExpiredError(`lease of job ${id} attempt ${r.job.attempt} was lost; it may run elsewhere`),
      );
    }
    this.notify('leaseLost', ids);
  }

  private reportError(err: unknown): void {
    const error = isA(err, SuretyError)
      ? (err as SuretyError)
      : (redisFullError(err, `a call of worker ${this.id}`) ??
        new ConnectionError(`worker ${this.id}: ${normaliseThrown(err).message}`, err));
    try {
      if (this.listenerCount('error') > 0) this.emit('error', error);
      else this.options.logger.warn(`surety worker ${this.name}: ${error.code} ${error.message}`);
    } catch (thrown) {
      this.listenerFailed('error', thrown);
    }
  }

  /**
   * Emits an event to user listeners. A listener that throws (or, async, rejects: see
   * captureRejections) never disturbs the engine: the outcome it was told about stays recorded once,
   * and the exception is reported as an `error` event (ListenerError).
   */
  private notify<E extends 'completed' | 'failed' | 'leaseLost' | 'recovered'>(
    event: E,
    ...args: WorkerEvents<Data, Result>[E]
  ): void {
    try {
      (this.emit as (e: E, ...a: WorkerEvents<Data, Result>[E]) => boolean)(event, ...args);
    } catch (err) {
      this.listenerFailed(event, err);
    }
  }

  private listenerFailed(event: string | symbol, err: unknown): void {
    if (event === 'error') {
      // An 'error' listener (or the logger) that throws has no caller in the engine to throw to: it
      // is re-thrown outside, as Node does for an exception in an 'error' handler (uncaughtException).
      process.nextTick(() => {
        throw err;
      });
      return;
    }
    this.reportError(new ListenerError(String(event), normaliseThrown(err).message, err));
  }

  /** @internal An async listener rejected (EventEmitter captureRejections). */
  override [captureRejectionSymbol](err: unknown, event: unknown, ..._args: unknown[]): void {
    this.listenerFailed(typeof event === 'symbol' ? event : String(event), err);
  }

  // ---- shutdown ----------------------------------------------------------------------------

  /**
   * close() timed out: each attempt still running ends now, failed with ClosedError (recorded, and
   * retried like any failure), instead of holding its job until the lease expires. Its signal aborts;
   * whatever the processor does later is ignored, like a late result after a timeout.
   */
  private failStillRunning(): void {
    for (const lane of this.lanes) {
      for (const r of [...lane.running.values()]) {
        const err = new ClosedError(`Worker ${this.name} (close timeout)`);
        r.job.abort(err);
        this.onSettled(r.job as Job<Data>, undefined, normaliseThrown(err));
      }
    }
  }

  /**
   * Graceful close, in this order: stop claiming -> hand back at once the jobs claimed but not started
   * (prefetched, or in claim replies still arriving: front of waiting, attempt not spent) -> let
   * running jobs finish (up to `timeoutMs`, default closeTimeoutMs) -> fail those still running with
   * ClosedError (their signal aborts; the attempt counts, they are retried like any failure) -> write
   * the outcomes (given at least OUTCOME_GRACE_MS) -> stop renewing, recovering and beating ->
   * unregister -> close connections. No job starts once close() was called.
   */
  async close(opts: { timeoutMs?: number } = {}): Promise<void> {
    checkCallOptions('close options', opts, ['timeoutMs']);
    const timeoutMs =
      opts.timeoutMs === undefined
        ? this.options.closeTimeoutMs
        : checkTimerMs('timeoutMs', opts.timeoutMs, 0);
    if (this.state === 'closing' || this.state === 'closed') return;
    const wasStarted = this.state === 'running';
    this.state = 'closing';
    const deadline = Date.now() + timeoutMs;
    if (wasStarted) await this.startPromise?.catch(() => {});
    for (const lane of this.lanes) await lane.fetcher.stop();
    // Replies of claims still in flight hand their jobs back as they arrive (startJobs).
    this.handBackBuffered();
    if (this.runningCount > 0) {
      await new Promise<void>((resolve) => {
        const timer = safeTimeout(resolve, deadline - Date.now());
        this.idleWaiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      this.failStillRunning();
    }
    const grace = Math.max(deadline - Date.now(), OUTCOME_GRACE_MS);
    const handedBack = (async () => {
      await Promise.all(this.lanes.map((l) => l.claimsSettled()));
      await Promise.all(this.lanes.map((l) => l.beginner.settled()));
      await Promise.all(this.handingBack);
    })();
    await Promise.all([...this.lanes.map((l) => l.acker.drain(grace)), settledWithin(handedBack, grace)]);
    for (const lane of this.lanes) {
      lane.acker.stop();
      lane.renewer.stop();
    }
    this.recoverer.stop();
    this.heartbeat.stop();
    if (wasStarted) {
      // Bounded: a black-holed connection never answers (the entry then goes with its heartbeat TTL).
      const unregister = this.lanes[0]?.calls.beat(this.id, 0, '').catch((err) => this.reportError(err));
      if (unregister) await settledWithin(unregister, OUTCOME_GRACE_MS);
    }
    await closeConnection({ client: this.subscriber, owned: true });
    await closeConnection(this.conn);
    this.state = 'closed';
  }
}
