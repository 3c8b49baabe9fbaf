/**
 * The messages between a worker and its sandboxes (sandbox.ts, entry.ts), and thrown values as data.
 *
 * parent -> sandbox: `run` a job, `abort` it (its job.signal fired), `reply` to a call.
 * sandbox -> parent: `ready` (module loaded), `loadFailed`, `started` (the sandbox took the run and is
 * calling the processor), `call` (a method of the parent's Job, with JSON arguments), `done` (the
 * processor returned or threw).
 *
 * Every message about a job names its run: the sandbox's sequence number of the job given to it. A
 * call also carries the job's id and its attempt's fencing token; the parent answers it only while
 * that run is the one in progress, so what a job's code does after it returned (a timer calling
 * job.updateData) is refused, never applied to the next job the sandbox runs. Messages from a
 * sandbox are untrusted input: `checkFromSandbox` reads them before anything acts on them.
 */
import { normaliseThrown } from '../../error-normaliser.js';

/**
 * Methods of the parent's Job a sandboxed job calls over the message channel, with JSON arguments:
 * one line here makes a new Job method available in the sandbox (job.step is built on readStep and
 * writeStep inside the sandbox).
 */
export const RPC_METHODS = [
  'progress',
  'log',
  'parentResults',
  'readStep',
  'writeStep',
  'updateData',
  'checkLease',
  'waitForSignal',
  'addChildren',
  'waitForChildren',
] as const;
export type RpcMethod = (typeof RPC_METHODS)[number];

/** Plain fields of Job copied into the sandbox's job object. */
export const JOB_FIELDS = [
  'id',
  'token',
  'queueName',
  'partition',
  'data',
  'name',
  'attempt',
  'maxAttempts',
  'base',
  'priority',
  'leaseMs',
  'createdAt',
  'runAt',
  'timeoutMs',
  'batch',
  'snoozes',
  'startedAt',
  'isLastAttempt',
] as const;

/** A thrown value as data: what crosses the boundary, rebuilt on the other side by `rebuildError`. */
export interface ErrorData {
  name: string;
  message: string;
  stack?: string;
  code?: string;
  /**
   * The library error class the value is an instance of (the nearest one in its prototype chain),
   * set by `errorToData` from the prototype, never from the value's `name`: a user's class that is
   * merely named RateLimitError crosses as an ordinary error.
   */
  libraryClass?: string;
  /** Own enumerable fields (e.g. delayMs), JSON values only. */
  fields?: Record<string, unknown>;
}

export type ToSandbox =
  | { t: 'run'; run: number; job: Record<string, unknown>; maxPayloadBytes: number }
  | { t: 'abort'; run: number; reason: ErrorData }
  | { t: 'reply'; callId: number; ok: boolean; value?: unknown; error?: ErrorData };

export type FromSandbox =
  | { t: 'ready' }
  | { t: 'loadFailed'; error: ErrorData }
  | { t: 'started'; run: number }
  | {
      t: 'call';
      callId: number;
      run: number;
      jobId: string;
      token: string;
      method: string;
      args: unknown[];
    }
  /** `json`: the result as toJson wrote it inside the sandbox ('' for undefined). */
  | { t: 'done'; run: number; ok: boolean; json?: string; error?: ErrorData };

const SKIP_FIELDS = new Set(['name', 'message', 'stack', 'code', 'cause']);
/** Field names never copied onto a rebuilt error (they would change its prototype or class). */
const UNSAFE_FIELDS = new Set(['__proto__', 'constructor', 'prototype']);

type ErrorClass = abstract new (...args: never[]) => Error;

/** The library's error classes by prototype, from its `errors` namespace (read once per namespace). */
const byPrototype = new WeakMap<object, Map<object, string>>();
function libraryPrototypes(classes: Record<string, unknown>): Map<object, string> {
  let map = byPrototype.get(classes);
  if (!map) {
    map = new Map();
    for (const [name, cls] of Object.entries(classes)) {
      if (typeof cls === 'function' && (cls as ErrorClass).prototype instanceof Error)
        map.set((cls as ErrorClass).prototype, name);
    }
    byPrototype.set(classes, map);
  }
  return map;
}

/** The nearest library class in `value`'s prototype chain (never throws, e.g. on a Proxy). */
function libraryClassOf(value: object, classes: Record<string, unknown>): string | undefined {
  const known = libraryPrototypes(classes);
  try {
    for (let p = Object.getPrototypeOf(value); p !== null; p = Object.getPrototypeOf(p)) {
      const name = known.get(p);
      if (name !== undefined) return name;
    }
  } catch {
    // a Proxy's getPrototypeOf trap threw: not one of ours
  }
  return undefined;
}

/**
 * Reads a thrown value into data (never throws): name, message, stack and code exactly as the worker
 * reads a function processor's throw (normaliseThrown), so the error line is the same inline and in a
 * sandbox; `classes`: the library's error classes, for the `libraryClass` marker.
 */
export function errorToData(thrown: unknown, classes: Record<string, unknown> = {}): ErrorData {
  const read = normaliseThrown(thrown);
  const data: ErrorData = { name: read.name, message: read.message };
  if (read.stack !== undefined) data.stack = read.stack;
  if (read.code !== undefined) data.code = read.code;
  if ((typeof thrown !== 'object' && typeof thrown !== 'function') || thrown === null) return data;
  const libraryClass = libraryClassOf(thrown, classes);
  if (libraryClass !== undefined) data.libraryClass = libraryClass;
  try {
    const e = thrown as Record<string, unknown>;
    const fields: Record<string, unknown> = {};
    for (const key of Object.keys(e)) {
      if (SKIP_FIELDS.has(key) || UNSAFE_FIELDS.has(key)) continue;
      try {
        const v = JSON.parse(JSON.stringify(e[key]) ?? 'null');
        if (v !== null || e[key] === null) fields[key] = v;
      } catch {
        // not JSON: left out
      }
    }
    if (Object.keys(fields).length > 0) data.fields = fields;
  } catch {
    // fields unreadable (a Proxy): name, message, stack and code are enough
  }
  return data;
}

/**
 * Rebuilds an error from data: as the library class `data.libraryClass` names, looked up in `classes`
 * (the library's exported errors, read at run time so classes added later work too), else as a plain
 * Error with the data's name. The constructor is not called (its arguments are not known): the fields
 * are defined on an object of the class's prototype, so `instanceof` and `code` work. What the
 * rebuilt error asks for (a SnoozeError's delayMs) is checked where it is acted on (runner.ts).
 */
export function rebuildError(data: ErrorData, classes: Record<string, unknown> = {}): Error {
  const cls = data.libraryClass === undefined ? undefined : classes[data.libraryClass];
  const isErrorClass = typeof cls === 'function' && (cls as ErrorClass).prototype instanceof Error;
  const err: Error = isErrorClass ? Object.create((cls as ErrorClass).prototype) : new Error();
  const define = (key: string, value: unknown) =>
    Object.defineProperty(err, key, { value, writable: true, configurable: true, enumerable: false });
  define('message', String(data.message));
  define('name', String(data.name));
  define('stack', typeof data.stack === 'string' ? data.stack : `${data.name}: ${data.message}`);
  if (typeof data.code === 'string') define('code', data.code);
  if (data.fields !== null && typeof data.fields === 'object') {
    for (const [key, value] of Object.entries(data.fields)) {
      if (SKIP_FIELDS.has(key) || UNSAFE_FIELDS.has(key)) continue;
      Object.defineProperty(err, key, { value, writable: true, configurable: true, enumerable: true });
    }
  }
  return err;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;
const isRun = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);

/** ErrorData as sent by a sandbox, or null when it is not shaped like one. */
function checkErrorData(v: unknown): ErrorData | null {
  if (!isRecord(v) || typeof v.name !== 'string' || typeof v.message !== 'string') return null;
  const data: ErrorData = { name: v.name, message: v.message };
  if (typeof v.stack === 'string') data.stack = v.stack;
  if (typeof v.code === 'string') data.code = v.code;
  if (typeof v.libraryClass === 'string') data.libraryClass = v.libraryClass;
  if (isRecord(v.fields) && !Array.isArray(v.fields)) data.fields = v.fields;
  return data;
}

/** A message from a sandbox, checked field by field; null when it is not one the protocol knows. */
export function checkFromSandbox(m: unknown): FromSandbox | null {
  if (!isRecord(m)) return null;
  switch (m.t) {
    case 'ready':
      return { t: 'ready' };
    case 'loadFailed': {
      const error = checkErrorData(m.error);
      return error ? { t: 'loadFailed', error } : null;
    }
    case 'started':
      return isRun(m.run) ? { t: 'started', run: m.run } : null;
    case 'call':
      if (!isRun(m.callId) || !isRun(m.run) || typeof m.method !== 'string') return null;
      if (typeof m.jobId !== 'string' || typeof m.token !== 'string') return null;
      return {
        t: 'call',
        callId: m.callId,
        run: m.run,
        jobId: m.jobId,
        token: m.token,
        method: m.method,
        args: Array.isArray(m.args) ? m.args : [],
      };
    case 'done': {
      if (!isRun(m.run) || typeof m.ok !== 'boolean') return null;
      if (m.ok) return typeof m.json === 'string' ? { t: 'done', run: m.run, ok: true, json: m.json } : null;
      const error = checkErrorData(m.error);
      return error ? { t: 'done', run: m.run, ok: false, error } : null;
    }
    default:
      return null;
  }
}
