/**
 * Reading a queue's lifecycle events. Scripts append one stream entry per transition per call
 * (`event`, newline-separated `ids`, optional `data`); readers expand them into one event per job.
 * Usable from any process: the stream lives in Redis, capped near `events.maxLen` entries.
 */
import { EventEmitter } from 'node:events';
import { connect, duplicate } from './connection.js';
import { DEFAULT_PREFIX } from './defaults.js';
import { queueKeys } from './keys.js';
import type { ConnectionOption } from './options.js';
import type { RedisClient } from './scripts.js';
import { checkCallOptions, checkPrefix, checkQueueName, checkStreamFrom } from './validate.js';

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
  | 'released';

export interface QueueEvent {
  event: QueueEventName;
  jobId: string;
  /** Redis time of the transition (epoch ms). */
  at: number;
  /** Stream entry id: pass it as `from` to resume after this event. */
  streamId: string;
  /** The progress value, for `progress` events. */
  data?: unknown;
  /** The partition the job lives in (partitioned queues only). */
  partition?: number;
}

export interface ReadEventsOptions {
  /** '$' (default): only events from now on; '0': everything still in the stream; or a streamId. */
  from?: string;
  /** Stop reading when this signal aborts. */
  signal?: AbortSignal;
}

type StreamReply = [string, [string, string[]][]][] | null;

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
        const at = Number(streamId.slice(0, streamId.indexOf('-')));
        const data = f.data === undefined ? undefined : JSON.parse(f.data);
        for (const jobId of (f.ids ?? '').split('\n')) {
          const e: QueueEvent = { event: f.event as QueueEventName, jobId, at, streamId };
          if (data !== undefined) e.data = data;
          if (partition !== undefined) e.partition = partition;
          yield e;
        }
      }
    }
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
 */
export class QueueEvents extends EventEmitter {
  private readonly controller = new AbortController();
  private readonly client: RedisClient;
  private readonly done: Promise<void>;

  constructor(name: string, opts: QueueEventsOptions = {}) {
    super();
    checkQueueName(name);
    checkCallOptions('QueueEvents options', opts, ['connection', 'prefix', 'from']);
    const from = checkStreamFrom(opts.from);
    const keys = queueKeys(opts.prefix === undefined ? DEFAULT_PREFIX : checkPrefix(opts.prefix), name);
    const base = connect(opts.connection, 'worker');
    // A dedicated connection: XREAD BLOCK holds it. A client you passed is duplicated, not blocked.
    this.client = base.owned ? base.client : duplicate(base.client);
    this.done = this.loop(keys.events, from);
  }

  private async loop(streamKey: string, from: string): Promise<void> {
    let last = from;
    while (!this.controller.signal.aborted) {
      try {
        for await (const e of readEvents(this.client, streamKey, {
          from: last,
          signal: this.controller.signal,
        })) {
          last = e.streamId;
          this.emit(e.event, e);
          this.emit('event', e);
        }
      } catch (err) {
        if (this.controller.signal.aborted) return;
        if (this.listenerCount('error') > 0) this.emit('error', err);
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  /** Stops reading and closes the connection; resolves once the read loop has ended. */
  async close(): Promise<void> {
    this.controller.abort();
    // One disconnect only: ioredis arms a 2 s timer per disconnect() that only the socket's `close`
    // clears, so a second call on a socket that already closed kept the process alive for 2 s.
    // disconnect() also ends the blocked XREAD at once (QUIT would wait up to its BLOCK time).
    if (this.client.status !== 'end') this.client.disconnect();
    await this.done;
  }
}
