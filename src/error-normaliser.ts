/**
 * Turns whatever a processor threw (or rejected with) into an attempt error the engine can record.
 *
 * A processor can throw anything: `Object.create(null)`, an Error whose `stack` is a number, a
 * `message` getter that throws or returns an object, a Proxy that throws on every get, a BigInt, a
 * symbol, `undefined`, a circular object, a 10 MB string. `normaliseThrown` reads such a value once,
 * defensively, and never throws: every read is guarded, every string is cut to a bounded length, and
 * the result holds only plain strings, so serialising it cannot throw either.
 */
import { MAX_MESSAGE_CHARS, MAX_STACK_CHARS } from './defaults.js';
import { DependencyFailedError, NotSerializableError, SuretyError, UnrecoverableError } from './errors.js';

/** Longest error `name` and `code` kept (they are identifiers, not prose). */
const MAX_NAME_CHARS = 200;

/** A thrown value, read once: what the attempt's error line stores and what the `failed` event gets. */
export interface AttemptError {
  /** The thrown value itself when it is a well-formed Error, else an Error describing it. */
  readonly error: Error;
  readonly name: string;
  readonly message: string;
  readonly stack: string | undefined;
  readonly code: string | undefined;
  /** The processor threw an UnrecoverableError: the job ends dead without further attempts. */
  readonly unrecoverable: boolean;
}

/** Runs `read`, returning `fallback` if it throws. */
function guard<T>(read: () => T, fallback: T): T {
  try {
    return read();
  } catch {
    return fallback;
  }
}

/** A string property of `obj`, or undefined when missing, not a string, or unreadable. */
function stringProp(obj: object, key: string, max: number): string | undefined {
  return guard(() => {
    const v = (obj as Record<string, unknown>)[key];
    return typeof v === 'string' ? v.slice(0, max) : undefined;
  }, undefined);
}

/** A short description of a thrown value that is not an Error (never calls user code that can hang). */
function describe(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return value.slice(0, MAX_MESSAGE_CHARS);
    case 'number':
    case 'boolean':
    case 'bigint':
    case 'undefined':
      return String(value);
    case 'symbol':
      return guard(() => value.toString(), 'a symbol').slice(0, MAX_MESSAGE_CHARS);
    case 'function':
      return `a function${guard(() => ` ${String(value.name).slice(0, MAX_NAME_CHARS)}`, '')}`;
    default: {
      if (value === null) return 'null';
      // A plain object usually carries its meaning in its fields: show them as JSON when possible.
      const json = guard(() => JSON.stringify(value), undefined);
      if (typeof json === 'string') return json.slice(0, MAX_MESSAGE_CHARS);
      return guard(() => Object.prototype.toString.call(value), '[object]').slice(0, MAX_MESSAGE_CHARS);
    }
  }
}

/** `value instanceof cls`, false when the check itself throws (a Proxy's getPrototypeOf trap). */
export function isA(value: unknown, cls: abstract new (...args: never[]) => unknown): boolean {
  return guard(() => value instanceof cls, false);
}

/** Reads a thrown value once into an AttemptError. Never throws; every string is bounded. */
export function normaliseThrown(thrown: unknown): AttemptError {
  try {
    const isObject = (typeof thrown === 'object' && thrown !== null) || typeof thrown === 'function';
    const isError = isObject && isA(thrown, Error);
    if (isObject) {
      const obj = thrown as object;
      const rawMessage = guard(() => (obj as { message?: unknown }).message, undefined);
      const message = typeof rawMessage === 'string' ? rawMessage.slice(0, MAX_MESSAGE_CHARS) : undefined;
      const name = stringProp(obj, 'name', MAX_NAME_CHARS);
      const stack = stringProp(obj, 'stack', MAX_STACK_CHARS);
      const code = stringProp(obj, 'code', MAX_NAME_CHARS);
      // A dead dependency (job.waitForChildren) stays dead: a retry would meet it again.
      const unrecoverable =
        isError && (isA(thrown, UnrecoverableError) || isA(thrown, DependencyFailedError));
      // A well-formed Error goes to the `failed` event as it is (callers may check instanceof/fields).
      if (isError && message !== undefined && name !== undefined) {
        return { error: thrown as Error, name, message, stack, code, unrecoverable };
      }
      const described = message ?? describe(thrown);
      const error = new Error(described);
      if (name !== undefined) error.name = name;
      return { error, name: error.name, message: described, stack, code, unrecoverable };
    }
    const message = describe(thrown);
    const error = new Error(message);
    return { error, name: 'Error', message, stack: undefined, code: undefined, unrecoverable: false };
  } catch {
    const error = new Error('the processor threw a value that could not be read');
    return {
      error,
      name: 'Error',
      message: error.message,
      stack: undefined,
      code: undefined,
      unrecoverable: false,
    };
  }
}

/** An attempt's error as stored in its error line: name, message, stack and code (all bounded). */
export function serializeAttemptError(e: AttemptError): string {
  return JSON.stringify({ name: e.name, message: e.message, stack: e.stack, code: e.code });
}

/**
 * Why a processor's result could not be stored: toJson's typed error (NotSerializableError,
 * PayloadTooLargeError) as it is, anything else it ran into (a getter or Proxy trap that throws, a
 * string too long for JSON.stringify) as a NotSerializableError.
 */
export function resultError(jobId: string, thrown: unknown): SuretyError {
  if (isA(thrown, SuretyError)) return thrown as SuretyError;
  return new NotSerializableError(
    `the result of job ${JSON.stringify(jobId)} cannot be stored as JSON: ${normaliseThrown(thrown).message}`,
  );
}
