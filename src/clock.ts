/**
 * The `clock` option of Queue and Worker: for tests only (see docs/testing.md and `surety/testing`).
 *
 * Without it (the default) nothing changes: scripts read Redis's TIME (their `now` argument is ''),
 * client-side reads of the time ask Redis (serverNow), and the worker's loops use Node's timers.
 * With it, the clock is the one time source: every script's `now` and every serverNow read come from
 * `clock.now()`, and the worker's time-driven loops (the delayed-job wake timer, lease renewals,
 * recovery, heartbeats, attempt timeouts, job.sleep) run on its timers. A virtual clock therefore moves
 * the whole state machine through time at once, with the same scripts as production.
 *
 * The clock belongs to the connection: a Queue or Worker given a clock binds it to its Redis client,
 * and every Surety call through that client uses it (a client shared by several Queues and Workers has
 * one clock; binding another one is refused).
 */
import type { Cluster, Redis } from 'ioredis';
import { ValidationError } from './errors.js';
import { safeTimeout } from './timers.js';
import { show } from './validate.js';

export interface Clock {
  /** Epoch ms on this clock. */
  now(): number;
  /** Calls `fn` once `ms` have passed on this clock; returns a handle for clearTimeout. */
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /**
   * @internal Told of each Worker built with this clock, so a test clock can drive and watch it
   * (src/testing/). Optional; real clocks have none.
   */
  watch?(worker: object): void;
}

/** Node's timers and Date.now: what the worker's loops use when no clock is given. */
export const REAL_TIMERS: Clock = Object.freeze({
  now: () => Date.now(),
  setTimeout: (fn: () => void, ms: number) => safeTimeout(fn, ms),
  clearTimeout: (handle: unknown) => clearTimeout(handle as NodeJS.Timeout | undefined),
});

/** The `clock` option, checked: undefined (Redis's clock) or an object with the Clock methods. */
export function checkClock(name: string, value: unknown): Clock | undefined {
  if (value === undefined) return undefined;
  const c = value as Partial<Clock> | null;
  if (
    c === null ||
    typeof c !== 'object' ||
    typeof c.now !== 'function' ||
    typeof c.setTimeout !== 'function' ||
    typeof c.clearTimeout !== 'function'
  ) {
    throw new ValidationError(
      `${name} must be a clock (an object with now(), setTimeout() and clearTimeout(), e.g. a test env's clock from surety/testing), got ${show(value)}`,
    );
  }
  return c as Clock;
}

type RedisClient = Redis | Cluster;

const bound = new WeakMap<RedisClient, Clock>();

/**
 * Makes `clock` the time source of every Surety call through `client` (see the file comment);
 * `worker`: the Worker being built, told to the clock (Clock.watch).
 */
export function bindClock(client: RedisClient, clock: Clock, worker?: object): void {
  const existing = bound.get(client);
  if (existing !== undefined && existing !== clock) {
    throw new ValidationError(
      'clock: this Redis client already has another clock; give every Queue and Worker sharing a client the same clock',
    );
  }
  bound.set(client, clock);
  if (worker) clock.watch?.(worker);
}

/** The clock bound to `client`, if any (undefined: Redis's own clock). */
export function clockOf(client: RedisClient): Clock | undefined {
  return bound.get(client);
}
