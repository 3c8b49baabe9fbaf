/**
 * The test env of `surety/testing` (docs/testing.md): a private redis-server (or a given connection),
 * a virtual clock, and Queues and Workers wired to both, so a user's test runs Surety's real scripts
 * and worker loops and moves time at will: `await env.advance('1h')`, `await env.drain()`.
 *
 * advance(d): wait until the workers are quiet (settle.ts) -> move the clock by d at once -> one
 * recovery pass per queue (leases that expired during the jump go back, as another worker's recovery
 * loop would do) -> fire the workers' timers that came due (the delayed-job wake timer, whose claim
 * promotes due jobs and schedule occurrences; lease renewals, refused for leases just recovered;
 * attempt timeouts) -> wait until the workers are idle, except for attempts that were already running
 * before the jump (a test may hold one open on purpose). The jump is one step, as if the workers were
 * frozen for d: a lease shorter than d expires even though its worker is alive.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ClosedError, NotSettledError, ValidationError } from '../errors.js';
import type { QueueOptions } from '../options/queue.js';
import { Queue } from '../queue/queue.js';
import type { ConnectionOption } from '../redis/client.js';
import { EmbeddedRedis } from '../redis/embedded.js';
import { checkCallOptions, checkPrefix, checkTimerMs, show } from '../validate.js';
import type { ProcessorMap } from '../worker/named-processors.js';
import type { WorkerOptions } from '../worker/options.js';
import { type Processor, Worker } from '../worker/worker.js';
import { parseDuration } from './duration.js';
import { runningAttempts, type SettleLevel, Settler, type WatchedQueue } from './settle.js';
import { VirtualClock } from './virtual-clock.js';

export interface TestEnvOptions {
  /**
   * Redis to use instead of starting a private redis-server: a URL, ioredis options or a client. The
   * env never flushes it; its queues use a prefix of their own (see `prefix`).
   */
  connection?: ConnectionOption;
  /** Where the virtual clock starts: epoch ms, a Date or an ISO 8601 string. Default: the real time now. */
  startAt?: number | Date | string;
  /**
   * Key prefix of env.queue and env.worker. Default 'surety' on the private server, and
   * 'surety-test-<random>' on a given connection, so two test files sharing a server never meet.
   */
  prefix?: string;
  /** How long (real time) advance and drain wait for the workers to settle. Default 10 000 ms. */
  settleTimeoutMs?: number;
}

/** What env.queue and env.worker take: the options of Queue and Worker, without the env's own. */
export type EnvQueueOptions = Omit<QueueOptions, 'connection' | 'clock'>;
export type EnvWorkerOptions = Omit<WorkerOptions, 'connection' | 'clock'>;

type AnyWorker = Worker<unknown, unknown>;

/** Close timeout of env.worker's workers unless given: a test's teardown should not wait 30 s. */
const ENV_CLOSE_TIMEOUT_MS = 1_000;

export class TestEnv {
  /** The env's virtual clock: give it as `clock` to a Queue or Worker you build yourself. */
  readonly clock: VirtualClock;
  /** The env's Redis: give it as `connection` to a Queue or Worker you build yourself. */
  readonly connection: ConnectionOption;
  readonly prefix: string;
  private readonly settleTimeoutMs: number;
  private readonly queues: Queue[] = [];
  private readonly ownWorkers: AnyWorker[] = [];
  /** One Queue per queue address the env has seen, for its reads and recovery passes. */
  private readonly watchedQueues = new Map<string, WatchedQueue>();
  private closed = false;
  /** advance and drain calls run one after the other, in call order (a test may forget an await). */
  private turn: Promise<unknown> = Promise.resolve();

  /** @internal Use createTestEnv. */
  constructor(
    connection: ConnectionOption,
    opts: { startAt: number; prefix: string; settleTimeoutMs: number },
    private readonly server: EmbeddedRedis | null,
    private readonly dir: string | null,
  ) {
    this.connection = connection;
    this.clock = new VirtualClock(opts.startAt);
    this.prefix = opts.prefix;
    this.settleTimeoutMs = opts.settleTimeoutMs;
  }

  /** The virtual time, epoch ms. */
  now(): number {
    return this.clock.now();
  }

  /** A Queue on the env's Redis and clock (closed by env.close()). */
  queue<Data = unknown, Result = unknown>(name: string, opts: EnvQueueOptions = {}): Queue<Data, Result> {
    this.checkOpen();
    const q = new Queue<Data, Result>(name, { prefix: this.prefix, ...opts, ...this.wiring() });
    this.queues.push(q as Queue);
    this.watchQueue(q.options.prefix, name);
    return q;
  }

  /**
   * A Worker on the env's Redis and clock (closed by env.close()). `closeTimeoutMs` defaults to 1 000
   * here (not 30 000): a processor still running at the end of a test is failed quickly.
   */
  worker<Data = unknown, Result = unknown>(
    name: string,
    processor: Processor<Data, Result> | ProcessorMap<Data, Result> | URL | string,
    opts: EnvWorkerOptions = {},
  ): Worker<Data, Result> {
    this.checkOpen();
    const w = new Worker<Data, Result>(name, processor, {
      prefix: this.prefix,
      closeTimeoutMs: ENV_CLOSE_TIMEOUT_MS,
      ...opts,
      ...this.wiring(),
    });
    this.ownWorkers.push(w as AnyWorker);
    return w;
  }

  /**
   * Moves the virtual clock forward by `duration` (ms, or a string such as '30s', '1h', '2d', '1h30m')
   * and runs what came due: delayed jobs and retries after their backoff, schedule ticks, expired
   * leases (recovered), attempt timeouts. Resolves once the workers are idle again.
   */
  async advance(duration: number | string): Promise<void> {
    const ms = parseDuration('advance: duration', duration);
    this.checkOpen();
    return this.inTurn(() => this.jump(ms));
  }

  private async jump(ms: number): Promise<void> {
    await this.settle('quiet', null, 'advance');
    // Attempts running before the jump (a test may hold one open, e.g. to expire its lease) are not
    // waited for; those the jump starts are.
    const before = runningAttempts(this.scope(null).workers);
    this.clock.moveTo(this.clock.now() + ms);
    for (const q of this.scope(null).queues) await q.queue.recoverExpired();
    await this.clock.fireDue();
    await this.settle('idle', null, 'advance', before);
  }

  /**
   * Runs until nothing is runnable: no waiting job a worker could take, no processor running.
   * Delayed jobs not yet due stay delayed (advance the clock for them). `queue`: only that queue's
   * workers and jobs (a name, or a Queue).
   */
  async drain(queue?: string | { readonly name: string }): Promise<void> {
    this.checkOpen();
    let name: string | null = null;
    if (queue !== undefined) {
      name = typeof queue === 'string' ? queue : ((queue as { name?: unknown } | null)?.name as string);
      if (typeof name !== 'string')
        throw new ValidationError(`drain: queue must be a queue name or a Queue, got ${show(queue)}`);
    }
    await this.inTurn(() => this.settle('idle', name, 'drain'));
  }

  /** Closes the env's workers and queues, stops its private redis-server and removes its data directory. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all(this.ownWorkers.map((w) => w.close()));
    await Promise.all(this.queues.map((q) => q.close()));
    await Promise.all([...this.watchedQueues.values()].map((q) => q.queue.close()));
    await this.server?.stop();
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // ---- internals -----------------------------------------------------------------------------

  private inTurn<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.turn.then(fn, fn);
    this.turn = run.catch(() => {});
    return run;
  }

  private wiring(): { connection: ConnectionOption; clock: VirtualClock } {
    return { connection: this.connection, clock: this.clock };
  }

  private checkOpen(): void {
    if (this.closed) throw new ClosedError('test env');
  }

  private watchQueue(prefix: string, name: string): WatchedQueue {
    const address = `${prefix}\n${name}`;
    let q = this.watchedQueues.get(address);
    if (!q) {
      const queue = new Queue(name, { prefix, partitions: 'auto', ...this.wiring() });
      q = { prefix, name, queue };
      this.watchedQueues.set(address, q);
    }
    return q;
  }

  /** The workers on the env's clock (its own and any built with `clock: env.clock`), and their queues. */
  private scope(name: string | null): { workers: AnyWorker[]; queues: WatchedQueue[] } {
    const workers = (this.clock.workers as AnyWorker[]).filter((w) => name === null || w.name === name);
    for (const w of workers) this.watchQueue(w.options.prefix, w.name);
    const queues = [...this.watchedQueues.values()].filter((q) => name === null || q.name === name);
    return { workers, queues };
  }

  /**
   * Waits until the env's workers are settled at `level` (settle.ts), checking after each turn of
   * work; NotSettledError after settleTimeoutMs of real time, naming what is left.
   */
  private async settle(
    level: SettleLevel,
    name: string | null,
    operation: string,
    exempt?: ReadonlySet<string>,
  ): Promise<void> {
    const deadline = Date.now() + this.settleTimeoutMs;
    const settler = new Settler(level, exempt);
    for (let round = 0; ; round++) {
      const { workers, queues } = this.scope(name);
      const pending = await settler.pending(workers, queues);
      if (pending.length === 0) return;
      if (Date.now() > deadline) throw new NotSettledError(pending, this.settleTimeoutMs, operation);
      // Bounded poll on real state: the first checks follow at once (most work is one round trip),
      // then every few ms.
      await new Promise((r) => (round < 3 ? setImmediate(r) : setTimeout(r, 5)));
    }
  }
}

function startTime(value: unknown): number {
  if (value === undefined) return Date.now();
  const t = value instanceof Date ? value.getTime() : typeof value === 'string' ? Date.parse(value) : value;
  if (typeof t !== 'number' || !Number.isInteger(t) || t < 0) {
    throw new ValidationError(
      `startAt must be epoch ms (an integer >= 0), a valid Date or an ISO 8601 string, got ${show(value)}`,
    );
  }
  return t;
}

/**
 * Starts a test env: a private redis-server on a free port with a temporary data directory (removed
 * by close), unless `connection` is given, and a virtual clock starting at `startAt`.
 */
export async function createTestEnv(opts: TestEnvOptions = {}): Promise<TestEnv> {
  checkCallOptions('createTestEnv options', opts, ['connection', 'startAt', 'prefix', 'settleTimeoutMs']);
  const startAt = startTime(opts.startAt);
  const settleTimeoutMs =
    opts.settleTimeoutMs === undefined ? 10_000 : checkTimerMs('settleTimeoutMs', opts.settleTimeoutMs, 1);
  const given = opts.connection !== undefined;
  const prefix =
    opts.prefix === undefined
      ? given
        ? `surety-test-${randomBytes(4).toString('hex')}`
        : 'surety'
      : checkPrefix(opts.prefix);
  if (given)
    return new TestEnv(opts.connection as ConnectionOption, { startAt, prefix, settleTimeoutMs }, null, null);
  const dir = await mkdtemp(join(tmpdir(), 'surety-testenv-'));
  const server = new EmbeddedRedis({ dir, aof: false });
  try {
    await server.start();
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return new TestEnv(server.url, { startAt, prefix, settleTimeoutMs }, server, dir);
}
