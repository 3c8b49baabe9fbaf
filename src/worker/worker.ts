/**
 * Worker: runs a processor for the jobs of one queue, `concurrency` at a time.
 *
 * It is a few cooperating loops (each in its own file): the Fetcher claims jobs, the Runner
 * (runner.ts) runs them in the worker's slots and turns each attempt into an outcome, the Acker writes
 * outcomes in batches, the LeaseRenewer keeps leases alive, the Recoverer puts back jobs of dead
 * workers, the Heartbeat keeps this worker listed. Fetcher, Acker and LeaseRenewer work per
 * partition, in a Lane (lane.ts): a worker of a partitioned queue has one lane per partition, sharing
 * the runner's slots fairly. Data flows one way, fetcher -> runner -> acker, and each lane reports the
 * outcomes it wrote up to this facade, which emits them. A processor decides a job's fate by what it
 * returns (completed) or throws (retried with backoff; UnrecoverableError: dead at once). Whatever it
 * throws or returns, the attempt ends with a recorded outcome (error-normaliser.ts), and user
 * listeners that throw are reported as `error` events (ListenerError), never into the engine.
 *
 * A claim counts nothing: a job's attempt is counted by its start mark, sent with the lane's next call
 * when its processor starts (starter.ts), never awaited; so a worker killed while holding prefetched
 * jobs spends none of their attempts.
 *
 * Shutdown order (close): stop fetching -> hand back jobs claimed but not started (release.lua: front
 * of waiting, attempt not spent; also those of claim replies arriving during close) -> wait for running
 * jobs (up to closeTimeoutMs) -> fail those still running with ClosedError (recorded, retried like any
 * failure) -> write the outcomes -> stop renewing, recovering and beating -> unregister -> close
 * connections. No job starts once close() was called.
 */

import { randomBytes } from 'node:crypto';
import { captureRejectionSymbol, EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { isA, normaliseThrown } from '../error-normaliser.js';
import {
  ClosedError,
  ConnectionError,
  ListenerError,
  PartitionMismatchError,
  RedisConfigError,
  redisFullError,
  SuretyError,
  ValidationError,
} from '../errors.js';
import { Layout, resolveLayout } from '../queue/partitions.js';
import { advanceSchedule } from '../queue/schedules.js';
import { type Connection, checkServer, closeConnection, connect, duplicate } from '../redis/connection.js';
import type { RedisClient } from '../scripts/specs.js';
import { type QueueKeys, queueKeys } from '../store/keys.js';
import { parseOccurrenceId } from '../store/occurrence-id.js';
import { delay, MAX_TIMER_MS, reconnectDelayMs } from '../timers.js';
import {
  checkCallOptions,
  checkInt,
  checkKnownKeys,
  checkObject,
  checkQueueAddress,
  checkQueueName,
  checkTimerMs,
} from '../validate.js';
import { ChildQueues } from './children.js';
import { Heartbeat, workerInfo } from './heartbeat.js';
import { attemptOf, type Job } from './job.js';
import { Lane, type LaneDiagnostics as LaneHolds, type LaneHost, type LaneOutcome } from './lane.js';
import { type ProcessorMap, routeByName } from './named-processors.js';
import {
  checkBatchConcurrency,
  MAX_CONCURRENCY,
  type ResolvedWorkerOptions,
  resolveWorkerOptions,
  type WorkerBatchOptions,
  type WorkerOptions,
} from './options.js';
import { Recoverer, recoverEach } from './recoverer.js';
import { type BatchProcessor, type Processor, Runner } from './runner.js';
import { modulePath, SandboxPool } from './sandbox/pool.js';
import { handBack, settledWithin } from './shutdown.js';
import { SlotShare } from './slot-share.js';
import { Turns } from './turns.js';

export type { BatchProcessor, Processor } from './runner.js';

/** @internal A lane's leases and claims, with the attempts the runner runs there (see diagnostics). */
export interface LaneDiagnostics extends LaneHolds {
  running: number;
  /** The attempts running: job id and fencing token (one per claim: a re-claimed job has a new one). */
  runningJobs: { id: string; token: string }[];
}

/** After closeTimeoutMs, how long close() still gives the outcomes of finished jobs to be written. */
const OUTCOME_GRACE_MS = 1_000;

export interface WorkerEvents<Data, Result> {
  /**
   * The job's processor started (for a processor given as a module, once its sandbox took the job):
   * this attempt now counts (`job.attempt`).
   */
  active: [job: Job<Data>];
  completed: [job: Job<Data>, result: Result];
  failed: [job: Job<Data>, error: Error, outcome: 'waiting' | 'delayed' | 'dead'];
  /** Leases this worker held and lost (it stalled or was cut off): those jobs may run elsewhere. */
  leaseLost: [ids: string[]];
  /** Jobs of dead workers this worker put back (requeued) or ended (dead). */
  recovered: [result: { requeued: string[]; dead: string[] }];
  /** The processor threw SnoozeError: the job is delayed by delayMs, no attempt spent. */
  snoozed: [job: Job<Data>, delayMs: number];
  /** The processor threw RateLimitError: the job waits again, and claims pause for delayMs. */
  rateLimited: [job: Job<Data>, delayMs: number];
  /** The job parked itself to wait (job.waitForSignal): it left this worker until the signal comes. */
  parked: [job: Job<Data>];
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
  private readonly runner: Runner<Data, Result>;
  /** Once per event-loop turn: outcomes written, starts marked, claims made, over all lanes. */
  private readonly turns = new Turns(() => this.lanes);
  private readonly laneHost: LaneHost;
  private readonly recoverer: Recoverer;
  private readonly heartbeat: Heartbeat;
  private readonly startedAt = Date.now();
  private state: 'new' | 'running' | 'closing' | 'closed' = 'new';
  private startPromise: Promise<void> | null = null;
  /** The sandboxes of a processor given as a module (docs/sandbox.md); null for a function. */
  private readonly sandboxes: SandboxPool | null = null;
  /** The Queues job.addChildren adds through, on this worker's connection. */
  private readonly childQueues: ChildQueues;
  /**
   * Schedule advances in flight: the call that creates a schedule's next occurrence as the current one
   * starts. Nobody awaits it, so it is counted here for the test kit, which must not move its clock
   * before it has read the time (a tick would be skipped: see advanceScheduleOf).
   */
  private scheduleAdvances = 0;

  /**
   * `processor`: a function, or `{ [jobName]: function }` to route jobs by their name (key '*' for the
   * rest; see named-processors.ts), or a module (a file URL or an absolute path) whose default export
   * or `process` export is the processor, run in sandboxes (options.sandbox; docs/sandbox.md).
   * With the `batch` option, a function given up to batch.size jobs at once (docs/batches.md).
   */
  constructor(
    name: string,
    processor: BatchProcessor<Data, Result>,
    opts: WorkerOptions & { batch: WorkerBatchOptions },
  );
  constructor(
    name: string,
    processor: Processor<Data, Result> | ProcessorMap<Data, Result> | URL | string,
    opts?: WorkerOptions,
  );
  constructor(
    name: string,
    processor:
      | Processor<Data, Result>
      | ProcessorMap<Data, Result>
      | URL
      | string
      | BatchProcessor<Data, Result>,
    opts: WorkerOptions = {},
  ) {
    // Async listeners that reject are reported like listeners that throw (see notify), not left as
    // unhandled rejections.
    super({ captureRejections: true });
    this.name = checkQueueName(name);
    const isMap =
      processor !== null &&
      typeof processor === 'object' &&
      Object.getPrototypeOf(processor) === Object.prototype;
    if (isMap) processor = routeByName(processor as ProcessorMap<Data, Result>);
    const module = modulePath(processor);
    if (typeof processor !== 'function' && module === null)
      throw new SuretyError(
        'ERR_INVALID_OPTION',
        'processor must be a function, a { [jobName]: function } map, or a module (file URL or absolute path)',
      );
    this.options = resolveWorkerOptions(opts);
    const batch = this.options.batch !== null;
    if (batch && (module !== null || isMap))
      throw new ValidationError(
        'batch applies to a function processor (given the jobs of a batch), not to a module or a { [jobName]: function } map',
      );
    if (module === null && this.options.sandbox !== undefined)
      throw new ValidationError(
        `sandbox applies to a processor given as a module (URL or absolute path), got a function with sandbox '${this.options.sandbox}'`,
      );
    if (module !== null) {
      const pool = new SandboxPool({
        module,
        mode: this.options.sandbox ?? 'process',
        memoryMb: this.options.sandboxMemoryMb,
        maxPayloadBytes: this.options.maxPayloadBytes,
        size: () => this.runner.concurrency,
      });
      this.sandboxes = pool;
      processor = (job: Job<Data>) => pool.run(job as Job<unknown>) as Promise<Result>;
    }
    checkQueueAddress(this.options.prefix, name);
    this.id = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    this.conn = connect(opts.connection, 'worker', this.options.clock, this);
    this.childQueues = new ChildQueues(this.conn.client, this.options.prefix, this.options.eventsMaxLen);
    this.subscriber = duplicate(this.conn.client);
    const onError = (err: unknown) => this.reportError(err);
    const traceOf = (job: Job<Data>) => attemptOf(job as Job<unknown>).trace;
    // A tracer that throws is reported here (ERR_TELEMETRY, once per kind of call), never to a job.
    this.options.tracing.reportTo(onError);
    this.runner = new Runner<Data, Result>({
      name: this.name,
      options: this.options,
      // Checked above: a function by now. Traced: each attempt runs inside its `process` span.
      processor: this.options.tracing.wrap(name, processor as Processor<Data, Result>, traceOf),
      ...(batch
        ? {
            batchProcessor: processor as BatchProcessor<Data, Result>,
            // Each job of a batch has its own `process` span; the batch's code runs outside them.
            traceBatchJob: this.options.tracing.wrap(name, () => undefined, traceOf),
          }
        : {}),
      isRunning: () => this.state === 'running',
      leaseLeft: (job) => this.laneOf(job).leaseLeft(job),
      onStart: (job) => this.advanceScheduleOf(job),
      started: (job) => {
        this.laneOf(job).markStart(job);
        this.turns.scheduleStarts();
        this.notify('active', job as Job<Data>);
      },
      confirmStart: (job) => this.laneOf(job).confirmStart(job),
      completed: (row) => this.laneOf(row.job).completed(row),
      failed: (row) => this.laneOf(row.job).failed(row),
      parked: (job) => {
        this.laneOf(job).forget(job.id, job.token);
        this.notify('parked', job as Job<Data>);
      },
      handBack: (jobs) => handBack(this.lanes, jobs),
      slotFreed: () => this.turns.schedule(),
      // A sandboxed module starts when its sandbox acknowledges the job (sandbox.ts): that marks it.
      processorMarksStart: this.sandboxes !== null,
      onError,
    });
    this.laneHost = {
      client: this.conn.client,
      childQueues: this.childQueues,
      subscriber: this.subscriber,
      options: this.options,
      queueName: this.name,
      slots: new SlotShare(
        this.runner,
        () => this.lanes,
        () => this.turns.turnFirst,
      ),
      onClaimed: (jobs) => this.runner.accept(jobs),
      onClaimReleased: () => {
        if (this.lanes.length > 1) this.turns.schedule();
      },
      onCancelled: (lane, id) => this.runner.cancelled(lane.partition, id),
      onLeasesLost: (lane, ids) => {
        this.runner.leaseLost(lane.partition, ids);
        this.notify('leaseLost', ids);
      },
      onOutcome: (outcome) => this.onOutcome(outcome),
      onError,
    };
    if (this.options.partitions !== 0) {
      this.buildLanes(new Layout(this.options.prefix, name, this.options.partitions));
    }
    this.recoverer = new Recoverer({
      timers: this.options.clock,
      intervalMs: this.options.recoverIntervalMs,
      recover: (limit) =>
        recoverEach(
          this.lanes.map((l) => l.calls),
          limit,
        ),
      onRecovered: (r) => this.notify('recovered', r),
      onError,
    });
    this.heartbeat = new Heartbeat({
      intervalMs: this.options.heartbeatMs,
      // Workers are listed in partition 0 only: the list is for people (queue.workers()), and
      // recovery never needs it, so one entry per worker is enough however many partitions it claims.
      beat: async (ttl) => {
        const running = this.lanes.map((l) => this.runner.runningIn(l.partition).ids());
        await this.lanes[0]?.calls.beat(
          this.id,
          ttl,
          workerInfo(this.startedAt, this.runner.concurrency, running),
        );
      },
      onError,
    });
    if (this.options.autostart) this.start().catch((err) => this.reportError(err));
  }

  private buildLanes(layout: Layout): void {
    this.lanes = layout.parts.map((k, p) => new Lane(p, k, this.laneHost));
  }

  private laneOf(job: Job<unknown>): Lane {
    return this.lanes[job.partition]!;
  }

  /** Keys of partition 0: the queue's only keys when it is not partitioned. */
  get keys(): QueueKeys {
    return this.lanes[0]?.keys ?? queueKeys(this.options.prefix, this.name);
  }

  /** The number of partitions this worker claims from (0 until started with `partitions: 'auto'`). */
  get partitions(): number {
    return this.lanes.length;
  }

  /** Number of jobs whose processor is running now. */
  get activeCount(): number {
    return this.runner.activeCount;
  }

  /** Jobs run at once (the `concurrency` option, or the last value set here). */
  get concurrency(): number {
    return this.runner.concurrency;
  }

  /**
   * Changes how many jobs this worker runs at once, without a restart (1..MAX_CONCURRENCY). Raising it
   * claims for the new slots at once; lowering it lets the running jobs finish and claims no more
   * until fewer run than the new value.
   */
  set concurrency(n: number) {
    this.runner.setConcurrency(
      checkBatchConcurrency(checkInt('concurrency', n, 1, MAX_CONCURRENCY), this.options.batch),
    );
  }

  /** True between pause() and resume(). */
  get isPaused(): boolean {
    return this.runner.isPaused;
  }

  /**
   * Stops this worker (only this one: queue.pause() stops every worker) from claiming and starting
   * jobs; jobs it had claimed but not started go back to waiting at once, for other workers. Running
   * jobs carry on; with `{ waitForRunning: true }` the promise resolves once they have finished and
   * their outcomes are written.
   * Leases, recovery and heartbeats go on while paused.
   */
  async pause(opts: { waitForRunning?: boolean } = {}): Promise<void> {
    const o = checkObject('pause options', opts);
    checkKnownKeys('pause options', o, ['waitForRunning']);
    this.runner.pause();
    await Promise.all(this.lanes.map((l) => l.withdrawHandoffs()));
    await this.runner.handedBack();
    if (o.waitForRunning !== true) return;
    await this.runner.whenIdle(MAX_TIMER_MS);
    await Promise.all(this.lanes.map((l) => l.drainOutcomes(MAX_TIMER_MS)));
  }

  /** Claims and starts jobs again after pause(). */
  resume(): void {
    this.runner.resume();
  }

  /**
   * @internal Per lane: leases held, jobs running, claims and outcomes in flight; and the schedule
   * advances in flight (for diagnosing a stuck worker, and for the test kit's settle).
   */
  diagnostics(): {
    running: number;
    /** Jobs claimed and not started yet (waiting for a slot, or for a batch to fill). */
    buffered: number;
    /** Jobs whose start is being confirmed before their processor runs (they came back unmarked 3 times). */
    confirming: number;
    /** Batches whose processor runs (the `batch` option; 0 otherwise). */
    batchesRunning: number;
    lanes: LaneDiagnostics[];
    state: string;
    scheduleAdvances: number;
  } {
    return {
      running: this.activeCount,
      buffered: this.runner.bufferedCount,
      confirming: this.runner.confirmingCount,
      batchesRunning: this.runner.batchCount,
      lanes: this.lanes.map((l) => {
        const running = this.runner.runningIn(l.partition);
        return {
          ...l.diagnostics(),
          running: running.size,
          runningJobs: running.jobs().map((job) => ({ id: job.id, token: job.token })),
        };
      }),
      state: this.state,
      scheduleAdvances: this.scheduleAdvances,
    };
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
          for (const lane of this.lanes) await lane.startFetching();
          break;
        } catch (err) {
          if (err instanceof RedisConfigError || err instanceof PartitionMismatchError) throw err;
          if (this.state !== 'running') throw err;
          this.reportError(err);
          await delay(reconnectDelayMs(attempt));
          if (this.state !== 'running') return;
        }
      }
      for (const lane of this.lanes) lane.startRenewing();
      this.recoverer.start();
    })();
    return this.startPromise;
  }

  /** The next tick's job is created as this one starts (the recovery loop repairs it if we die first). */
  private advanceScheduleOf(job: Job<Data>): void {
    const occurrence = parseOccurrenceId(job.id);
    if (!occurrence) return;
    // Not awaited (the job starts now), but counted: it reads the time, and the next occurrence is due
    // one period after the time it reads.
    this.scheduleAdvances++;
    advanceSchedule(this.conn.client, this.laneOf(job as Job<unknown>).keys, occurrence.key, occurrence.tick)
      .catch((err) => this.reportError(err))
      .finally(() => this.scheduleAdvances--);
  }

  // ---- events --------------------------------------------------------------------------------

  /** An outcome a lane wrote (or had refused: the lease was lost and the fence said no). */
  private onOutcome(o: LaneOutcome): void {
    if (o.kind === 'completed') this.notify('completed', o.job as Job<Data>, o.value as Result);
    else if (o.kind === 'failed') this.notify('failed', o.job as Job<Data>, o.cause, o.outcome);
    else if (o.kind === 'refused') this.reportError(o.error);
    else this.notify(o.kind, o.job as Job<Data>, o.delayMs);
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
  private notify<
    E extends
      | 'active'
      | 'completed'
      | 'failed'
      | 'leaseLost'
      | 'recovered'
      | 'snoozed'
      | 'rateLimited'
      | 'parked',
  >(event: E, ...args: WorkerEvents<Data, Result>[E]): void {
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

  // ---- shutdown ------------------------------------------------------------------------------

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
    for (const lane of this.lanes) await lane.stopFetching();
    // Replies of claims still in flight hand their jobs back as they arrive (Runner.accept).
    this.runner.handBackBuffered();
    if (this.runner.activeCount + this.runner.confirmingCount > 0) {
      await this.runner.whenIdle(deadline - Date.now());
      this.runner.failStillRunning();
    }
    const grace = Math.max(deadline - Date.now(), OUTCOME_GRACE_MS);
    const handedBack = (async () => {
      await Promise.all(this.lanes.map((l) => l.claimsSettled()));
      await Promise.all(this.lanes.map((l) => l.startsSettled()));
      await this.runner.handedBack();
    })();
    await Promise.all([...this.lanes.map((l) => l.drainOutcomes(grace)), settledWithin(handedBack, grace)]);
    for (const lane of this.lanes) lane.stop();
    this.recoverer.stop();
    this.heartbeat.stop();
    if (wasStarted) {
      // Bounded: a black-holed connection never answers (the entry then goes with its heartbeat TTL).
      const unregister = this.lanes[0]?.calls.beat(this.id, 0, '').catch((err) => this.reportError(err));
      if (unregister) await settledWithin(unregister, OUTCOME_GRACE_MS);
    }
    await this.sandboxes?.close();
    await this.childQueues.close();
    await closeConnection({ client: this.subscriber, owned: true });
    await closeConnection(this.conn);
    this.state = 'closed';
  }
}
