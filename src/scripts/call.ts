/**
 * Loading and calling the Lua scripts of src/scripts/ (their typed descriptions are in specs.ts).
 *
 * Scripts run as functions of one Redis Functions library (functions.ts: loaded once per
 * server, called with FCALL), or, where the server cannot load it (Redis < 7, an ACL user without
 * FUNCTION LOAD), are loaded once (includes inlined), called with EVALSHA, and re-sent with EVAL on
 * NOSCRIPT (after a Redis restart or SCRIPT FLUSH). `callScript` decodes the reply with the script's decoder
 * (replies.ts) and turns refusals sent as error replies (`SURETY_<CODE> ...`) and over-maxmemory
 * refusals into typed errors (errors.ts), so no caller reads a positional reply or an error message.
 */
import { createHash } from 'node:crypto';
import { clockOf } from '../clock.js';
import { redisFullError } from '../errors.js';
import { untilClosed } from '../redis/in-flight.js';
import type { QueueKeys } from '../store/keys.js';
import {
  isFunctionMissing,
  libraryFunction,
  loadLibrary,
  refusesFunctions,
  registerScript,
} from './functions.js';
import { parseRefusal, type RefusalContext, refusalError } from './refusals.js';
import { loadLua } from './source.js';

export { loadLua };

import type { RedisClient } from '../redis/client.js';

export type { RedisClient };

/**
 * The keys a script is called with: a queue's keys, plus `finished` for scripts that work on either
 * finished set (clean.lua): the caller picks completed or dead, plus the BullMQ keys of the migration
 * scripts (src/migrate/bullmq-keys.ts names them).
 */
export type ScriptKeys = QueueKeys & { readonly finished?: string } & BullMQScriptKeys;

/** Keys of a BullMQ queue that the migration scripts (import-bullmq.lua and its kin) touch. */
export interface BullMQScriptKeys {
  /** LIST or ZSET: the BullMQ state a job is read in (wait, paused, prioritized, delayed, failed). */
  readonly bullSource?: string;
  /** HASH: one BullMQ job. */
  readonly bullJob?: string;
  /** LIST: that job's log. */
  readonly bullLogs?: string;
  /** STRING: the receipt of a take across servers (bullmq-take.lua). */
  readonly bullTaken?: string;
  /** ZSET: the job schedulers, by next tick. */
  readonly bullRepeat?: string;
  /** HASH: one job scheduler. */
  readonly bullScheduler?: string;
  /** ZSET: BullMQ's delayed jobs. */
  readonly bullDelayed?: string;
}
export type KeyName = Exclude<keyof ScriptKeys, 'tag' | 'wakeChannel' | 'doneChannel'>;
export type ArgValue = string | number;

export interface ScriptSpec<A extends string = string, R extends string = string, T = unknown> {
  readonly name: string;
  readonly keys: readonly KeyName[];
  readonly args: readonly A[];
  /** Argument names repeated once per item after the fixed arguments (batch scripts). */
  readonly repeated: readonly R[];
  /** Reads the script's reply (see its `-- Returns:` header line) into a typed value. */
  readonly decode: (reply: unknown) => T;
  readonly source: string;
  readonly sha: string;
  /** Where `now` is in ARGV (-1: none): a client with a test clock fills it when the caller left it ''. */
  readonly nowAt: number;
}

/** A script's description: its file, KEYS and ARGV names in order, and its reply decoder. */
export function define<const A extends string, const R extends string = never, T = unknown>(
  name: string,
  keys: readonly KeyName[],
  args: readonly A[],
  repeated: readonly R[] = [],
  decode: (reply: unknown) => T = (reply) => reply as T,
): ScriptSpec<A, R, T> {
  const source = loadLua(name);
  const sha = createHash('sha1').update(source).digest('hex');
  const nowAt = (args as readonly string[]).indexOf('now');
  registerScript(name);
  return Object.freeze({ name, keys, args, repeated, decode, source, sha, nowAt });
}

/**
 * Runs a script and returns its raw reply: EVALSHA, falling back to EVAL when the server does not know
 * the script yet. `rows` are the repeated argument groups of batch scripts. Prefer callScript.
 */
export async function runScript<A extends string, R extends string>(
  redis: RedisClient,
  spec: ScriptSpec<A, R, unknown>,
  keys: ScriptKeys,
  args: Record<A, ArgValue>,
  rows: readonly Record<R, ArgValue>[] = [],
): Promise<unknown> {
  // Strings as ioredis would send them (String(value), '' for a missing one), in one array: spread into
  // a call, the 130 000 arguments of an addBulk at MAX_BULK would overflow the JS stack.
  const flat = keyList(spec, keys).slice();
  for (const a of spec.args) flat.push(argString(args[a]));
  for (const row of rows) for (const r of spec.repeated) flat.push(argString(row[r]));
  return runFlat(redis, spec, flat);
}

function argString(v: ArgValue | undefined): string {
  return v === undefined ? '' : typeof v === 'string' ? v : String(v);
}

/**
 * A queue's keys in a script's KEYS order. Built once per keys object and script: an add or a claim
 * is on the interactive path, where reading nine keys by name on every call showed in profiles.
 */
const keyLists = new WeakMap<ScriptKeys, Map<string, readonly string[]>>();

function keyList(spec: ScriptSpec, keys: ScriptKeys): readonly string[] {
  let byScript = keyLists.get(keys);
  if (byScript === undefined) {
    byScript = new Map();
    keyLists.set(keys, byScript);
  }
  let list = byScript.get(spec.name);
  if (list === undefined) {
    list = spec.keys.map((k) => {
      const key = keys[k];
      if (key === undefined) throw new Error(`script ${spec.name} needs the key ${k}`);
      return key;
    });
    byScript.set(spec.name, list);
  }
  return list;
}

/**
 * Runs a script on its arguments as sent: KEYS then ARGV, every value a string (runScript builds
 * them). `now` left '' is filled from the client's test clock, if it has one. Prefer callScript.
 */
export async function runFlat(redis: RedisClient, spec: ScriptSpec, flat: string[]): Promise<unknown> {
  if (spec.nowAt >= 0 && flat[spec.keys.length + spec.nowAt] === '') {
    // '' means Redis's TIME, unless this client runs on a test clock (clock.ts). Whole ms, as TIME
    // gives: the scripts write times and scores as integers (includes/int_text.lua).
    const clock = clockOf(redis);
    if (clock) flat[spec.keys.length + spec.nowAt] = String(Math.floor(clock.now()));
  }
  try {
    const fn = libraryFunction(redis, spec.name);
    if (fn !== null) {
      try {
        return await fcall(redis, fn, spec.keys.length, flat);
      } catch (err) {
        // Not loaded on this server yet (a new server, one restarted without persistence, FUNCTION
        // FLUSH): nothing ran; load the library and call again. Refused: EVALSHA below.
        const missing = isFunctionMissing(err);
        if (!missing && !refusesFunctions(redis, err)) throw err;
        if (missing && (await loadLibrary(redis))) return await fcall(redis, fn, spec.keys.length, flat);
      }
    }
    try {
      return await untilClosed(redis, redis.evalsha(spec.sha, spec.keys.length, flat));
    } catch (err) {
      if (!(err instanceof Error && err.message.startsWith('NOSCRIPT'))) throw err;
      return await untilClosed(redis, redis.eval(spec.source, spec.keys.length, flat));
    }
  } catch (err) {
    // Over maxmemory, Redis refuses every script without `allow-oom` before it runs (see specs.ts).
    throw redisFullError(err, `${spec.name}.lua`) ?? err;
  }
}

function fcall(redis: RedisClient, fn: string, keyCount: number, flat: string[]): Promise<unknown> {
  const argv: (string | number)[] = [fn, keyCount];
  for (const v of flat) argv.push(v);
  return untilClosed(redis, redis.call('FCALL', argv));
}

/**
 * Runs a script and returns its decoded reply. A refusal the script sends as an error reply
 * (`SURETY_<CODE> ...`: the whole call was refused, nothing written) is thrown as its typed error,
 * named with `ctx` (what the caller was doing); refusals sent as replies are part of the decoded value.
 */
export async function callScript<A extends string, R extends string, T>(
  redis: RedisClient,
  spec: ScriptSpec<A, R, T>,
  keys: ScriptKeys,
  args: Record<A, ArgValue>,
  rows: readonly Record<R, ArgValue>[] = [],
  ctx: RefusalContext = { operation: spec.name },
): Promise<T> {
  let reply: unknown;
  try {
    reply = await runScript(redis, spec as ScriptSpec<A, R, unknown>, keys, args, rows);
  } catch (err) {
    const message = err instanceof Error ? err.message : '';
    const refusal = message.includes('SURETY_') ? parseRefusal(message) : null;
    throw refusal ? refusalError(refusal, ctx) : err;
  }
  return spec.decode(reply);
}
