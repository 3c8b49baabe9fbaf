/**
 * Turns the `connection` option into ioredis clients and checks the server once per client:
 * the scripts need Redis >= 7.0 (sharded pub/sub, LPOP with a count), and an eviction policy other
 * than noeviction can silently delete queued jobs.
 */
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { RedisConfigError, ValidationError } from './errors.js';
import { untilClosed } from './in-flight.js';
import type { ConnectionOption, Logger } from './options.js';
import type { RedisClient } from './scripts.js';
import { show } from './validate.js';

export interface Connection {
  client: RedisClient;
  /** True when Surety created the client and must close it. */
  owned: boolean;
}

/**
 * Worker connections queue commands across reconnects forever (maxRetriesPerRequest: null). A command
 * already sent when the connection dropped is never re-sent blindly (it may have run: re-sending an add
 * would duplicate a job); untilClosed() rejects it instead and the caller decides (acks are fenced and
 * idempotent, so the worker re-sends them; a rejected add may or may not have been applied).
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

export function connect(option: ConnectionOption | undefined, role: 'queue' | 'worker'): Connection {
  const extra: RedisOptions =
    role === 'worker' ? { ...BASE_OPTIONS, maxRetriesPerRequest: null } : BASE_OPTIONS;
  if (option === undefined) return owned(new Redis({ ...extra }));
  if (option instanceof Redis || option instanceof Cluster) return { client: option, owned: false };
  if (typeof option === 'string') {
    if (!/^rediss?:\/\//.test(option)) {
      throw new ValidationError(
        `connection must be a redis:// or rediss:// URL, ioredis options or a client, got ${show(option)}`,
      );
    }
    return owned(new Redis(option, extra));
  }
  if (typeof option === 'object' && option !== null) return owned(new Redis({ ...option, ...extra }));
  throw new ValidationError(
    `connection must be a redis:// URL, ioredis options or a client, got ${show(option)}`,
  );
}

/** A second client to the same server for subscriptions (a subscribed client can run nothing else). */
export function duplicate(client: RedisClient): RedisClient {
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

async function runChecks(client: RedisClient, strict: boolean, logger: Logger): Promise<void> {
  const node = client instanceof Cluster ? (client.nodes('master')[0] ?? null) : client;
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
    const message = `maxmemory-policy is ${policy}: when Redis reaches maxmemory it may evict queued jobs, which would be lost. Set maxmemory-policy noeviction.`;
    if (strict) throw new RedisConfigError(message);
    logger.warn(`surety: WARNING ${message}`);
  }
}

export async function closeConnection(c: Connection): Promise<void> {
  if (!c.owned) return;
  try {
    await c.client.quit();
  } catch {
    c.client.disconnect();
  }
}
