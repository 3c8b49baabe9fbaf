/**
 * Per-file test fixture: one private redis-server for the file, a unique queue name per test, and
 * poll-until-deadline helpers (never sleep-and-hope).
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { RedisServer, type RedisServerOptions } from './redis-server.js';

export interface Fixture {
  server: RedisServer;
  /** A raw client for assertions and seeding. */
  redis: Redis;
  url: string;
}

export function useRedis(opts?: RedisServerOptions): Fixture {
  const fixture = {} as Fixture;
  beforeAll(async () => {
    fixture.server = await new RedisServer(opts).start();
    fixture.url = fixture.server.url;
    fixture.redis = new Redis(fixture.url);
  });
  afterAll(async () => {
    fixture.redis?.disconnect();
    await fixture.server?.stop();
  });
  return fixture;
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
