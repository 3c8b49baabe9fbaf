/**
 * The job record: one field of the queue's `jobs` hash per job, laid out as
 *
 *   header "\n" dataJson [ "\n" resultJson ]
 *
 * JSON never contains a raw newline, so the first newline ends the header and the second (if any) ends
 * the data. The header is `|`-separated so Lua can read and rewrite it without parsing the data:
 *
 *   0 state  1 token  2 attempts  3 base  4 createdAt  5 runAt  6 startedAt  7 finishedAt
 *   8 priority  9 maxAttempts  10 leaseMs  11 backoff  [12 timeoutMs]
 *
 * Fields 8.. are written by the client ("option tail") and empty when they equal the library default.
 * `token` is the fencing token of the latest claim: a lease id unique in the queue's history (so a job
 * removed and added again under the same id can never accept a stale worker's outcome), cleared when
 * the lease is revoked. `base` is the attempt count at the last manual retry, so a retried job gets a
 * fresh budget of attempts.
 * Keep in step with src/scripts/includes/parse_record.lua.
 */
import { DEFAULT_BACKOFF, DEFAULT_LEASE_MS, DEFAULT_MAX_ATTEMPTS } from './defaults.js';
import type { JobAttemptError } from './errors.js';
import { stateName } from './states.js';
import type { BackoffOptions, JobInfo } from './types.js';

export interface ResolvedJobOptions {
  priority: number;
  maxAttempts: number;
  leaseMs: number;
  backoff: BackoffOptions;
  /** 0 = no timeout. */
  timeoutMs: number;
}

/** Fields 8..11 (and 12, timeoutMs, only when set) of the header, empty where the value is the library default. */
export function encodeOptionTail(o: ResolvedJobOptions): string {
  const prio = o.priority === 0 ? '' : String(o.priority);
  const max = o.maxAttempts === DEFAULT_MAX_ATTEMPTS ? '' : String(o.maxAttempts);
  const lease = o.leaseMs === DEFAULT_LEASE_MS ? '' : String(o.leaseMs);
  const tail = `${prio}|${max}|${lease}|${encodeBackoff(o.backoff)}`;
  return o.timeoutMs > 0 ? `${tail}|${o.timeoutMs}` : tail;
}

export function encodeBackoff(b: BackoffOptions): string {
  if (
    b.type === DEFAULT_BACKOFF.type &&
    b.delayMs === DEFAULT_BACKOFF.delayMs &&
    b.maxDelayMs === DEFAULT_BACKOFF.maxDelayMs &&
    b.jitter === DEFAULT_BACKOFF.jitter
  ) {
    return '';
  }
  const kind = b.type === 'fixed' ? 'f' : b.type === 'exponential' ? 'e' : `c${b.name}`;
  return `${kind},${b.delayMs ?? ''},${b.maxDelayMs ?? ''},${b.jitter ? 1 : 0}`;
}

export function decodeBackoff(s: string): BackoffOptions {
  if (s === '') return { ...DEFAULT_BACKOFF };
  const [kind = 'e', delay = '', max = '', jitter = '0'] = s.split(',');
  const out: BackoffOptions =
    kind === 'f'
      ? { type: 'fixed' }
      : kind === 'e'
        ? { type: 'exponential' }
        : { type: 'custom', name: kind.slice(1) };
  if (delay !== '') out.delayMs = Number(delay);
  if (max !== '') out.maxDelayMs = Number(max);
  out.jitter = jitter === '1';
  return out;
}

/** The parts of a record a worker needs to run an attempt; cheaper than a full decode. */
export interface ClaimedRecord {
  token: string;
  attempts: number;
  /** Claimed as prefetch and not begun (empty startedAt): its attempt is counted by begin.lua. */
  reserved: boolean;
  base: number;
  createdAt: number;
  runAt: number;
  priority: number;
  maxAttempts: number;
  leaseMs: number;
  backoff: string;
  timeoutMs: number;
  dataJson: string;
}

export function decodeClaimed(record: string): ClaimedRecord {
  const nl = record.indexOf('\n');
  const h = record.slice(0, nl).split('|');
  const createdAt = Number(h[4]);
  return {
    token: h[1] ?? '',
    attempts: Number(h[2]),
    reserved: !h[6],
    base: h[3] ? Number(h[3]) : 0,
    createdAt,
    runAt: h[5] ? Number(h[5]) : createdAt,
    priority: h[8] ? Number(h[8]) : 0,
    maxAttempts: h[9] ? Number(h[9]) : DEFAULT_MAX_ATTEMPTS,
    leaseMs: h[10] ? Number(h[10]) : DEFAULT_LEASE_MS,
    backoff: h[11] ?? '',
    timeoutMs: h[12] ? Number(h[12]) : 0,
    // A claimed record never carries a result (retry strips it), so the data runs to the end.
    dataJson: record.slice(nl + 1),
  };
}

/** A job's annex fields: error lines, progress, logs (see src/scripts/includes/annex_fields.lua). */
export function annexFields(id: string): [string, string, string, string, string] {
  return [id, `${id}\x01p`, `${id}\x01l`, `${id}\x01d`, `${id}\x01b`];
}

/** The data part of a record whose payload is kept in the annex (see includes/body_marker.lua). */
export const BODY_MARKER = '\x01';

export interface Annex {
  errorLines: string | null;
  progress: string | null;
  logs: string | null;
  parents: string | null;
  /** The payload, when it is kept in the annex. */
  body: string | null;
}

/** The annex of the i-th job from an HMGET of annexFields of several jobs. */
export function annexOf(values: (string | null)[], i: number): Annex {
  return {
    errorLines: values[i * 5] ?? null,
    progress: values[i * 5 + 1] ?? null,
    logs: values[i * 5 + 2] ?? null,
    parents: values[i * 5 + 3] ?? null,
    body: values[i * 5 + 4] ?? null,
  };
}

export function decodeRecord<D, R>(id: string, record: string, annex: Annex): JobInfo<D, R> {
  const nl = record.indexOf('\n');
  const h = record.slice(0, nl).split('|');
  const rest = record.slice(nl + 1);
  const nl2 = rest.indexOf('\n');
  const inline = nl2 === -1 ? rest : rest.slice(0, nl2);
  const dataJson = inline === BODY_MARKER ? (annex.body ?? 'null') : inline;
  const createdAt = Number(h[4]);
  const info: JobInfo<D, R> = {
    id,
    state: stateName(h[0] ?? '') ?? 'waiting',
    data: JSON.parse(dataJson) as D,
    attempts: Number(h[2]),
    maxAttempts: h[9] ? Number(h[9]) : DEFAULT_MAX_ATTEMPTS,
    priority: h[8] ? Number(h[8]) : 0,
    leaseMs: h[10] ? Number(h[10]) : DEFAULT_LEASE_MS,
    backoff: decodeBackoff(h[11] ?? ''),
    timeoutMs: h[12] ? Number(h[12]) : 0,
    errors: annex.errorLines ? decodeErrorLines(annex.errorLines) : [],
    logs: annex.logs ? annex.logs.split('\n').map((l) => JSON.parse(l) as string) : [],
    dependsOn: annex.parents ? annex.parents.split('\n') : [],
    createdAt,
    runAt: h[5] ? Number(h[5]) : createdAt,
  };
  if (annex.progress !== null) info.progress = JSON.parse(annex.progress);
  if (h[6]) info.startedAt = Number(h[6]);
  if (h[7]) info.finishedAt = Number(h[7]);
  if (nl2 !== -1) {
    const resultJson = rest.slice(nl2 + 1);
    if (resultJson !== '') info.result = JSON.parse(resultJson) as R;
  }
  return info;
}

/** The stored result of a completed job's record (undefined when it has none). */
export function resultOf(record: string): unknown {
  const nl = record.indexOf('\n');
  const nl2 = record.indexOf('\n', nl + 1);
  if (record[0] !== 'c' || nl2 === -1 || nl2 === record.length - 1) return undefined;
  return JSON.parse(record.slice(nl2 + 1));
}

/** Error lines are `at|attempt|json`, one per failed attempt, oldest first. */
export function decodeErrorLines(lines: string): JobAttemptError[] {
  const out: JobAttemptError[] = [];
  for (const line of lines.split('\n')) {
    if (line === '') continue;
    const p1 = line.indexOf('|');
    const p2 = line.indexOf('|', p1 + 1);
    const body = JSON.parse(line.slice(p2 + 1)) as Omit<JobAttemptError, 'at' | 'attempt'>;
    out.push({ attempt: Number(line.slice(p1 + 1, p2)), at: Number(line.slice(0, p1)), ...body });
  }
  return out;
}
