/**
 * Reading a queue's lifecycle events (docs/events.md). Scripts append one stream entry per transition
 * per call (`event`, newline-separated `ids`, and optionally `data` for all of them, `results` or
 * `keys` with one line per id, `count` and `state`); readers expand them into one event per job. A
 * queue-wide entry (paused, resumed, drained, cleaned) has no ids and is read as one event whose
 * jobId is ''. Usable from any process: the stream lives in Redis, capped near `events.maxLen` entries.
 */
import { EventEmitter } from 'node:events';
import { DEFAULT_PREFIX } from '../defaults.js';
import type { ConnectionOption } from '../redis/client.js';
import { connect, duplicate } from '../redis/connection.js';
import type { RedisClient } from '../scripts/specs.js';
import {
  checkCallOptions,
  checkPrefix,
  checkQueueAddress,
  checkQueueName,
  checkStreamFrom,
} from '../validate.js';
import type { QueueContext } from './context.js';
import { mergeIterators } from './merge-iterators.js';
import { type Layout, resolveLayout } from './partitions.js';

export type QueueEventName =
  | 'added'
  | 'active'
  | 'progress'
  | 'completed'
  | 'failed'
  | 'retrying'
  | 'dead'
  | 'recovered'
  | 'retried'
  | 'promoted'
  | 'cancelled'
  | 'removed'
  /** A closing worker handed back a job it had claimed but not started (back to waiting, attempt not spent). */
  | 'released'
  /** A processor snoozed the job (SnoozeError): delayed, attempt not spent. */
  | 'snoozed'
  /** A processor hit a rate limit (RateLimitError): back to waiting, attempt not spent, claims paused. */
  | 'rateLimited'
  /** A processor's job.waitForSignal parked the job (delayed until the signal or its deadline). */
  | 'parked'
  /** queue.signal gave the job a signal (it keeps it until a wait takes it). */
  | 'signalled'
  /** An add named an id that exists (or came earlier in the same addBulk): nothing was added. */
  | 'duplicated'
  /** An add that a dedupe key took (throttled, or debounced into the pending job): `jobId` is the holder's, `key` the key. */
  | 'deduplicated'
  /** queue.pause() paused the queue (it was not paused). Queue-wide: jobId ''. */
  | 'paused'
  /** queue.resume() resumed the queue (it was paused, or held by a RateLimitError). Queue-wide: jobId ''. */
  | 'resumed'
  /** A claim took the last waiting job: none is waiting now (delayed ones may be). Queue-wide: jobId ''. */
  | 'drained'
  /** queue.clean() deleted `count` finished jobs of `state` (one event per batch of up to 1 000). Queue-wide: jobId ''. */
  | 'cleaned';

export interface QueueEvent {
  event: QueueEventName;
  /** The job's id; '' for the queue-wide events (paused, resumed, drained, cleaned). */
  jobId: string;
  /** Redis time of the transition (epoch ms). */
  at: number;
  /** Stream entry id: pass it as `from` to resume after this event. */
  streamId: string;
  /** The progress value, for `progress` events. */
  data?: unknown;
  /**
   * For `completed` events: the processor's return value, parsed (as `getJob(id).result`; bounded by
   * the Worker's maxPayloadBytes). Absent when it returned undefined.
   */
  result?: unknown;
  /** For `deduplicated` events: the dedupe key that took the add. */
  key?: string;
  /** For `cleaned` events: how many jobs this batch deleted. */
  count?: number;
  /** For `cleaned` events: the state the deleted jobs were in. */
  state?: 'completed' | 'dead';
  /** The partition the job (or the queue-wide event) belongs to (partitioned queues only). */
  partition?: number;
}

export interface ReadEventsOptions {
  /** '$' (default): only events from now on; '0': everything still in the stream; or a streamId. */
  from?: string;
  /** Stop reading when this signal aborts. */
  signal?: AbortSignal;
}

type StreamReply = [string, [string, string[]][]][] | null;

/** The events of one stream entry: one per id (one with jobId '' for a queue-wide entry). */
function* entryEvents(
  streamId: string,
  f: Record<string, string>,
  partition: number | undefined,
): Generator<QueueEvent> {
  const at = Number(streamId.slice(0, streamId.indexOf('-')));
  const data = f.data === undefined ? undefined : JSON.parse(f.data);
  const ids = (f.ids ?? '').split('\n');
  // One line per id; a count that does not match (never written so) is ignored, not misassigned.
  const perId = (field: string | undefined) => {
    const lines = field?.split('\n');
    return lines?.length === ids.length ? lines : undefined;
  };
  const results = perId(f.results);
  const keys = perId(f.keys);
  for (let i = 0; i < ids.length; i++) {
    const e: QueueEvent = { event: f.event as QueueEventName, jobId: ids[i] as string, at, streamId };
    if (data !== undefined) e.data = data;
    const result = results?.[i];
    if (result) e.result = JSON.parse(result);
    const key = keys?.[i];
    if (key !== undefined) e.key = key;
    if (f.count !== undefined) e.count = Number(f.count);
    if (f.state === 'completed' || f.state === 'dead') e.state = f.state;
    if (partition !== undefined) e.partition = partition;
    yield e;
  }
}

/** Yields events from `client` (which it blocks on: give it a dedicated connection). */
export async function* readEvents(
  client: RedisClient,
  streamKey: string,
  opts: ReadEventsOptions = {},
  partition?: number,
): AsyncGenerator<QueueEvent> {
  let last = opts.from ?? '$';
  while (!opts.signal?.aborted) {
    let reply: StreamReply;
    try {
      reply = (await client.xread('COUNT', 500, 'BLOCK', 1_000, 'STREAMS', streamKey, last)) as StreamReply;
    } catch (err) {
      if (opts.signal?.aborted) return;
      throw err;
    }
    for (const [, entries] of reply ?? []) {
      for (const [streamId, fields] of entries) {
        last = streamId;
        const f: Record<string, string> = {};
        for (let i = 0; i < fields.length; i += 2) f[fields[i] as string] = fields[i + 1] as string;
        yield* entryEvents(streamId, f, partition);
      }
    }
  }
}

/**
 * queue.events(): one stream reader per partition, each on its own connection (XREAD BLOCK holds it),
 * merged as events arrive (ordered per partition; `event.partition` says which in a partitioned
 * queue). The connections close when the loop ends (break, or `signal` aborted).
 */
export async function* queueEvents(ctx: QueueContext, opts: ReadEventsOptions): AsyncGenerator<QueueEvent> {
  checkCallOptions('events options', opts, ['from', 'signal']);
  const from = checkStreamFrom(opts.from);
  const layout = await ctx.open();
  const clients = layout.parts.map(() => duplicate(ctx.client));
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

export interface QueueEventsOptions {
  connection?: ConnectionOption;
  prefix?: string;
  /** Where to start: '$' (default, new events only), '0' (all retained), or a streamId. */
  from?: string;
}

/**
 * The EventEmitter form: `new QueueEvents('emails', { connection }).on('completed', (e) => ...)`.
 * Emits each event under its name and as `event`; `error` on a read failure (it keeps reading).
 * A partitioned queue is read on every partition (the count recorded in Redis, as `partitions:
 * 'auto'`), one connection each; its events carry `partition` and are ordered per partition.
 */
export class QueueEvents extends EventEmitter {
  private readonly controller = new AbortController();
  /** Dedicated connections, one per partition: XREAD BLOCK holds each. */
  private readonly clients: RedisClient[] = [];
  private readonly done: Promise<void>;

  constructor(name: string, opts: QueueEventsOptions = {}) {
    super();
    checkQueueName(name);
    checkCallOptions('QueueEvents options', opts, ['connection', 'prefix', 'from']);
    const from = checkStreamFrom(opts.from);
    const prefix = opts.prefix === undefined ? DEFAULT_PREFIX : checkPrefix(opts.prefix);
    checkQueueAddress(prefix, name);
    const base = connect(opts.connection, 'worker');
    // A client you passed is duplicated, not blocked.
    this.clients.push(base.owned ? base.client : duplicate(base.client));
    this.done = this.run(prefix, name, from);
  }

  /** Reads the partition count (again after a failure), then every partition's stream. */
  private async run(prefix: string, name: string, from: string): Promise<void> {
    const first = this.clients[0] as RedisClient;
    let layout: Layout | undefined;
    while (!layout) {
      if (this.controller.signal.aborted) return;
      try {
        layout = await resolveLayout(first, prefix, name, 0);
      } catch (err) {
        if (!(await this.failed(err))) return;
      }
    }
    // close() disconnects the clients it sees: none may be added once it ran.
    if (this.controller.signal.aborted) return;
    while (this.clients.length < layout.count) this.clients.push(duplicate(first));
    const { partitioned } = layout;
    await Promise.all(
      layout.parts.map((k, p) =>
        this.loop(this.clients[p] as RedisClient, k.events, from, partitioned ? p : undefined),
      ),
    );
  }

  private async loop(
    client: RedisClient,
    streamKey: string,
    from: string,
    partition?: number,
  ): Promise<void> {
    let last = from;
    while (!this.controller.signal.aborted) {
      try {
        for await (const e of readEvents(
          client,
          streamKey,
          { from: last, signal: this.controller.signal },
          partition,
        )) {
          last = e.streamId;
          this.emit(e.event, e);
          this.emit('event', e);
        }
      } catch (err) {
        if (!(await this.failed(err))) return;
      }
    }
  }

  /** Reports a read failure and waits before the next try; false once closing. */
  private async failed(err: unknown): Promise<boolean> {
    if (this.controller.signal.aborted) return false;
    if (this.listenerCount('error') > 0) this.emit('error', err);
    await new Promise((r) => setTimeout(r, 200));
    return !this.controller.signal.aborted;
  }

  /** Stops reading and closes the connection; resolves once the read loop has ended. */
  async close(): Promise<void> {
    this.controller.abort();
    // One disconnect only: ioredis arms a 2 s timer per disconnect() that only the socket's `close`
    // clears, so a second call on a socket that already closed kept the process alive for 2 s.
    // disconnect() also ends the blocked XREAD at once (QUIT would wait up to its BLOCK time).
    for (const client of this.clients) if (client.status !== 'end') client.disconnect();
    await this.done;
  }
}
