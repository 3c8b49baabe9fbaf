/**
 * Where a priority's waiting jobs sit in a `prio` zset (the queue's or a group's). Mirrors
 * src/scripts/includes/enqueue.lua: a job of priority p is scored p * 2^32 + 2^31 + n (or - n at the
 * front), with |n| < 2^31, so each priority owns the band [p * 2^32, (p + 1) * 2^32). Priorities
 * (-10^6 .. 10^6) keep every bound exact in a double. Priority 0 waits in the `waiting` list instead.
 * See docs/data-layout.md (Order inside a priority).
 */

/** The band of one priority's score, 2^32 wide. */
export const PRIORITY_BAND = 2 ** 32;

/** ZCOUNT / ZRANGEBYSCORE bounds that select exactly priority `priority`'s members. */
export function priorityScoreRange(priority: number): [min: string, max: string] {
  return [String(priority * PRIORITY_BAND), `(${(priority + 1) * PRIORITY_BAND}`];
}
