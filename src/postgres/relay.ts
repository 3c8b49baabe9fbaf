/**
 * Relay: moves committed outbox rows into Redis until close(). One loop of batches (relay-batch.ts:
 * lock, move, settle, commit), each its own transaction; while they come full, the next batch is
 * locked and the previous one committed while a batch's rows go to Redis (drain, below). It is woken by
 * the Listener's notifications and by a poll every `pollMs`; after a failure (Redis or Postgres
 * unreachable, Redis full) it backs off with the one reconnect backoff. Several relays may run at once,
 * on one or many machines: rows are locked with SKIP LOCKED, so each batch is one relay's.
 *
 * Shutdown order (close): stop the poll and the listener, let the batches in progress finish (up to
 * `closeTimeoutMs`, then abandon them: their Postgres connections are closed, so their transactions
 * roll back and their rows stay pending for the next relay), close the Redis connection.
 */
import { EventEmitter } from 'node:events';
import type { Pool, PoolClient } from 'pg';
import { MAX_BULK } from '../defaults.js';
import { ClosedError, ConnectionError, ListenerError, PostgresError, SuretyError } from '../errors.js';
import type { QueueOptions } from '../options/queue.js';
import { resolveQueueOptions } from '../options/queue.js';
import { type Forget, StoredJobAdder } from '../queue/stored-adder.js';
import type { ConnectionOption, Logger } from '../redis/client.js';
import { type Connection, closeConnection, connect } from '../redis/connection.js';
import { reconnectDelayMs, safeTimeout, TIMED_OUT, withinMs } from '../timers.js';
import { checkCallOptions, checkInt, checkTimerMs } from '../validate.js';
import { checkout, drop, giveBack } from './checkout.js';
import { Listener } from './listener.js';
import { type LockedRow, lockRows, type Moves, moveRows, settleRows } from './relay-batch.js';
import { missingTable, type OutboxNames } from './schema.js';

export interface RelayOptions {
  /** Where Redis is: as a Queue's `connection` (a URL, ioredis options or a client, never closed). */
  connection?: ConnectionOption;
  /** Key prefix of the queues. Default 'surety'. */
  prefix?: string;
  /** Partitions of the queues: 'auto' (default) reads each queue's count from Redis, as admin tools do. */
  partitions?: number | 'auto';
  /** The Queues' `defaults`: options for jobs added without them (a Queue's option of that name). */
  defaults?: QueueOptions['defaults'];
  /** The Queues' `durability` (wait for replicas before a row is deleted). Default: none. */
  durability?: QueueOptions['durability'];
  /** Rows per batch (one Postgres transaction, one addBulk per queue). 1-10 000, default 500. */
  batch?: number;
  /** How often to look for rows without a notification (the safety net). Default 1 000 ms. */
  pollMs?: number;
  /** How long close() lets the batch in progress finish before abandoning it. Default 10 000 ms. */
  closeTimeoutMs?: number;
  /**
   * How long a batch may wait for Redis before it is abandoned: its transaction rolls back (its rows
   * stay for the next batch, whose adds of the same ids are harmless) and the Redis connection is
   * opened afresh, so a connection that is up but moves no byte (a black-holed network) cannot hold the
   * rows' locks for ever. Default 30 000 ms.
   */
  batchTimeoutMs?: number;
  /** Where warnings go when nothing listens to `error`. Default: console. */
  logger?: Logger;
}

/** What one batch did (the `progress` event). */
export interface RelayProgress {
  /** Rows moved into Redis and deleted from the outbox (added, or found there already). */
  relayed: number;
  /** Of those, jobs Redis had already (`isNew: false`): a repeat after a crash, or a dedupe key's job. */
  existing: number;
  /** Rows Redis refused for good, now failed in the outbox (outbox.failed()). */
  failed: { id: string; queue: string; code: string; message: string }[];
  /** Rows left pending after a refusal that may pass (Redis down or full, a parent not there yet). */
  deferred: number;
  /** How long the batch took, ms. */
  ms: number;
}

/** Totals since the relay started (relay.stats()). */
export interface RelayStats {
  relayed: number;
  existing: number;
  failed: number;
  deferred: number;
  /** Batches that locked at least one row. */
  batches: number;
  /** Times the relay looked for rows (each batch, empty ones included). */
  polls: number;
  /** True while its LISTEN connection is up (otherwise only polls find new rows). */
  listening: boolean;
  /** Errors reported (`error` events): each one a batch or a connection the relay tried again. */
  errors: number;
  lastError?: { code: string; message: string; at: number };
}

export interface RelayEvents {
  progress: [progress: RelayProgress];
  /** A typed error the relay recovers from by itself (it backs off and tries again). */
  error: [error: SuretyError];
}

interface ResolvedRelay {
  queue: QueueOptions;
  batch: number;
  pollMs: number;
  closeTimeoutMs: number;
  batchTimeoutMs: number;
  logger: Logger;
  autoPartitions: boolean;
}

const RELAY_KEYS = [
  'connection',
  'prefix',
  'partitions',
  'defaults',
  'durability',
  'batch',
  'pollMs',
  'closeTimeoutMs',
  'batchTimeoutMs',
  'logger',
] as const;

function resolveRelay(opts: RelayOptions, maxPayloadBytes: number): ResolvedRelay {
  checkCallOptions('relay options', opts, RELAY_KEYS);
  const { batch, pollMs, closeTimeoutMs, batchTimeoutMs, connection: _, ...rest } = opts;
  const queue: QueueOptions = { partitions: 'auto', ...rest, maxPayloadBytes };
  // Checked now, so a bad prefix or default throws here rather than failing rows later.
  const resolved = resolveQueueOptions(queue);
  return {
    queue,
    batch: checkInt('batch', batch ?? 500, 1, MAX_BULK),
    pollMs: checkTimerMs('pollMs', pollMs ?? 1_000, 10),
    closeTimeoutMs: checkTimerMs('closeTimeoutMs', closeTimeoutMs ?? 10_000, 0),
    batchTimeoutMs: checkTimerMs('batchTimeoutMs', batchTimeoutMs ?? 30_000, 100),
    logger: resolved.logger,
    autoPartitions: resolved.partitions === 0,
  };
}

export class Relay extends EventEmitter<RelayEvents> {
  private readonly opts: ResolvedRelay;
  private readonly conn: Connection;
  private readonly queues = new Map<string, StoredJobAdder>();
  private readonly listener: Listener;
  private readonly wake = new Wake();
  private readonly loop: Promise<void>;
  private readonly totals: RelayStats = {
    relayed: 0,
    existing: 0,
    failed: 0,
    deferred: 0,
    batches: 0,
    polls: 0,
    listening: false,
    errors: 0,
  };
  /** The Postgres connections of the batches in progress (close() may have to drop them). */
  private readonly held = new Set<PoolClient>();
  /** Ends the waits of unlessGivenUp (close() calls them when it abandons the batches in progress). */
  private readonly givingUp = new Set<() => void>();
  private closing = false;
  private closed: Promise<void> | undefined;
  private failures = 0;

  /** Use outbox.relay(options). */
  constructor(
    private readonly pool: Pool,
    private readonly names: OutboxNames,
    maxPayloadBytes: number,
    options: RelayOptions,
  ) {
    super();
    this.opts = resolveRelay(options, maxPayloadBytes);
    this.conn = connect(options.connection, 'queue');
    pool.on('error', ignore);
    this.listener = new Listener(
      pool,
      names,
      () => this.wake.notify(),
      (err) => this.report(this.postgresError(err, 'the LISTEN connection')),
    );
    this.listener.start();
    this.loop = this.run();
  }

  /** Totals since the relay started. */
  stats(): RelayStats {
    const t = this.totals;
    return {
      ...t,
      listening: this.listener.listening,
      ...(t.lastError ? { lastError: { ...t.lastError } } : {}),
    };
  }

  private async run(): Promise<void> {
    while (!this.closing) {
      let next: 'poll' | 'backoff' | 'again';
      try {
        next = await this.drain();
      } catch (err) {
        if (this.closing) break;
        this.report(err instanceof SuretyError ? err : this.postgresError(err, 'a batch'));
        next = 'backoff';
      }
      if (this.closing) break;
      if (next === 'backoff') this.failures++;
      else this.failures = 0;
      if (next === 'backoff') await this.wake.sleep(reconnectDelayMs(this.failures));
      else if (next === 'poll') await this.wake.wait(this.opts.pollMs);
    }
  }

  /**
   * Batches back to back while they come full, overlapped: the next batch is locked while this one's
   * rows go to Redis, and this one is settled and committed while the next one's go, so a relay's
   * Redis adds wait for Postgres only when a batch is not full. The Redis adds stay one batch at a
   * time, in lock order; a batch that left a row pending (Redis down, a parent missing) ends the run
   * and the batch locked after it is rolled back untouched, so the next run starts again from the
   * oldest pending row, as without the overlap. Each batch is its own transaction: a crash at any
   * point leaves the rows of every uncommitted one pending (their adds, repeated, are no-ops).
   *
   * A batch locked ahead takes the rows after the batch before it (see lockRows), so a transaction
   * that commits late with older rows is skipped by it: every RESCAN_EVERY-th batch starts from the
   * oldest row again, and a run that skipped is followed at once by another ('again'), which does.
   * Says when to look again.
   */
  private async drain(): Promise<'poll' | 'backoff' | 'again'> {
    let current = await this.open();
    let settled: Promise<boolean> = Promise.resolve(true);
    let ahead: Promise<OpenBatch | undefined> | undefined;
    let skipped = false;
    try {
      for (let n = 1; current; n++) {
        const full = current.rows.length === this.opts.batch;
        const after = n % RESCAN_EVERY === 0 ? undefined : current.rows.at(-1)!.row;
        if (full && !this.closing) {
          ahead = quiet(this.open(after));
          skipped ||= after !== undefined;
        } else ahead = undefined;
        const moved = await this.withinBatchTimeout(
          moveRows(
            current.rows,
            (name) => this.queue(name),
            (name) => this.forget(name),
            this.opts.autoPartitions,
          ),
        );
        // The previous batch committed while these rows moved. If it failed instead, this one is
        // rolled back (below) and its rows, in Redis already, are added again by a later batch (no-ops).
        if (!(await settled)) return 'backoff';
        settled = this.settle(current, moved);
        current = undefined;
        if (moved.stoppedBy || moved.moves.some((m) => m.kind === 'deferred')) {
          await settled;
          return 'backoff';
        }
        // (`ahead` stays set until the next is locked: if close() gives up meanwhile, the finally
        // below rolls back whatever it locked.)
        current = ahead ? await this.unlessGivenUp(ahead) : undefined;
      }
      if (!(await settled)) return 'backoff';
      return skipped ? 'again' : 'poll';
    } finally {
      if (current) this.dropBatch(current.client, new ClosedError('the relay (the batch failed)'));
      // A batch locked ahead of one that failed or stopped is rolled back, its rows untouched, before
      // the next run locks again (which would skip them, and move younger rows first).
      const rolledBack = ahead?.then((b) => this.abandon(b)).catch(() => {});
      if (rolledBack && !this.closing) await this.unlessGivenUp(rolledBack);
      await settled;
    }
  }

  /**
   * `p`, or undefined once close() gives up on the batches in progress: a connection the pool may
   * never give (Postgres unreachable) must not hold close() beyond closeTimeoutMs.
   */
  private unlessGivenUp<T>(p: Promise<T>): Promise<T | undefined> {
    return new Promise<T | undefined>((resolve, reject) => {
      const stop = () => resolve(undefined);
      this.givingUp.add(stop);
      p.then(resolve, reject).finally(() => this.givingUp.delete(stop));
    });
  }

  /**
   * Takes a connection, opens a batch's transaction and locks up to `batch` pending rows (step 1);
   * undefined, with the transaction committed and the connection given back, when there were none
   * or the relay is closing.
   */
  private async open(after?: string): Promise<OpenBatch | undefined> {
    const started = performance.now();
    const client = await checkout(this.pool);
    if (this.closing) {
      // Closed while waiting for a connection (a pool at its max): start nothing.
      giveBack(client);
      return undefined;
    }
    this.held.add(client);
    try {
      const rows = await lockRows(client, this.names, this.opts.batch, after);
      this.totals.polls++;
      if (rows.length > 0) return { client, rows, started };
      await client.query('COMMIT');
      this.giveBack(client);
      return undefined;
    } catch (err) {
      this.dropBatch(client, err);
      throw this.postgresError(err, 'a batch');
    }
  }

  /**
   * Step 3 and the commit, then the `progress` event (and the error that stopped the batch, if any).
   * Resolves with whether it committed; a failure is reported here (and the rows stay pending).
   */
  private async settle(batch: OpenBatch, moved: Moves): Promise<boolean> {
    const { client, rows } = batch;
    try {
      if (!this.held.has(client)) throw new ClosedError('the relay (its batch was abandoned)');
      await settleRows(client, this.names, rows, moved.moves);
    } catch (err) {
      this.dropBatch(client, err);
      this.report(err instanceof SuretyError ? err : this.postgresError(err, 'a batch'));
      return false;
    }
    this.giveBack(client);
    this.forgetMarks(rows, moved);
    const progress: RelayProgress = { relayed: 0, existing: 0, failed: [], deferred: 0, ms: 0 };
    let deferredBy: SuretyError | undefined;
    moved.moves.forEach((m, i) => {
      if (m.kind === 'added') {
        progress.relayed++;
        if (!m.isNew) progress.existing++;
      } else if (m.kind === 'failed') {
        const r = rows[i]!;
        progress.failed.push({ id: r.id, queue: r.queue, code: m.error.code, message: m.error.message });
      } else {
        progress.deferred++;
        deferredBy ??= m.error;
      }
    });
    progress.ms = Math.round(performance.now() - batch.started);
    this.count(progress);
    const stoppedBy = moved.stoppedBy ?? deferredBy;
    if (stoppedBy) this.report(stoppedBy);
    return true;
  }

  /**
   * The rows whose delete just committed: their outbox marks can go from Redis (with the next add to
   * their partition, or at close). A queue dropped meanwhile (forget) keeps them until they expire.
   */
  private forgetMarks(rows: readonly LockedRow[], moved: Moves): void {
    const byQueue = new Map<string, Forget[]>();
    moved.moves.forEach((m, i) => {
      if (m.kind !== 'added') return;
      const job = rows[i]!;
      const list = byQueue.get(job.queue);
      if (list) list.push({ job, partition: m.partition });
      else byQueue.set(job.queue, [{ job, partition: m.partition }]);
    });
    for (const [name, list] of byQueue) this.queues.get(name)?.forget(list);
  }

  /** A batch locked ahead whose turn did not come: rolled back, its rows pending as they were. */
  private async abandon(batch: OpenBatch | undefined): Promise<void> {
    if (!batch || !this.held.has(batch.client)) return;
    try {
      await batch.client.query('ROLLBACK');
      this.giveBack(batch.client);
    } catch (err) {
      this.dropBatch(batch.client, err);
    }
  }

  /** Closes a batch's connection, which rolls its transaction back: its rows stay pending. */
  private dropBatch(client: PoolClient, err: unknown): void {
    if (!this.held.delete(client)) return;
    drop(client, err);
  }

  /**
   * `moving` (the batch's Redis part), or a ConnectionError after batchTimeoutMs: the Redis connection
   * is then closed and opened again, which rejects the calls it holds (a reply that may never come).
   */
  private async withinBatchTimeout<T>(moving: Promise<T>): Promise<T> {
    const outcome = await withinMs(moving, this.opts.batchTimeoutMs);
    if (outcome !== TIMED_OUT) return outcome;
    moving.catch(() => {}); // it rejects once the connection closes; this batch is abandoned already
    this.conn.client.disconnect(true);
    throw new ConnectionError(
      `outbox relay: Redis did not answer a batch within ${this.opts.batchTimeoutMs} ms; the batch rolled back and the connection is opened again`,
      undefined,
    );
  }

  private giveBack(client: PoolClient): void {
    this.held.delete(client);
    giveBack(client);
  }

  private queue(name: string): StoredJobAdder {
    if (this.closing) throw new ClosedError('the relay');
    let q = this.queues.get(name);
    if (!q) {
      q = new StoredJobAdder(name, this.opts.queue, this.conn);
      this.queues.set(name, q);
    }
    return q;
  }

  /** Drops a queue whose partition count went stale; the next batch opens it afresh. */
  private forget(name: string): void {
    this.queues.delete(name);
  }

  private count(p: RelayProgress): void {
    const t = this.totals;
    t.batches++;
    t.relayed += p.relayed;
    t.existing += p.existing;
    t.failed += p.failed.length;
    t.deferred += p.deferred;
    this.notify('progress', p);
  }

  private postgresError(err: unknown, what: string): SuretyError {
    const typed = missingTable(err, this.names);
    if (typed instanceof SuretyError) return typed;
    const message = err instanceof Error ? err.message : String(err);
    return new PostgresError(`outbox relay: ${what} failed in Postgres: ${message}`, err);
  }

  /** A recovered-from error: the `error` event, else the logger; it never stops the relay. */
  private report(error: SuretyError): void {
    if (this.closing) return;
    this.totals.errors++;
    this.totals.lastError = { code: error.code, message: error.message, at: Date.now() };
    if (this.listenerCount('error') > 0) this.notify('error', error);
    else this.opts.logger.warn(`surety outbox relay: ${error.code} ${error.message}`);
  }

  /** Calls listeners; one that throws is reported (ListenerError) and changes nothing else. */
  private notify<E extends keyof RelayEvents>(event: E, ...args: RelayEvents[E]): void {
    try {
      (this.emit as (e: E, ...a: RelayEvents[E]) => boolean)(event, ...args);
    } catch (thrown) {
      const message = thrown instanceof Error ? thrown.message : String(thrown);
      const error = new ListenerError(event, message, thrown);
      if (event !== 'error' && this.listenerCount('error') > 0) this.notify('error', error);
      else this.opts.logger.warn(`surety outbox relay: ${error.code} ${error.message}`);
    }
  }

  private async flushMarks(): Promise<void> {
    const flushed = Promise.all([...this.queues.values()].map((q) => q.flush())).catch(() => {});
    await withinMs(flushed, this.opts.closeTimeoutMs);
  }

  /** Stops the relay (see the file comment for the order); idempotent. */
  close(): Promise<void> {
    this.closed ??= this.shutdown();
    return this.closed;
  }

  private async shutdown(): Promise<void> {
    this.closing = true;
    this.wake.stop();
    this.listener.stop();
    const finished = (await withinMs(this.loop, this.opts.closeTimeoutMs)) !== TIMED_OUT;
    const abandoned = [...this.held];
    if (!finished) {
      // Abandoned: closing their connections rolls their transactions back; their rows stay pending.
      for (const client of abandoned) this.dropBatch(client, new ClosedError('the relay'));
      for (const stop of this.givingUp) stop();
    }
    // The marks of the last committed batches, in one call per queue and partition: a Redis that
    // does not answer leaves them (they expire), and holds close() no longer than closeTimeoutMs.
    if (finished) await this.flushMarks();
    this.queues.clear();
    await closeConnection(this.conn);
    // An abandoned batch ends now (its calls fail); a loop still waiting for a pool connection starts
    // nothing once it gets one, and is not waited for.
    if (finished || abandoned.length > 0) await this.loop;
    this.pool.off('error', ignore);
  }
}

/** A batch's open transaction and the rows it locked. */
/** Every this many batches of a run, the one locked ahead starts from the oldest pending row (drain). */
const RESCAN_EVERY = 16;

interface OpenBatch {
  client: PoolClient;
  rows: LockedRow[];
  /** When its lock began (performance.now()): its progress `ms` runs from there to its commit. */
  started: number;
}

/** `p`, with its rejection marked as handled: it is awaited (and its error seen) later, or not at all. */
function quiet<T>(p: Promise<T>): Promise<T> {
  p.catch(() => {});
  return p;
}

/**
 * Errors seen elsewhere: on a batch's connection (its failing query reports them), and on the pool,
 * whose idle connections die when Postgres restarts (unheard, the pool's `error` event would end the
 * process; the relay's next batch gets a fresh connection).
 */
const ignore = () => {};

/** The loop's wait: a poll that a notification ends early, a backoff that it does not, both ended by close. */
class Wake {
  private notified = false;
  private stopped = false;
  private waiting: { done: () => void; wakeable: boolean } | undefined;

  notify(): void {
    if (this.waiting?.wakeable) this.waiting.done();
    else this.notified = true;
  }

  /** Until `ms` passed or a notification came (one that came meanwhile ends it at once). */
  wait(ms: number): Promise<void> {
    if (this.notified) {
      this.notified = false;
      return Promise.resolve();
    }
    return this.until(ms, true);
  }

  /** `ms`, whatever notifications come (they are kept for the next wait). */
  sleep(ms: number): Promise<void> {
    return this.until(ms, false);
  }

  private until(ms: number, wakeable: boolean): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiting = undefined;
        resolve();
      };
      const timer = safeTimeout(done, ms);
      this.waiting = { done, wakeable };
    });
  }

  stop(): void {
    this.stopped = true;
    this.waiting?.done();
  }
}
