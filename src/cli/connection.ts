/**
 * Where the CLI's Redis comes from: `--redis <url>`, else REDIS_URL, else redis://127.0.0.1:6379.
 * `--redis embedded` (and `surety demo`) use that Redis when it is reachable and otherwise start a
 * private redis-server (see embedded.ts); `--redis embedded` in a directory whose ./.surety/redis holds
 * data always uses that private server. Every command gets one client, shared by all its Queues.
 */
import type { Cluster, Redis } from 'ioredis';
import type { QueueOptions } from '../options/queue.js';
import { Queue } from '../queue/queue.js';
import { closeConnection, connect } from '../redis/connection.js';
import type { RedisClient } from '../scripts/specs.js';
import { TIMED_OUT, withinMs } from '../timers.js';
import { checkQueueName } from '../validate.js';
import { hasEmbeddedData, startEmbedded } from './embedded.js';
import { CliError, UsageError } from './errors.js';
import { addCleanup } from './lifecycle.js';

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

export interface GlobalOptions {
  redis?: string;
  prefix?: string;
  json?: boolean;
}

export interface RedisHandle {
  url: string;
  client: RedisClient;
  /** pid of the private redis-server this command uses, if any. */
  embeddedPid?: number;
}

/** The URL with its password hidden, for messages. */
export function redact(url: string): string {
  return url.replace(/^(rediss?:\/\/[^:@/]*:)[^@/]*@/, '$1***@');
}

function checkUrl(url: string, source: string): string {
  if (!/^(rediss?|redis\+cluster):\/\/\S+$/.test(url))
    throw new UsageError(
      `${source} must be a redis://, rediss:// or redis+cluster:// URL (or "embedded"), got ${JSON.stringify(url)}`,
    );
  return url;
}

/** The URL to try and whether to fall back to a private redis-server when it is unreachable. */
export function resolveTarget(
  opt: string | undefined,
  embeddedByDefault = false,
): { url: string; embedded: boolean } {
  const env = process.env.REDIS_URL;
  const fallback = env ? checkUrl(env, 'REDIS_URL') : DEFAULT_REDIS_URL;
  if (opt === undefined) return { url: fallback, embedded: embeddedByDefault };
  if (opt === 'embedded') return { url: fallback, embedded: true };
  return { url: checkUrl(opt, '--redis'), embedded: false };
}

/** Connects (one attempt, then reconnects with backoff once it has been up), or says why it cannot. */
export async function tryConnect(url: string): Promise<{ client: RedisClient } | { reason: string }> {
  if (url.startsWith('redis+cluster://')) return tryCluster(url);
  let up = false;
  let lastError = '';
  // The library's connection rules (connect(): a command in flight when the connection dropped is
  // never re-sent blindly), plus what a one-shot command wants: fail fast when the first connection
  // fails; once up, reconnect for as long as the command runs.
  const client = connect(
    {
      url,
      lazyConnect: true,
      connectTimeout: 5_000,
      maxRetriesPerRequest: 2,
      retryStrategy: (times: number) => (up ? Math.min(times * 200, 2_000) : null),
    },
    'queue',
  ).client as Redis;
  client.on('error', (err: Error) => {
    lastError = err.message;
  });
  try {
    await client.connect();
    await client.ping();
    up = true;
    return { client };
  } catch (err) {
    client.disconnect();
    return { reason: lastError || (err instanceof Error ? err.message : String(err)) };
  }
}

/** A Redis Cluster from its seed nodes (the library's connect()), checked with one PING. */
async function tryCluster(url: string): Promise<{ client: RedisClient } | { reason: string }> {
  const client = connect(url, 'queue').client as Cluster;
  let lastError = '';
  client.on('error', (err: Error) => {
    lastError = err.message;
  });
  try {
    if ((await withinMs(client.ping(), 5_000)) === TIMED_OUT) throw new Error('no answer within 5 s');
    return { client };
  } catch (err) {
    client.disconnect();
    return { reason: lastError || (err instanceof Error ? err.message : String(err)) };
  }
}

/** Closes a command's client the library's way (QUIT, dropped if Redis does not answer within 1 s). */
function quit(client: RedisClient): Promise<void> {
  return closeConnection({ client, owned: true });
}

/** Opens the command's Redis connection (closed by the exit cleanups), starting a private one if asked. */
export async function openRedis(
  g: GlobalOptions,
  opts: { embeddedByDefault?: boolean } = {},
): Promise<RedisHandle> {
  const { url, embedded } = resolveTarget(g.redis, opts.embeddedByDefault);
  // An explicit `--redis embedded` in a directory with a private server's data means that server.
  const own = g.redis === 'embedded' && hasEmbeddedData();
  const first = own ? { reason: 'private data' } : await tryConnect(url);
  if ('client' in first) {
    addCleanup(() => quit(first.client));
    return { url, client: first.client };
  }
  if (!embedded) {
    throw new CliError(
      `cannot connect to Redis at ${redact(url)} (${first.reason}). Start Redis, pass --redis <url> or set REDIS_URL, or use --redis embedded to run a private redis-server.`,
    );
  }
  const server = await startEmbedded(
    (line) => process.stderr.write(`surety: ${line}\n`),
    own ? './.surety/redis holds data' : undefined,
  );
  const second = await tryConnect(server.url);
  if (!('client' in second))
    throw new CliError(`cannot connect to the private redis-server: ${second.reason}`);
  addCleanup(() => quit(second.client));
  return { url: server.url, client: second.client, embeddedPid: server.pid };
}

/** Checks queue names before anything connects, so bad input fails fast with exit code 2. */
export function checkNames(names: readonly string[]): void {
  for (const n of names) checkQueueName(n);
}

/** A Queue on the command's shared client; closed by the exit cleanups. */
export function openQueue<D = unknown, R = unknown>(
  name: string,
  handle: RedisHandle,
  g: GlobalOptions,
  extra: Omit<QueueOptions, 'connection' | 'prefix' | 'logger'> = {},
): Queue<D, R> {
  const queue = new Queue<D, R>(name, {
    // Admin commands open a queue with the partition count recorded in Redis.
    partitions: 'auto',
    ...extra,
    connection: handle.client,
    ...(g.prefix ? { prefix: g.prefix } : {}),
    logger: { warn: (m) => process.stderr.write(`${m.startsWith('surety') ? m : `surety: ${m}`}\n`) },
  });
  addCleanup(() => queue.close());
  return queue;
}
