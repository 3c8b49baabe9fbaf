/**
 * Retention rules: the worker's (how many completed and dead jobs are kept, and for how long) and a
 * job's own (`keep` at add: delete it as soon as it completes or ends dead).
 */
import { DEFAULT_RETENTION } from '../defaults.js';
import type { Retention, RetentionRule } from '../types.js';
import { checkBool, checkInt, checkKnownKeys, checkObject } from '../validate.js';

export function resolveRetention(name: string, value: unknown): Retention {
  if (value === undefined) return DEFAULT_RETENTION;
  const r = checkObject(name, value);
  checkKnownKeys(name, r, ['completed', 'dead']);
  return Object.freeze({
    completed: resolveRetentionRule(`${name}.completed`, r.completed, DEFAULT_RETENTION.completed),
    dead: resolveRetentionRule(`${name}.dead`, r.dead, DEFAULT_RETENTION.dead),
  });
}

/** One retention rule ({ maxCount?, maxAgeMs? }); absent fields take `dflt`'s. */
export function resolveRetentionRule(name: string, value: unknown, dflt: RetentionRule): RetentionRule {
  if (value === undefined) return dflt;
  const v = checkObject(name, value);
  checkKnownKeys(name, v, ['maxCount', 'maxAgeMs']);
  return Object.freeze({
    maxCount: v.maxCount === undefined ? dflt.maxCount : checkInt(`${name}.maxCount`, v.maxCount, 0),
    maxAgeMs: v.maxAgeMs === undefined ? dflt.maxAgeMs : checkInt(`${name}.maxAgeMs`, v.maxAgeMs, 0),
  });
}

/** A job's `keep` option as its record stores it: 'c' (drop when completed), 'x' (when dead), both, or ''. */
export function resolveKeep(value: unknown): string {
  const k = checkObject('keep', value);
  checkKnownKeys('keep', k, ['completed', 'dead']);
  const completed = k.completed === undefined ? true : checkBool('keep.completed', k.completed);
  const dead = k.dead === undefined ? true : checkBool('keep.dead', k.dead);
  return `${completed ? '' : 'c'}${dead ? '' : 'x'}`;
}
