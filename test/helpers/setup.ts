/**
 * Per-file test fixture: one private redis-server for the file, a unique queue name per test, and
 * poll-until-deadline helpers (never sleep-and-hope).
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { aclRules } from '../../src/redis/acl.js';
import { loadLibrary } from '../../src/scripts/functions.js';
import { RedisServer, type RedisServerOptions } from './redis-server.js';

export interface Fixture {
  server: RedisServer;
  /** A raw client (the default user) for assertions and seeding. */
  redis: Redis;
  /** What queues and workers under test connect to: as the documented ACL user under SURETY_TEST_ACL=1. */
  url: string;
}

/** True when the suite runs as the ACL user of docs/acl.md (`npm run test:acl`). */
export const ACL_MODE = process.env.SURETY_TEST_ACL === '1';

/** Creates a user with `rules` (as in docs/acl.md) and returns the URL that logs in as it. */
export async function createAclUser(
  redis: Redis,
  url: string,
  rules: string,
  user = `surety-${randomBytes(3).toString('hex')}`,
): Promise<string> {
  const password = randomBytes(12).toString('hex');
  await redis.call('ACL', 'SETUSER', user, 'on', `>${password}`, ...rules.split(' '));
  return url.replace('redis://', `redis://${user}:${password}@`);
}

export function useRedis(opts?: RedisServerOptions): Fixture {
  const fixture = {} as Fixture;
  beforeAll(async () => {
    fixture.server = await new RedisServer(opts).start();
    fixture.redis = new Redis(fixture.server.url);
    fixture.url = ACL_MODE
      ? await createAclUser(fixture.redis, fixture.server.url, aclRules('worker'), 'surety-worker')
      : fixture.server.url;
    // As docs/acl.md asks of an operator: the worker rules call the script library, not load it.
    if (ACL_MODE) await loadLibrary(fixture.redis);
  });
  afterAll(async () => {
    try {
      if (ACL_MODE && fixture.redis) assertNoAclDenials(await aclDenials(fixture.redis, 'surety-worker'));
    } finally {
      fixture.redis?.disconnect();
      await fixture.server?.stop();
    }
  });
  return fixture;
}

export interface AclDenial {
  reason: string;
  object: string;
  context: string;
}

/** The ACL LOG entries of `user`: every command, key or channel the server refused it. */
export async function aclDenials(redis: Redis, user: string): Promise<AclDenial[]> {
  const log = (await redis.call('ACL', 'LOG', '1000')) as (string | number)[][];
  return log
    .map((entry) => {
      const f: Record<string, string> = {};
      for (let i = 0; i < entry.length; i += 2) f[String(entry[i])] = String(entry[i + 1]);
      return { user: f.username, reason: f.reason ?? '', object: f.object ?? '', context: f.context ?? '' };
    })
    .filter((e) => e.user === user)
    .map(({ user: _, ...e }) => e);
}

/**
 * Fails unless every denial is the documented one: CONFIG GET maxmemory-policy, which Surety reads
 * once per client and, when refused, replaces with a warning (docs/acl.md). Anything else refused
 * (even an error some code swallowed) means docs/acl.md is missing a permission.
 */
function assertNoAclDenials(denials: AclDenial[]): void {
  const unexpected = denials.filter((d) => !(d.reason === 'command' && d.object === 'config|get'));
  if (unexpected.length > 0) {
    throw new Error(
      `the ACL user was refused permissions docs/acl.md does not grant: ${JSON.stringify(unexpected)}`,
    );
  }
}

export function uniqueName(label = 'q'): string {
  return `${label}-${randomBytes(4).toString('hex')}`;
}

/** Polls `probe` until it returns a truthy value or the deadline passes (then throws with `what`). */
export async function waitUntil<T>(
  probe: () => T | Promise<T>,
  what: string,
  timeoutMs = 10_000,
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    last = await probe();
    if (last) return last as NonNullable<T>;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${String(last)})`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Resolves with the arguments of the next `event` emitted by `emitter`. */
export function nextEvent<T extends unknown[]>(
  emitter: { once(event: string, fn: (...args: T) => void): unknown },
  event: string,
  timeoutMs = 10_000,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${event} event within ${timeoutMs} ms`)), timeoutMs);
    emitter.once(event, (...args: T) => {
      clearTimeout(timer);
      resolve(args);
    });
  });
}

/** Queues, workers and the like to close after each test: push them onto the returned array. */
export function closeAfterEach(): { close(): Promise<void> }[] {
  const open: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((c) => c.close()));
  });
  return open;
}
