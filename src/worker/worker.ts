/**
 * Worker: runs a processor for the jobs of one queue, `concurrency` at a time.
 *
 * It is a few cooperating loops (each in its own file): the Fetcher claims jobs, the Acker writes
 * outcomes in batches, the LeaseRenewer keeps leases alive, the Recoverer puts back jobs of dead
 * workers, the Heartbeat keeps this worker listed. A processor decides a job's fate by what it
 * returns (completed) or throws (retried with backoff; UnrecoverableError: dead at once).
 *
 * Shutdown order (close): stop fetching -> wait for running jobs (up to closeTimeoutMs) -> write their
 * outcomes -> stop renewing, recovering and beating -> unregister -> close connections. Jobs still
 * running after the timeout keep their lease until it expires, then another worker recovers them.
 */

import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { type Connection, checkServer, closeConnection, connect, duplicate } from '../connection.js';
import {
  CancelledError,
  ClosedError,
  ConnectionError,
  LeaseExpiredError,
  RedisConfigError,
  StaleJobError,
  SuretyError,
  TimeoutError,
  UnrecoverableError,
} from '../errors.js';
import { decodeClaimed } from '../job-record.js';
import { type QueueKeys, queueKeys } from '../keys.js';
import { advanceSchedule, parseOccurrenceId } from '../schedules.js';
import type { RedisClient } from '../scripts.js';
import { checkQueueName, toJson } from '../validate.js';
import { Acker, type CompleteRow, type FailRow } from './acker.js';
import { retryDelayMs } from './backoff.js';
import { serializeError, WorkerCalls } from './calls.js';
import { Fetcher } from './fetcher.js';
import { Heartbeat } from './heartbeat.js';
import { Job } from './job.js';
import { type HeldJob, LeaseRenewer } from './lease-renewer.js';
import { type ResolvedWorkerOptions, resolveWorkerOptions, type WorkerOptions } from './options.js';
import { Recoverer } from './recoverer.js';

const PREFETCH_HORIZON_MS = 20;

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

interface Running<Data> {
  job: Job<Data>;
  startedAt: number;
  timer?: NodeJS.Timeout;
}

export class Worker<Data = unknown, Result = unknown> extends EventEmitter<WorkerEvents<Data, Result>> {
  readonly id: string;
  readonly name: string;
  readonly keys: QueueKeys;
  readonly options: ResolvedWorkerOptions;
  private readonly conn: Connection;
  private readonly calls: WorkerCalls;
  private readonly subscriber: RedisClient;
  private readonly running = new Map<string, Running<Data>>();
  /** Claimed (leased) jobs waiting for a free slot: prefetched so the next batch is ready when slots free. */
  private readonly buffer: Job<Data>[] = [];
  /** Moving average of attempt durations (ms), for the automatic prefetch; starts at "not short". */
  private avgDurationMs = 100;
  /** Jobs whose lease this worker holds: running, or finished with the outcome not yet written. */
  private readonly held = new Map<string, HeldJob>();
  private readonly fetcher: Fetcher;
  private readonly acker: Acker;
  private readonly renewer: LeaseRenewer;
  private readonly recoverer: Recoverer;
  private readonly heartbeat: Heartbeat;
  private readonly startedAt = Date.now();
  private tickScheduled = false;
  private state: 'new' | 'running' | 'closing' | 'closed' = 'new';
  private idleWaiters: (() => void)[] = [];
  private startPromise: Promise<void> | null = null;

  constructor(
    name: string,
    private readonly processor: Processor<Data, Result>,
    opts: WorkerOptions = {},
  ) {
    super();
    this.name = checkQueueName(name);
    if (typeof processor !== 'function')
      throw new SuretyError('ERR_INVALID_OPTION', 'processor must be a function');
    this.options = resolveWorkerOptions(opts);
    this.keys = queueKeys(this.options.prefix, name);
    this.id = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    this.conn = connect(opts.connection, 'worker');
    this.subscriber = duplicate(this.conn.client);
    this.calls = new WorkerCalls(this.conn.client, this.keys, this.options);
    const onError = (err: unknown) => this.reportError(err);
    this.fetcher = new Fetcher({
      subscriber: this.subscriber,
      wakeChannel: this.keys.wakeChannel,
      pollIntervalMs: this.options.pollIntervalMs,
      freeSlots: () =>
        this.options.concurrency + this.prefetchLimit() - this.running.size - this.buffer.length,
      claim: (count) => this.calls.claim(count),
      onJobs: (jobs) => this.startJobs(jobs),
      onCancelled: (id) => this.onCancelled(id),
      onError,
    });
    this.acker = new Acker({
      complete: (rows) => this.complete(rows),
      fail: (rows) => this.fail(rows),
      onError,
    });
    this.renewer = new LeaseRenewer({
      held: this.held,
      extend: (rows) => this.calls.extend(rows),
      onLost: (ids) => this.onLeaseLost(ids),
      onError,
    });
    this.recoverer = new Recoverer({
      intervalMs: this.options.recoverIntervalMs,
      recover: (limit) => this.calls.recover(limit),
      onRecovered: (r) => this.emit('recovered', r),
      onError,
    });
    this.heartbeat = new Heartbeat({
      intervalMs: this.options.heartbeatMs,
      beat: (ttl) => this.calls.beat(this.id, ttl, this.beatInfo()),
      onError,
    });
    if (this.options.autostart) this.start().catch((err) => this.reportError(err));
  }

  /** Starts the loops (called by the constructor unless `autostart: false`). Resolves once claiming has begun. */
  start(): Promise<void> {
    if (this.state === 'closing' || this.state === 'closed')
      return Promise.reject(new ClosedError(`Worker ${this.name}`));
    this.startPromise ??= (async () => {
      this.state = 'running';
      // A connection that drops during start-up must not leave a worker that looks alive and never
      // claims: retry until it works, or until close(). Only a refused Redis (RedisConfigError) stops it.
      for (let attempt = 1; ; attempt++) {
        try {
          await checkServer(this.conn.client, this.options.strict, this.options.logger);
          await this.heartbeat.start();
          await this.fetcher.start();
          break;
        } catch (err) {
          if (err instanceof RedisConfigError || this.state !== 'running') throw err;
          this.reportError(err);
          await new Promise((r) => setTimeout(r, Math.min(50 * 2 ** attempt, 2_000)));
          if (this.state !== 'running') return;
        }
      }
      this.renewer.start();
      this.recoverer.start();
    })();
    return this.startPromise;
  }

  /** Number of jobs whose processor is running now. */
  get activeCount(): number {
    return this.running.size;
  }

  // ---- outcomes written by the acker ---------------------------------------------------------

  private async complete(rows: CompleteRow[]): Promise<void> {
    const refusals = await this.calls.complete(rows);
    rows.forEach((row, i) => {
      this.release(row.id, row.token);
      const refusal = refusals[i];
      if (refusal) this.reportError(new StaleJobError(row.id, row.job.attempt, refusal));
      else this.emit('completed', row.job as Job<Data>, row.value as Result);
    });
  }

  private async fail(rows: FailRow[]): Promise<void> {
    const results = await this.calls.fail(rows);
    rows.forEach((row, i) => {
      const r = results[i]!;
      this.release(row.id, row.token);
      if ('refused' in r) this.reportError(new StaleJobError(row.id, row.job.attempt, r.refused));
      else this.emit('failed', row.job as Job<Data>, row.cause, r.outcome);
    });
  }

  private beatInfo(): string {
    return JSON.stringify({
      host: hostname(),
      pid: process.pid,
      startedAt: this.startedAt,
      concurrency: this.options.concurrency,
      activeJobIds: [...this.running.keys()].slice(0, 100),
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

  private startJobs(flat: string[]): void {
    for (let i = 0; i < flat.length; i += 2) {
      const id = flat[i]!;
      const record = decodeClaimed(flat[i + 1]!);
      let data: Data;
      try {
        data = JSON.parse(record.dataJson) as Data;
      } catch {
        data = undefined as Data; // cannot happen for data written by add()
      }
      const job = new Job<Data>(this.name, id, record, data);
      job.writer = (j, progress, lines) => this.calls.writeAnnex(j, progress, lines);
      job.parentReader = (j) => this.calls.parentResults(j.id);
      const occurrence = parseOccurrenceId(id);
      if (occurrence) {
        // The next tick's job is created as this one starts (the recovery loop repairs it if we die first).
        advanceSchedule(this.conn.client, this.keys, occurrence.key, occurrence.tick).catch((err) =>
          this.reportError(err),
        );
      }
      this.held.set(id, { token: job.token, leaseMs: job.leaseMs });
      this.renewer.noteLease(job.leaseMs);
      this.buffer.push(job);
    }
    this.runBuffered();
  }

  /** Starts buffered jobs while slots are free (skipping any whose lease was lost meanwhile). */
  private runBuffered(): void {
    while (this.running.size < this.options.concurrency && this.buffer.length > 0) {
      const job = this.buffer.shift()!;
      if (this.held.get(job.id)?.token !== job.token) continue;
      this.running.set(job.id, { job, startedAt: performance.now() });
      job.startedAt = Date.now();
      this.runJob(job);
    }
  }

  private runJob(job: Job<Data>): void {
    if (job.timeoutMs > 0) {
      const timer = setTimeout(() => {
        if (job.decided) return;
        const err = new TimeoutError(job.id, job.timeoutMs);
        job.abort(err);
        this.onSettled(job, undefined, err);
      }, job.timeoutMs);
      this.running.get(job.id)!.timer = timer;
    }
    let promise: Promise<Result>;
    try {
      promise = Promise.resolve(this.processor(job));
    } catch (err) {
      promise = Promise.reject(err);
    }
    promise.then(
      (result) => this.onSettled(job, result, undefined),
      (err: unknown) => this.onSettled(job, undefined, err instanceof Error ? err : new Error(String(err))),
    );
  }

  private onSettled(job: Job<Data>, result: Result | undefined, error: Error | undefined): void {
    if (job.decided) return; // timed out or cancelled earlier: this late outcome is not the attempt's
    job.decided = true;
    const run = this.running.get(job.id);
    clearTimeout(run?.timer);
    this.running.delete(job.id);
    if (run) this.avgDurationMs = this.avgDurationMs * 0.8 + (performance.now() - run.startedAt) * 0.2;
    if (!this.held.has(job.id)) {
      // The lease was lost while running: the outcome is still sent, and will be refused or accepted by the fence.
      this.held.set(job.id, { token: job.token, leaseMs: job.leaseMs });
    }
    if (error === undefined) {
      let json = '';
      try {
        json =
          result === undefined ? '' : toJson(`result of job ${job.id}`, result, this.options.maxPayloadBytes);
      } catch (err) {
        error = err as Error;
      }
      if (error === undefined) {
        this.acker.pushComplete({ id: job.id, token: job.token, result: json, job, value: result });
      }
    }
    if (error !== undefined) {
      let delay = -1;
      if (!(error instanceof UnrecoverableError) && !job.isLastAttempt) {
        try {
          delay = retryDelayMs(job as Job, error, this.options.backoffStrategies);
        } catch (err) {
          this.reportError(err);
          delay = 0;
        }
      }
      this.acker.pushFail({
        id: job.id,
        token: job.token,
        retryDelayMs: delay,
        error: serializeError(error),
        job,
        cause: error,
      });
    }
    this.runBuffered();
    this.scheduleTick();
    if (this.running.size === 0 && this.buffer.length === 0) for (const w of this.idleWaiters.splice(0)) w();
  }

  /** Once per event-loop turn: write buffered outcomes and claim for the freed slots, back to back. */
  private scheduleTick(): void {
    if (this.tickScheduled) return;
    this.tickScheduled = true;
    setImmediate(() => {
      this.tickScheduled = false;
      this.acker.flush();
      this.fetcher.pump();
    });
  }

  private release(id: string, token: string): void {
    if (this.held.get(id)?.token === token) this.held.delete(id);
  }

  /** queue.cancel already moved the job to dead: abort it and free its slot, sending no outcome. */
  private onCancelled(id: string): void {
    const held = this.held.get(id);
    if (!held) return;
    this.held.delete(id);
    const run = this.running.get(id);
    if (run && !run.job.decided) {
      run.job.decided = true;
      clearTimeout(run.timer);
      run.job.abort(new CancelledError(id));
      this.running.delete(id);
      this.runBuffered();
      this.scheduleTick();
      if (this.running.size === 0 && this.buffer.length === 0)
        for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  private onLeaseLost(ids: string[]): void {
    // Buffered jobs are skipped by runBuffered (their held entry is gone); running ones are told.
    for (const id of ids) {
      const r = this.running.get(id);
      r?.job.abort(
        new LeaseExpiredError(`lease of job ${id} attempt ${r.job.attempt} was lost; it may run elsewhere`),
      );
    }
    this.emit('leaseLost', ids);
  }

  private reportError(err: unknown): void {
    const error =
      err instanceof SuretyError
        ? err
        : new ConnectionError(`worker ${this.id}: ${err instanceof Error ? err.message : String(err)}`, err);
    if (this.listenerCount('error') > 0) this.emit('error', error);
    else this.options.logger.warn(`surety worker ${this.name}: ${error.code} ${error.message}`);
  }

  // ---- shutdown ----------------------------------------------------------------------------

  /**
   * Graceful close: stop claiming, let running jobs finish (up to `timeoutMs`, default
   * closeTimeoutMs), write their outcomes, then stop. Jobs still running after the timeout are
   * aborted (job.signal) and left to lease expiry and recovery.
   */
  async close(opts: { timeoutMs?: number } = {}): Promise<void> {
    if (this.state === 'closing' || this.state === 'closed') return;
    const wasStarted = this.state === 'running';
    this.state = 'closing';
    const timeoutMs = opts.timeoutMs ?? this.options.closeTimeoutMs;
    const deadline = Date.now() + timeoutMs;
    if (wasStarted) await this.startPromise?.catch(() => {});
    await this.fetcher.stop();
    if (this.running.size > 0 || this.buffer.length > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, timeoutMs);
        this.idleWaiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      for (const r of this.running.values())
        r.job.abort(new ClosedError(`Worker ${this.name} (close timeout)`));
    }
    await this.acker.drain(Math.max(0, deadline - Date.now()));
    this.acker.stop();
    this.renewer.stop();
    this.recoverer.stop();
    this.heartbeat.stop();
    if (wasStarted) {
      await this.calls.beat(this.id, 0, '').catch((err) => this.reportError(err));
    }
    await closeConnection({ client: this.subscriber, owned: true });
    await closeConnection(this.conn);
    this.state = 'closed';
  }
}
