/**
 * Durations for env.advance: a number of milliseconds, or a string of one or more number+unit parts
 * ('30s', '1h', '2d', '1h30m', '1.5s'), units ms, s, m, h, d, w. Checked at the boundary: anything
 * else is a ValidationError naming the value and what is allowed.
 */
import { ValidationError } from '../errors.js';
import { show } from '../validate.js';

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;

/** About 100 years: past that an epoch-ms clock stops meaning anything a test would check. */
export const MAX_ADVANCE_MS = 100 * 365 * 86_400_000;

const WHOLE = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w))+$/;
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d|w)/g;

function refuse(name: string, value: unknown): never {
  throw new ValidationError(
    `${name} must be a whole number of ms from 0 to ${MAX_ADVANCE_MS} or a string like '500ms', '30s', '1h', '2d' or '1h30m' (units ms, s, m, h, d, w), got ${show(value)}`,
  );
}

/** `value` in milliseconds: an integer from 0 to MAX_ADVANCE_MS. */
export function parseDuration(name: string, value: unknown): number {
  let ms: number;
  if (typeof value === 'number') ms = value;
  else if (typeof value === 'string' && WHOLE.test(value.trim())) {
    ms = 0;
    for (const [, n, unit] of value.trim().matchAll(PART))
      ms += Number(n) * UNIT_MS[unit as keyof typeof UNIT_MS];
    // '1.5s' is 1500 ms; a fraction of a millisecond ('0.5ms') is refused below, not rounded.
    ms = Math.round(ms * 1e6) / 1e6;
  } else refuse(name, value);
  if (!Number.isInteger(ms) || ms < 0 || ms > MAX_ADVANCE_MS) refuse(name, value);
  return ms;
}
