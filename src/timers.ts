/**
 * Node's setTimeout holds its delay in a signed 32-bit integer: a delay above 2^31-1 ms (about 24.8
 * days), or one that is NaN or negative, fires after 1 ms instead, with only a warning. Every timer
 * Surety sets goes through here, so a long wait is at worst woken early (then re-armed by its owner),
 * never turned into a busy loop.
 */

/** The longest delay setTimeout honours: 2^31-1 ms. Duration options that reach a timer stop here. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** `ms` as a delay setTimeout honours: NaN and negatives become 0, anything longer MAX_TIMER_MS. */
export function timerMs(ms: number): number {
  if (!(ms > 0)) return 0;
  return Math.min(ms, MAX_TIMER_MS);
}

/** setTimeout with the delay clamped to what Node can hold (see timerMs). */
export function safeTimeout(fn: () => void, ms: number): NodeJS.Timeout {
  return setTimeout(fn, timerMs(ms));
}

/** A promise that resolves after `ms` (clamped as safeTimeout does). */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => safeTimeout(resolve, ms));
}

/** What `withinMs` answers when the time ran out first. */
export const TIMED_OUT: unique symbol = Symbol('timed out');

/**
 * `p`'s value (or its rejection), or TIMED_OUT when `ms` passed first; the timer is cleared either way
 * and `p` goes on (the caller decides what becomes of it).
 */
export async function withinMs<T>(p: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  const ran = new Promise<typeof TIMED_OUT>((resolve) => {
    timer = safeTimeout(() => resolve(TIMED_OUT), ms);
  });
  try {
    return await Promise.race([p, ran]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * How long to wait before calling Redis again after `failures` calls in a row failed (connection lost,
 * server restarting): 100 ms doubling to at most 2 s, so a worker neither hammers a dead server nor
 * lingers once it is back. The one backoff for every loop that re-tries a Redis call.
 */
export function reconnectDelayMs(failures: number): number {
  return Math.min(50 * 2 ** Math.max(1, failures), 2_000);
}
