/**
 * The producer API's request bodies: the JSON body, read with a size bound, and its jobs turned into
 * the arguments of queue.add / queue.addBulk. The only conversion done here is the one JSON needs
 * (runAt and expireAt given as ISO 8601 strings); every option is then checked by the library's own
 * resolveAddOptions, so the HTTP API accepts exactly what `add` accepts, with the same messages.
 */
import { ValidationError } from '../errors.js';
import { LIBRARY_JOB_DEFAULTS, resolveAddOptions } from '../options/job.js';
import type { JobOptions } from '../types.js';
import { checkKnownKeys, checkObject, show } from '../validate.js';
import { HttpError } from './http.js';

/** Default bound of a request body: a job's data may be up to 512 KiB (maxPayloadBytes), plus options. */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
/** Largest `maxBodyBytes` accepted: the body is held in memory while it is parsed. */
export const MAX_BODY_BYTES = 64 * 1024 * 1024;
/**
 * Most jobs in one bulk request. addBulk takes 10 000, but one request is one atomic script call per
 * partition: a tenth of that keeps each call short for the workers sharing the Redis.
 */
export const MAX_JOBS_PER_REQUEST = 1_000;

/** One job of a request, as queue.addBulk takes it. */
export interface JobItem {
  data: unknown;
  opts?: JobOptions;
}

/**
 * Refuses a body that is not JSON by its Content-Type: a browser can send `text/plain`,
 * `application/x-www-form-urlencoded` or `multipart/form-data` cross-site without asking, but
 * `application/json` needs a CORS preflight, which this API never grants (OPTIONS is 405). So even
 * behind a proxy that adds the Authorization header, another site cannot make a browser enqueue jobs.
 */
export function checkJsonType(req: Request): void {
  const [type = '', ...params] = (req.headers.get('content-type') ?? '').split(';');
  const charset = params
    .map((p) => p.trim().toLowerCase())
    .find((p) => p.startsWith('charset='))
    ?.slice('charset='.length)
    .replace(/^"|"$/g, '');
  if (type.trim().toLowerCase() !== 'application/json' || (charset !== undefined && charset !== 'utf-8'))
    throw new HttpError(
      415,
      'ERR_UNSUPPORTED_MEDIA_TYPE',
      `the body must be JSON sent with Content-Type: application/json (UTF-8), got ${show(req.headers.get('content-type') ?? '(none)')}`,
    );
}

function tooLarge(maxBytes: number): HttpError {
  return new HttpError(413, 'ERR_BODY_TOO_LARGE', `the request body is larger than ${maxBytes} bytes`, {
    connection: 'close',
  });
}

/**
 * The body parsed as JSON, read up to `maxBytes` (413 past it, as soon as the Content-Length or the
 * bytes read so far say so: a larger body is never held). `connection: close` on a refusal keeps the
 * server from reading the rest of the body to find the next request.
 */
export async function readJson(req: Request, maxBytes: number): Promise<unknown> {
  const declared = req.headers.get('content-length');
  if (declared !== null && Number(declared) > maxBytes) throw tooLarge(maxBytes);
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = req.body?.getReader();
  while (reader) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) throw tooLarge(maxBytes);
    chunks.push(value);
  }
  const invalid = (why: string) =>
    new HttpError(400, 'ERR_INVALID_JSON', `the request body is not valid JSON: ${why}`);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks));
  } catch {
    throw invalid('it is not UTF-8');
  }
  if (text.trim() === '') throw invalid('it is empty; send { "data": ..., "options": { ... } }');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw invalid((err as Error).message);
  }
}

/**
 * The jobs of a request body: `{ data, options }` for one job, `{ jobs: [{ data, options }, ...] }`
 * for up to MAX_JOBS_PER_REQUEST. Options are checked here, item by item, with the library's
 * resolveAddOptions (so a bulk refusal names its item); the add path checks them again, cheaply.
 */
export function jobsOf(body: unknown): { bulk: boolean; items: JobItem[] } {
  const b = checkObject('the request body', body);
  if (!('jobs' in b)) return { bulk: false, items: [jobItem('', b)] };
  checkKnownKeys('the request body', b, ['jobs']);
  if (!Array.isArray(b.jobs) || b.jobs.length === 0)
    throw new ValidationError(`jobs must be a non-empty array of { data, options }, got ${show(b.jobs)}`);
  if (b.jobs.length > MAX_JOBS_PER_REQUEST)
    throw new HttpError(
      413,
      'ERR_TOO_MANY_JOBS',
      `one request adds at most ${MAX_JOBS_PER_REQUEST} jobs, got ${b.jobs.length}; split them over several requests`,
    );
  return { bulk: true, items: b.jobs.map((job, i) => jobItem(`jobs[${i}]`, job)) };
}

function jobItem(where: string, value: unknown): JobItem {
  const what = where === '' ? 'the request body' : where;
  const o = checkObject(what, value);
  // `opts` is accepted too: it is addBulk's name for the same thing, so a body written from addBulk works.
  checkKnownKeys(what, o, ['data', 'options', 'opts']);
  if (!('data' in o))
    throw new ValidationError(`${what} has no data: give "data" (any JSON value, null for none)`);
  if (o.options !== undefined && o.opts !== undefined)
    throw new ValidationError(`${what} has both "options" and "opts": give one (they are the same thing)`);
  const key = o.options !== undefined ? 'options' : 'opts';
  if (o[key] === undefined) return { data: o.data };
  const opts = jsonOptions(where === '' ? key : `${where}.${key}`, o[key]);
  try {
    resolveAddOptions(opts, LIBRARY_JOB_DEFAULTS);
  } catch (err) {
    // Same code and message, with the item named: "jobs[3]: priority must be ...".
    if (err instanceof ValidationError && where !== '')
      throw new ValidationError(`${where}: ${err.message}`, err.code);
    throw err;
  }
  return { data: o.data, opts };
}

/** Job options from JSON: the ones `add` takes, with runAt and expireAt also as ISO 8601 strings. */
function jsonOptions(name: string, value: unknown): JobOptions {
  const o = { ...checkObject(name, value) };
  for (const key of ['runAt', 'expireAt'] as const) {
    if (typeof o[key] === 'string') o[key] = isoTime(key, o[key]);
  }
  return o as JobOptions;
}

/** An ISO 8601 date-time with a time zone; fractions of a millisecond are dropped. */
const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})$/i;

/** Epoch ms of an ISO 8601 date-time with a zone (2030-01-01T09:00:00Z); a date without one is ambiguous. */
export function isoTime(name: string, value: string): number {
  const m = ISO_TIME.exec(value);
  const t = m ? Date.parse(value) : Number.NaN;
  // Date.parse rolls 2030-02-30 over to March 2: refuse days the month does not have.
  const days = m ? new Date(Date.UTC(Number(m[1]), Number(m[2]), 0)).getUTCDate() : 0;
  if (!m || !Number.isFinite(t) || Number(m[3]) > days)
    throw new ValidationError(
      `${name} must be epoch ms or an ISO 8601 date-time with a time zone (e.g. "2030-01-01T09:00:00Z"), got ${show(value)}`,
    );
  return t;
}
