/**
 * The messages between a worker and its sandboxes (sandbox.ts, entry.ts), and thrown values as data.
 *
 * parent -> sandbox: `run` a job, `abort` it (its job.signal fired), `reply` to a call.
 * sandbox -> parent: `ready` (module loaded), `loadFailed`, `call` (a method of the parent's Job, with
 * JSON arguments), `done` (the processor returned or threw).
 */

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
] as const;
export type RpcMethod = (typeof RPC_METHODS)[number];

/** Plain fields of Job copied into the sandbox's job object. */
export const JOB_FIELDS = [
  'id',
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
  /** Own enumerable fields (e.g. delayMs), JSON values only. */
  fields?: Record<string, unknown>;
}

export type ToSandbox =
  | { t: 'run'; job: Record<string, unknown> }
  | { t: 'abort'; reason: ErrorData }
  | { t: 'reply'; callId: number; ok: boolean; value?: unknown; error?: ErrorData };

export type FromSandbox =
  | { t: 'ready' }
  | { t: 'loadFailed'; error: ErrorData }
  | { t: 'call'; callId: number; method: string; args: unknown[] }
  | { t: 'done'; ok: boolean; value?: unknown; error?: ErrorData };

const SKIP_FIELDS = new Set(['name', 'message', 'stack', 'code', 'cause']);

/** Reads a thrown value into data (never throws). */
export function errorToData(thrown: unknown): ErrorData {
  try {
    if (typeof thrown !== 'object' || thrown === null)
      return { name: 'Error', message: String(thrown as string) };
    const e = thrown as Record<string, unknown>;
    const data: ErrorData = {
      name: typeof e.name === 'string' ? e.name : 'Error',
      message: typeof e.message === 'string' ? e.message : String(e.message),
    };
    if (typeof e.stack === 'string') data.stack = e.stack;
    if (typeof e.code === 'string') data.code = e.code;
    const fields: Record<string, unknown> = {};
    for (const key of Object.keys(e)) {
      if (SKIP_FIELDS.has(key)) continue;
      try {
        const v = JSON.parse(JSON.stringify(e[key]) ?? 'null');
        if (v !== null || e[key] === null) fields[key] = v;
      } catch {
        // not JSON: left out
      }
    }
    if (Object.keys(fields).length > 0) data.fields = fields;
    return data;
  } catch {
    return { name: 'Error', message: 'an unreadable thrown value' };
  }
}

type ErrorClass = abstract new (...args: never[]) => Error;

/**
 * Rebuilds an error from data: as the class of that name in `classes` (the library's exported errors,
 * looked up at run time so classes added later work too), else as a plain Error with that name.
 * The constructor is not called (its arguments are not known): the fields are copied onto an object
 * of the class's prototype, so `instanceof` and `code` work.
 */
export function rebuildError(data: ErrorData, classes: Record<string, unknown> = {}): Error {
  const cls = classes[data.name];
  const isErrorClass = typeof cls === 'function' && (cls as ErrorClass).prototype instanceof Error;
  const err: Error = isErrorClass ? Object.create((cls as ErrorClass).prototype) : new Error(data.message);
  Object.defineProperty(err, 'message', { value: data.message, writable: true, configurable: true });
  Object.defineProperty(err, 'name', { value: data.name, writable: true, configurable: true });
  Object.defineProperty(err, 'stack', {
    value: data.stack ?? `${data.name}: ${data.message}`,
    writable: true,
    configurable: true,
  });
  if (data.code !== undefined) (err as { code?: string }).code = data.code;
  if (data.fields) Object.assign(err, data.fields);
  return err;
}
