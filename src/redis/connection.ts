/**
 * Turns the `connection` option into ioredis clients and checks the server once per client:
 * the scripts need Redis >= 7.0 (sharded pub/sub, LPOP with a count), and an eviction policy other
 * than noeviction can silently delete queued jobs.
 *
 * Accepted forms: a `redis://`/`rediss://` URL; `redis+cluster://h1:p1,h2:p2` (seed nodes of a
 * Redis Cluster); ioredis options (including `tls`, `sentinels` + `name`, `username`/`password`);
 * `{ url, ...ioredis options }` (a URL plus options such as a TLS CA); `{ cluster: [seeds], ...}`;
 * or a ready ioredis `Redis`/`Cluster` client, which Surety then never closes.
 */
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import { bindClock, type Clock } from '../clock.js';
import { RedisConfigError, ValidationError } from '../errors.js';
import { TIMED_OUT, withinMs } from '../timers.js';
import { show } from '../validate.js';
import type { ClusterSeed, ConnectionOption, Logger, RedisClient } from './client.js';
import { untilClosed } from './in-flight.js';
import { evictionProblem } from './server-info.js';

export interface Connection {
  client: RedisClient;
  /** True when Surety created the client and must close it. */
  owned: boolean;
}

/**
 * Worker connections retry connecting forever (maxRetriesPerRequest: null). A command already sent when
 * the connection dropped is never re-sent blindly (it may have run: re-sending an add would duplicate a
 * job); untilClosed() rejects it instead and the caller decides (acks are fenced and idempotent, so the
 * worker re-sends them; a claim is retried with its ticket; a rejected add may or may not have been
 * applied). A command made while the connection is down waits in ioredis's offline queue; when the next
 * connection attempt fails, untilClosed() withdraws it from that queue and rejects it, so it never runs
 * after its caller saw it fail (src/redis/in-flight.ts).
 */
const BASE_OPTIONS: RedisOptions = { autoResendUnfulfilledCommands: false };

/**
 * ioredis emits `error` on every failed (re)connection attempt and prints "Unhandled error event" when
 * nobody listens. Surety's own calls fail individually (and workers report them as ERR_CONNECTION
 * events), so the connection-level event carries nothing more for clients Surety creates.
 */
function owned(client: RedisClient): Connection {
  client.on('error', () => {});
  return { client, owned: true };
}

const URL_FORMS = 'a redis://, rediss:// or redis+cluster:// URL, ioredis options or a client';

/**
 * The client for `option`; with a test `clock` (clock.ts), bound to it (`worker`: the Worker being
 * built, which the clock is told of).
 */
export function connect(
  option: ConnectionOption | undefined,
  role: 'queue' | 'worker',
  clock?: Clock,
  worker?: object,
): Connection {
  const conn = connectClient(option, role);
  if (clock) bindClock(conn.client, clock, worker);
  return conn;
}

function connectClient(option: ConnectionOption | undefined, role: 'queue' | 'worker'): Connection {
  const extra: RedisOptions =
    role === 'worker' ? { ...BASE_OPTIONS, maxRetriesPerRequest: null } : BASE_OPTIONS;
  if (option === undefined) return owned(new Redis({ ...extra }));
  if (option instanceof Redis || option instanceof Cluster) return { client: option, owned: false };
  if (typeof option === 'string') return owned(fromUrl(option, {}, extra));
  if (typeof option === 'object' && option !== null) {
    const { url, cluster, ...rest } = option as RedisOptions & {
      url?: unknown;
      cluster?: unknown;
      clusterOptions?: ClusterOptions;
    };
    if (url !== undefined && cluster !== undefined)
      throw new ValidationError('connection: give either url or cluster, not both');
    if (url !== undefined) {
      if (typeof url !== 'string')
        throw new ValidationError(`connection.url must be a string, got ${show(url)}`);
      return owned(fromUrl(url, rest, extra));
    }
    if (cluster !== undefined) return owned(newCluster(checkSeeds(cluster), rest, extra));
    return owned(new Redis({ ...rest, ...extra }));
  }
  throw new ValidationError(`connection must be ${URL_FORMS}, got ${show(option)}`);
}

function fromUrl(url: string, options: RedisOptions, extra: RedisOptions): RedisClient {
  if (/^redis\+cluster:\/\//.test(url)) {
    const { seeds, credentials } = parseClusterUrl(url);
    // Credentials in the URL apply to every node; explicit options win.
    return newCluster(seeds, { ...credentials, ...options }, extra);
  }
  if (!/^rediss?:\/\//.test(url))
    throw new ValidationError(`connection must be ${URL_FORMS}, got ${show(url)}`);
  return new Redis(url, { ...options, ...extra });
}

/** `redis+cluster://[user:pass@]h1:p1,h2:p2` -> its seed nodes, and credentials if it has any. */
export function parseClusterUrl(url: string): {
  seeds: ClusterSeed[];
  credentials: { username?: string; password?: string };
} {
  const m = /^redis\+cluster:\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^/?#]+)\/?$/.exec(url);
  if (!m) throw new ValidationError(`connection: cannot parse cluster URL ${show(url)}`);
  const seeds = (m[3] as string).split(',').map((hp) => {
    const hostPort = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(hp.trim());
    if (!hostPort) throw new ValidationError(`connection: bad seed node ${show(hp)} in ${show(url)}`);
    return { host: (hostPort[1] as string).replace(/^\[|\]$/g, ''), port: Number(hostPort[2] ?? 6379) };
  });
  const credentials: { username?: string; password?: string } = {};
  if (m[1]) credentials.username = decodeURIComponent(m[1]);
  if (m[2]) credentials.password = decodeURIComponent(m[2]);
  return { seeds, credentials };
}

function checkSeeds(cluster: unknown): ClusterSeed[] {
  const ok =
    Array.isArray(cluster) &&
    cluster.length > 0 &&
    cluster.every(
      (s) => typeof s === 'object' && s !== null && typeof s.host === 'string' && Number.isInteger(s.port),
    );
  if (!ok) {
    throw new ValidationError(
      `connection.cluster must be a non-empty array of { host, port } seed nodes, got ${show(cluster)}`,
    );
  }
  return cluster as ClusterSeed[];
}

/**
 * A Cluster client. Sharded subscribers are turned on: Surety's wake-ups and waitFor use SSUBSCRIBE,
 * which must reach the master owning the channel's slot (ioredis otherwise sends it to one random node).
 * Node options (credentials, TLS, the worker's retry policy) apply to every node connection.
 */
function newCluster(
  seeds: ClusterSeed[],
  options: RedisOptions & { clusterOptions?: ClusterOptions },
  extra: RedisOptions,
): Cluster {
  const { clusterOptions, ...nodeOptions } = options;
  const redisOptions: RedisOptions = { ...nodeOptions, ...extra };
  return new Cluster(
    seeds.map((s) => ({ host: s.host, port: s.port })),
    {
      ...clusterOptions,
      shardedSubscribers: true,
      redisOptions,
      // Queued commands wait for the cluster to come back after a failover instead of failing at once.
      maxRedirections: 32,
      retryDelayOnFailover: 200,
      retryDelayOnClusterDown: 200,
    },
  );
}

/** A second client to the same server for subscriptions (a subscribed client can run nothing else). */
export function duplicate(client: RedisClient): RedisClient {
  if (client instanceof Cluster) {
    return owned(client.duplicate(undefined, { shardedSubscribers: true })).client;
  }
  return owned(client.duplicate()).client;
}

const checked = new WeakMap<RedisClient, Promise<void>>();

export function checkServer(client: RedisClient, strict: boolean, logger: Logger): Promise<void> {
  let p = checked.get(client);
  if (!p) {
    p = runChecks(client, strict, logger);
    checked.set(client, p);
    // A failed check (e.g. server unreachable) is retried by the next caller.
    p.catch(() => checked.delete(client));
  }
  return p;
}

async function masterNode(client: RedisClient): Promise<Redis | null> {
  if (!(client instanceof Cluster)) return client;
  if (client.status !== 'ready') {
    // nodes() is empty until the cluster client has read the slot map.
    await untilClosed(client, client.ping());
  }
  return client.nodes('master')[0] ?? null;
}

async function runChecks(client: RedisClient, strict: boolean, logger: Logger): Promise<void> {
  const node = await masterNode(client);
  if (!node) return;
  const info = await untilClosed(node, node.info('server'));
  const version = /redis_version:(\d+)\.(\d+)/.exec(info);
  if (version && Number(version[1]) < 7) {
    throw new RedisConfigError(
      `Surety needs Redis >= 7.0 (sharded pub/sub, LPOP count); this server is ${version[1]}.${version[2]}`,
    );
  }
  let policy: string | undefined;
  try {
    const reply = (await untilClosed(node, node.config('GET', 'maxmemory-policy'))) as string[];
    policy = reply[1];
  } catch {
    logger.warn(
      'surety: cannot read maxmemory-policy (CONFIG is blocked, as on many managed Redis services). Make sure it is noeviction: any other policy can silently delete queued jobs.',
    );
    return;
  }
  if (policy !== undefined && policy !== 'noeviction') {
    const message = evictionProblem(policy) as string;
    if (strict) throw new RedisConfigError(message);
    logger.warn(`surety: WARNING ${message}`);
  }
}

/** How long close waits for Redis to answer QUIT before it drops the connection. */
const QUIT_WAIT_MS = 1_000;

export async function closeConnection(c: Connection): Promise<void> {
  if (!c.owned) return;
  if (c.client.status !== 'ready') {
    // Never connected, or reconnecting: QUIT would wait in the offline queue (forever for a worker's
    // client, which retries without limit). Nothing is in flight that a clean QUIT would flush.
    c.client.disconnect();
    return;
  }
  // A connection that looks up but moves no byte (a black-holed network) never answers QUIT: give it
  // QUIT_WAIT_MS, then drop the socket.
  try {
    if ((await withinMs(c.client.quit(), QUIT_WAIT_MS)) === TIMED_OUT) c.client.disconnect();
  } catch {
    c.client.disconnect();
  }
}
