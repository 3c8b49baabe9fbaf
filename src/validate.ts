/**
 * Boundary checks. Every message names the option, shows the value received and says what is allowed.
 * Nothing is written to Redis before these pass.
 */
import { NotSerializableError, PayloadTooLargeError, ValidationError } from './errors.js';
import { MAX_TIMER_MS } from './timers.js';

/** The value received, for an error message. Never throws, whatever it is given. */
export function show(value: unknown): string {
  if (typeof value === 'string')
    return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}...` : value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'symbol') return value.toString();
  // JSON would print NaN and Infinity as null.
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : String(value);
  if (value instanceof Date)
    return Number.isNaN(value.getTime()) ? 'Date(invalid)' : `Date(${value.toISOString()})`;
  if (value === undefined) return 'undefined';
  try {
    const s = JSON.stringify(value);
    return s === undefined ? String(value) : s.length > 60 ? `${s.slice(0, 60)}...` : s;
  } catch {
    try {
      return String(value);
    } catch {
      return `a ${typeof value}`;
    }
  }
}

export function checkInt(name: string, value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
    throw new ValidationError(`${name} must be an integer ${range}, got ${show(value)}`);
  }
  return value;
}

/**
 * A duration that reaches a timer (setTimeout): an integer from `min` to 2^31-1 ms, the most Node's
 * timers hold (a larger delay would fire after 1 ms: a busy loop, or a wait that ends at once).
 */
export function checkTimerMs(name: string, value: unknown, min: number): number {
  return checkInt(name, value, min, MAX_TIMER_MS);
}

export function checkString(name: string, value: unknown, minLength: number, maxLength: number): string {
  if (typeof value !== 'string' || value.length < minLength || value.length > maxLength) {
    throw new ValidationError(
      `${name} must be a string of ${minLength}-${maxLength} characters, got ${show(value)}`,
    );
  }
  return value;
}

export const MAX_PARTITIONS = 1024;

/** 0 stands for 'auto': use the count recorded in Redis (1 when none is). */
export function checkPartitions(value: unknown): number {
  if (value === undefined) return 1;
  if (value === 'auto') return 0;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_PARTITIONS) {
    throw new ValidationError(
      `partitions must be an integer from 1 to ${MAX_PARTITIONS} or 'auto', got ${show(value)}`,
    );
  }
  return value;
}

export function checkBool(name: string, value: unknown): boolean {
  if (typeof value !== 'boolean')
    throw new ValidationError(`${name} must be true or false, got ${show(value)}`);
  return value;
}

export function checkObject(name: string, value: unknown): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ValidationError(`${name} must be an object, got ${show(value)}`);
  }
  return value as Record<string, unknown>;
}

/**
 * The options object of a method call (`getJobs(state, opts)`, `close(opts)`...): undefined, or an
 * object with only the `allowed` keys. A null or misspelt option is refused, not read as absent.
 */
export function checkCallOptions(name: string, value: unknown, allowed: readonly string[]): void {
  if (value === undefined) return;
  checkKnownKeys(name, checkObject(name, value), allowed);
}

const STREAM_ID = /^\d{1,20}(-\d{1,20})?$/;

/** Where an event reader starts: '$' (new events only, the default), '0' (all retained) or a stream id. */
export function checkStreamFrom(value: unknown): string {
  if (value === undefined) return '$';
  if (value === '$' || (typeof value === 'string' && STREAM_ID.test(value))) return value;
  throw new ValidationError(
    `from must be '$', '0' or a stream id such as '1700000000000-0', got ${show(value)}`,
  );
}

/** Rejects misspelt option names instead of silently ignoring them. */
export function checkKnownKeys(
  name: string,
  value: Record<string, unknown>,
  allowed: readonly string[],
): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) {
      throw new ValidationError(`${name} has an unknown option ${show(key)}; allowed: ${allowed.join(', ')}`);
    }
  }
}

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
const PREFIX_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,49}$/;

export function checkQueueName(value: unknown): string {
  if (typeof value !== 'string' || !NAME_RE.test(value)) {
    throw new ValidationError(
      `queue name must be 1-100 characters of letters, digits, '.', '_' or '-' (starting with a letter or digit), got ${show(value)}`,
      'ERR_INVALID_QUEUE_NAME',
    );
  }
  return value;
}

export function checkPrefix(value: unknown): string {
  if (typeof value !== 'string' || !PREFIX_RE.test(value)) {
    throw new ValidationError(
      `prefix must be 1-50 characters of letters, digits, '.', '_', ':' or '-', got ${show(value)}`,
    );
  }
  return value;
}

/**
 * Keeps (prefix, queue, partition) -> hash tag one-to-one. Queue names have no ':', so a tag
 * `{prefix:queue}` or `{prefix:queue:p}` can be read back, except in one case: an all-digit queue
 * name under a prefix with a ':' (`surety:orders` + `0`) gives `{surety:orders:0}`, the tag of
 * partition 0 of queue `orders` under prefix `surety`. That pair is refused.
 */
export function checkQueueAddress(prefix: string, name: string): void {
  const cut = prefix.lastIndexOf(':');
  if (cut >= 0 && /^\d+$/.test(name)) {
    throw new ValidationError(
      `queue name ${show(name)} is all digits and prefix ${show(prefix)} contains ':', so its keys would be those of partition ${name} of queue ${show(prefix.slice(cut + 1))} under prefix ${show(prefix.slice(0, cut))}; give the queue a name with a letter, or use a prefix without ':'`,
      'ERR_INVALID_QUEUE_NAME',
    );
  }
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point.
const CONTROL_CHARS = /[\x00-\x1f\x7f]/;

/** Whether `s` holds a control character (ids, labels and names refuse them: see CONTROL_CHARS). */
export function hasControlChars(s: string): boolean {
  return CONTROL_CHARS.test(s);
}

/**
 * An unpaired UTF-16 surrogate: Redis stores strings as UTF-8, where each becomes U+FFFD, so
 * 'a\uD800' and 'a\uDC00' would name the same key or field.
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** True when `s` survives UTF-8 unchanged (no unpaired surrogate): what a Redis key or field needs. */
export function isWellFormed(s: string): boolean {
  return !LONE_SURROGATE.test(s);
}

/**
 * A group name or dedupe key: 1-256 characters, none of them '|' (the record header's separator) or a
 * control character (a newline would end the header), and no unpaired surrogate (see LONE_SURROGATE).
 */
export function checkLabel(name: string, value: unknown): string {
  if (
    typeof value !== 'string' ||
    value.length === 0 ||
    value.length > 256 ||
    value.includes('|') ||
    CONTROL_CHARS.test(value) ||
    !isWellFormed(value)
  ) {
    throw new ValidationError(
      `${name} must be a string of 1-256 characters without '|', control characters or unpaired UTF-16 surrogates, got ${show(value)}`,
    );
  }
  return value;
}

export function checkJobId(value: unknown): string {
  // Control characters are refused: newlines separate ids in pub/sub messages. Unpaired surrogates
  // are refused: two different ids would become one in Redis (see LONE_SURROGATE).
  if (
    typeof value !== 'string' ||
    value.length === 0 ||
    value.length > 256 ||
    CONTROL_CHARS.test(value) ||
    !isWellFormed(value)
  ) {
    throw new ValidationError(
      `job id must be a string of 1-256 characters without control characters or unpaired UTF-16 surrogates, got ${show(value)}`,
      'ERR_INVALID_JOB_ID',
    );
  }
  return value;
}

/**
 * JSON text of `value`, refusing anything JSON would silently change or drop: undefined, functions,
 * symbols, BigInt, NaN/Infinity, Dates, Maps, class instances and cycles. Plain objects, arrays,
 * strings, finite numbers, booleans and null pass.
 */
export function toJson(what: string, value: unknown, maxBytes: number): string {
  // The quick check builds no paths and keeps no set; only a value it refuses is walked again to name
  // the offending path (a cycle shows there as depth beyond the limit).
  if (!isPlainJson(value, 0)) assertPlainJson(what, value, new Set(), 0);
  const json = JSON.stringify(value);
  // A UTF-8 byte is at least one UTF-16 unit, and at most 3 per unit: measure only near the limit.
  if (json.length * 3 > maxBytes) {
    const bytes = Buffer.byteLength(json);
    if (bytes > maxBytes) {
      throw new PayloadTooLargeError(
        `${what} is ${bytes} bytes as JSON; the limit (maxPayloadBytes) is ${maxBytes}`,
      );
    }
  }
  return json;
}

/**
 * `text`, JSON that toJson made once and that was stored (the Postgres outbox's rows: a `json` column
 * holds valid JSON text, as given), checked as toJson(JSON.parse(text)) checks it, without the parse
 * and the serialisation when the text provably passes: then the text itself, else what that returns
 * or throws. Parsed JSON holds only plain values, so toJson can refuse it only for its size, a number
 * that parses to Infinity (it has an exponent, or over 308 digits) or nesting deeper than 100 levels
 * (it takes more than 101 brackets); and a reader's JSON.parse gets from the text the value it would
 * get from toJson's, but for a -0 (which JSON.stringify writes as 0). Text with none of those signs
 * (inside strings too, where they only cost the long way) is returned as it is.
 */
export function storedJson(what: string, text: string, maxBytes: number): string {
  const fits = !(text.length * 3 > maxBytes && Buffer.byteLength(text) > maxBytes);
  if (fits && !NOT_AS_IS.test(text) && bracketsAtMost(text, 101)) return text;
  return toJson(what, JSON.parse(text) as unknown, maxBytes);
}

/** A digit before an exponent, 309 digits in a row, or a negative zero (-0, -0.0...). */
const NOT_AS_IS = /\d[eE]|\d{309}|-0(?:\.0+)?(?![\d.])/;

function bracketsAtMost(text: string, max: number): boolean {
  let n = 0;
  for (let i = text.indexOf('{'); i >= 0; i = text.indexOf('{', i + 1)) if (++n > max) return false;
  for (let i = text.indexOf('['); i >= 0; i = text.indexOf('[', i + 1)) if (++n > max) return false;
  return true;
}

/** Whether assertPlainJson would pass `value`, without naming what fails. */
function isPlainJson(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return true;
    case 'number':
      return Number.isFinite(value);
    case 'object': {
      if (value === null) return true;
      if (depth > 100) return false;
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) if (!isPlainJson(value[i], depth + 1)) return false;
        return true;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) return false;
      for (const key of Object.keys(value)) {
        const v = (value as Record<string, unknown>)[key];
        if (v !== undefined && !isPlainJson(v, depth + 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}

function assertPlainJson(path: string, value: unknown, seen: Set<object>, depth: number): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value))
        throw new NotSerializableError(`${path} is ${value}, which JSON cannot hold`);
      return;
    case 'object': {
      if (value === null) return;
      if (depth > 100) throw new NotSerializableError(`${path} is nested more than 100 levels deep`);
      if (seen.has(value)) throw new NotSerializableError(`${path} is a circular reference`);
      const proto = Object.getPrototypeOf(value);
      if (Array.isArray(value)) {
        seen.add(value);
        for (let i = 0; i < value.length; i++) assertPlainJson(`${path}[${i}]`, value[i], seen, depth + 1);
        seen.delete(value);
        return;
      }
      if (proto !== Object.prototype && proto !== null) {
        const kind = (value as object).constructor?.name ?? 'an object with a custom prototype';
        throw new NotSerializableError(
          `${path} is a ${kind}; job data must be plain JSON (objects, arrays, strings, numbers, booleans, null)`,
        );
      }
      seen.add(value);
      for (const key of Object.keys(value)) {
        const v = (value as Record<string, unknown>)[key];
        // An undefined property is simply absent in JSON, as it is for optional fields in TypeScript.
        if (v !== undefined) assertPlainJson(`${path}.${key}`, v, seen, depth + 1);
      }
      seen.delete(value);
      return;
    }
    default:
      throw new NotSerializableError(`${path} is ${show(value)} (${typeof value}), which JSON cannot hold`);
  }
}

/** A signal name: 1-256 characters without tabs or newlines (it is stored in lines `name \t json`). */
export function checkSignalName(name: unknown): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > 256 || /[\t\n\r]/.test(name))
    throw new ValidationError(
      `a signal name must be a string of 1-256 characters without tabs or newlines, got ${JSON.stringify(String(name)).slice(0, 80)}`,
    );
  return name;
}
