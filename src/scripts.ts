/**
 * Typed descriptions of the Lua scripts in src/scripts/ and the runner that calls them.
 *
 * Each description names the script's KEYS (as QueueKeys property names) and ARGV, in order; callers
 * pass the queue's keys and a named argument object, so nobody writes `keys[7] = ...`. A test checks
 * every description against the KEYS/ARGV header of its Lua file, so the two cannot drift.
 * Scripts are loaded once (includes inlined), called with EVALSHA, and re-sent with EVAL on NOSCRIPT
 * (after a Redis restart or SCRIPT FLUSH).
 *
 * Line 1 of every script is its shebang, where Redis 7 reads its flags (only there, so includes and the
 * header come after it): `#!lua flags=allow-oom` for the transitions that move accepted jobs forward
 * (they run even over maxmemory, so a full Redis still drains), plain `#!lua` for those that add work
 * (over maxmemory Redis refuses them before they run, so nothing is half-written). Those refusals
 * become RedisFullError here. test/oom.test.ts checks every script's flags.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Cluster, Redis } from 'ioredis';
import { redisFullError } from './errors.js';
import { untilClosed } from './in-flight.js';
import type { QueueKeys } from './keys.js';

/**
 * The keys a script is called with: a queue's keys, plus `finished` for scripts that work on either
 * finished set (clean.lua): the caller picks completed or dead.
 */
export type ScriptKeys = QueueKeys & { readonly finished?: string };
export type KeyName = Exclude<keyof ScriptKeys, 'tag' | 'wakeChannel' | 'doneChannel'>;
export type ArgValue = string | number;

export interface ScriptSpec<A extends string = string, R extends string = string> {
  readonly name: string;
  readonly keys: readonly KeyName[];
  readonly args: readonly A[];
  /** Argument names repeated once per item after the fixed arguments (batch scripts). */
  readonly repeated: readonly R[];
  readonly source: string;
  readonly sha: string;
}

const SCRIPT_DIR = new URL('./scripts/', import.meta.url);

/**
 * The Lua source with every `-- @include name` line replaced by includes/name.lua. An include may
 * include the helpers it needs the same way; each include is inlined once, at its first mention, so a
 * helper is always defined before the function that calls it.
 */
export function loadLua(name: string, inlined = new Set<string>()): string {
  const raw = readFileSync(new URL(`${name}.lua`, SCRIPT_DIR), 'utf8');
  return raw.replace(/^-- @include (\w+)$/gm, (_, inc: string) => {
    if (inlined.has(inc)) return `-- (${inc}: inlined above)`;
    inlined.add(inc);
    return loadLua(`includes/${inc}`, inlined).trimEnd();
  });
}

function define<const A extends string, const R extends string = never>(
  name: string,
  keys: readonly KeyName[],
  args: readonly A[],
  repeated: readonly R[] = [],
): ScriptSpec<A, R> {
  const source = loadLua(name);
  const sha = createHash('sha1').update(source).digest('hex');
  return Object.freeze({ name, keys, args, repeated, source, sha });
}

export const scripts = {
  add: define(
    'add',
    [
      'jobs',
      'waiting',
      'prio',
      'seq',
      'delayed',
      'ids',
      'events',
      'errors',
      'dead',
      'deps',
      'dependents',
      'meta',
    ],
    ['now', 'wakeChannel', 'eventsMaxLen', 'partitions', 'idSuffix', 'checkOnly'],
    ['id', 'priority', 'delayMs', 'runAt', 'optionTail', 'data', 'dependsOn', 'depMode'],
  ),
  claim: define(
    'claim',
    [
      'jobs',
      'waiting',
      'prio',
      'seq',
      'delayed',
      'active',
      'meta',
      'limiter',
      'events',
      'errors',
      'claims',
      'tokens',
    ],
    [
      'now',
      'count',
      'defaultLeaseMs',
      'limit',
      'rateMax',
      'rateWindowMs',
      'eventsMaxLen',
      'claimer',
      'nonce',
      'startNow',
    ],
  ),
  complete: define(
    'complete',
    [
      'jobs',
      'errors',
      'active',
      'completed',
      'meta',
      'events',
      'waiting',
      'prio',
      'seq',
      'delayed',
      'dead',
      'deps',
      'dependents',
      'stats',
    ],
    ['now', 'keepCount', 'keepAgeMs', 'limit', 'doneChannel', 'wakeChannel', 'eventsMaxLen'],
    ['id', 'token', 'result'],
  ),
  fail: define(
    'fail',
    [
      'jobs',
      'errors',
      'active',
      'delayed',
      'waiting',
      'prio',
      'seq',
      'dead',
      'meta',
      'events',
      'deps',
      'dependents',
      'stats',
    ],
    [
      'now',
      'defaultMaxAttempts',
      'keepCount',
      'keepAgeMs',
      'limit',
      'wakeChannel',
      'doneChannel',
      'eventsMaxLen',
    ],
    ['id', 'token', 'retryDelayMs', 'error'],
  ),
  extend: define('extend', ['jobs', 'active'], ['now', 'defaultLeaseMs'], ['id', 'token']),
  begin: define('begin', ['jobs', 'active'], ['now', 'defaultLeaseMs'], ['id', 'token']),
  release: define(
    'release',
    ['jobs', 'active', 'waiting', 'prio', 'seq', 'meta', 'events'],
    ['wakeChannel', 'eventsMaxLen'],
    ['id', 'token'],
  ),
  recover: define(
    'recover',
    [
      'jobs',
      'errors',
      'active',
      'waiting',
      'prio',
      'seq',
      'dead',
      'meta',
      'events',
      'delayed',
      'deps',
      'dependents',
      'stats',
    ],
    [
      'now',
      'limit',
      'defaultMaxAttempts',
      'keepCount',
      'keepAgeMs',
      'wakeChannel',
      'doneChannel',
      'eventsMaxLen',
    ],
  ),
  retry: define(
    'retry',
    ['jobs', 'waiting', 'prio', 'seq', 'completed', 'dead', 'events'],
    ['id', 'wakeChannel', 'eventsMaxLen'],
  ),
  remove: define(
    'remove',
    [
      'jobs',
      'errors',
      'waiting',
      'prio',
      'delayed',
      'completed',
      'dead',
      'events',
      'seq',
      'deps',
      'dependents',
      'stats',
    ],
    ['id', 'eventsMaxLen', 'wakeChannel', 'doneChannel'],
  ),
  promote: define(
    'promote',
    ['jobs', 'waiting', 'prio', 'seq', 'delayed', 'events'],
    ['id', 'wakeChannel', 'eventsMaxLen'],
  ),
  cancel: define(
    'cancel',
    [
      'jobs',
      'errors',
      'waiting',
      'prio',
      'delayed',
      'active',
      'dead',
      'meta',
      'events',
      'seq',
      'deps',
      'dependents',
      'stats',
    ],
    ['now', 'id', 'wakeChannel', 'doneChannel', 'eventsMaxLen'],
  ),
  clean: define('clean', ['jobs', 'errors', 'finished'], ['cutoff', 'limit']),
  progress: define(
    'progress',
    ['jobs', 'errors', 'events'],
    ['id', 'token', 'progress', 'maxLines', 'eventsMaxLen'],
    ['line'],
  ),
  setPaused: define('set-paused', ['meta'], ['paused', 'wakeChannel']),
  schedule: define(
    'schedule',
    ['jobs', 'errors', 'waiting', 'prio', 'seq', 'delayed', 'schedules', 'schedulePending'],
    ['now', 'wakeChannel', 'key', 'spec', 'occurrenceId', 'due', 'priority', 'optionTail', 'data'],
  ),
  advanceSchedule: define(
    'advance-schedule',
    ['jobs', 'waiting', 'prio', 'seq', 'delayed', 'schedulePending'],
    ['now', 'wakeChannel', 'key', 'expected', 'priority', 'optionTail', 'data'],
    ['id', 'due'],
  ),
  unschedule: define(
    'unschedule',
    ['jobs', 'errors', 'waiting', 'prio', 'delayed', 'schedules', 'schedulePending'],
    ['key'],
  ),
  partitions: define('partitions', ['meta', 'jobs'], ['partitions']),
  moveIn: define(
    'move-in',
    ['jobs', 'errors', 'waiting', 'prio', 'seq', 'delayed', 'completed', 'dead'],
    ['wakeChannel'],
    ['id', 'record', 'score', 'errors', 'progress', 'logs', 'parents', 'body'],
  ),
  heartbeat: define('heartbeat', ['workers', 'workerInfo'], ['now', 'ttlMs', 'workerId', 'info']),
} as const;

export type RedisClient = Redis | Cluster;

/**
 * Runs a script: EVALSHA, falling back to EVAL when the server does not know the script yet.
 * `rows` are the repeated argument groups of batch scripts.
 */
export async function runScript<A extends string, R extends string>(
  redis: RedisClient,
  spec: ScriptSpec<A, R>,
  keys: ScriptKeys,
  args: Record<A, ArgValue>,
  rows: readonly Record<R, ArgValue>[] = [],
): Promise<unknown> {
  const flat: ArgValue[] = [];
  for (const k of spec.keys) {
    const key = keys[k];
    if (key === undefined) throw new Error(`script ${spec.name} needs the key ${k}`);
    flat.push(key);
  }
  for (const a of spec.args) flat.push(args[a]);
  for (const row of rows) for (const r of spec.repeated) flat.push(row[r]);
  try {
    try {
      return await untilClosed(redis, redis.evalsha(spec.sha, spec.keys.length, ...flat));
    } catch (err) {
      if (!(err instanceof Error && err.message.startsWith('NOSCRIPT'))) throw err;
      return await untilClosed(redis, redis.eval(spec.source, spec.keys.length, ...flat));
    }
  } catch (err) {
    // Over maxmemory, Redis refuses every script without `allow-oom` before it runs (see the file header).
    throw redisFullError(err, `${spec.name}.lua`) ?? err;
  }
}
