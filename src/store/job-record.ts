/**
 * The job record: one field of the queue's `jobs` hash per job, laid out as
 *
 *   header "\n" dataJson [ "\n" resultJson ]
 *
 * JSON never contains a raw newline, so the first newline ends the header and the second (if any) ends
 * the data. The header is `|`-separated so Lua can read and rewrite it without parsing the data:
 *
 *   0 state  1 token  2 attempts  3 base  4 createdAt  5 runAt  6 startedAt  7 finishedAt
 *   8 priority  9 maxAttempts  10 leaseMs  11 backoff  [12 timeoutMs  [13 group  [14 dedupe  [15 refunds
 *   [16 name  [17 expireAt  [18 snoozes  [19 batch  [20 keep  [21 trace  [22 lifo]]]]]]]]]]]
 *
 * (`HEADER` below names each position.) Fields 8.. are written by the client ("option tail") and are
 * empty when they equal the library default. `group` is the job's group ('' = none); `dedupe` the
 * dedupe key the job frees when it finishes (throttle without ttl, debounce; '' = none).
 * `token` is the fencing token of the latest claim: a lease id unique in the queue's history (so a job
 * removed and added again under the same id can never accept a stale worker's outcome), cleared when
 * the lease is revoked. `attempts` counts starts (the start marks; never given back); `startedAt` is the
 * start of the current lease ('' until its mark). `base` counts the starts not charged to the budget of
 * maxAttempts: those before the last manual retry (so a retried job gets a fresh budget), plus the
 * snoozes, sleeps and rate limits (fail.lua gives their budget back); `refunds` (written only by
 * recover.lua) counts the leases lost unmarked that it returned free (from FREE_RETURNS on, the worker
 * confirms the job's start before running it).
 * `name` is the job's name ('' = none); `expireAt` the epoch ms after which it must not start ('' = never);
 * `snoozes` how many times a processor snoozed it (written by scripts only); `batch` its batch id
 * ('' = none); `keep` its own retention: 'c' delete when completed, 'x' delete when dead, 'cx' both;
 * `trace` the producer's trace context (W3C traceparent [space tracestate], src/telemetry/trace-field.ts;
 * '' = none), which every attempt's span continues. Records written before it existed have no field 21.
 * `lifo` is '1' for a job added with `lifo: true` (it enters waiting at the front of its priority each
 * time it becomes waiting: includes/enqueue.lua), '' otherwise.
 * A field a script writes past the end of a shorter header pads the fields before it with ''.
 * Keep in step with src/scripts/includes/parse_record.lua.
 */
import { DEFAULT_BACKOFF, DEFAULT_LEASE_MS, DEFAULT_MAX_ATTEMPTS } from '../defaults.js';
import { stateName } from '../states.js';
import type { BackoffOptions, JobAttemptError, JobInfo } from '../types.js';

/**
 * Positions of the header fields (0-based). Lua names the same positions F_STATE... in
 * includes/parse_record.lua, 1-based; test/unit/job-record.test.ts checks the two agree.
 */
export const HEADER = Object.freeze({
  state: 0,
  token: 1,
  attempts: 2,
  base: 3,
  createdAt: 4,
  runAt: 5,
  startedAt: 6,
  finishedAt: 7,
  priority: 8,
  maxAttempts: 9,
  leaseMs: 10,
  backoff: 11,
  timeoutMs: 12,
  group: 13,
  dedupe: 14,
  refunds: 15,
  name: 16,
  expireAt: 17,
  snoozes: 18,
  batch: 19,
  keep: 20,
  trace: 21,
  lifo: 22,
});

/** The header fields of a record, with the library defaults filled in for empty option fields. */
export interface RecordHeader {
  state: string;
  token: string;
  attempts: number;
  base: number;
  createdAt: number;
  runAt: number;
  /** The start of the current lease; undefined until its start mark (a prefetched job, or one never claimed). */
  startedAt: number | undefined;
  finishedAt: number | undefined;
  priority: number;
  maxAttempts: number;
  leaseMs: number;
  /** The encoded backoff ('' for the default): see decodeBackoff. */
  backoff: string;
  /** 0 = no timeout. */
  timeoutMs: number;
  /** '' = no group. */
  group: string;
  /** Leases lost before their start mark that recover.lua returned free so far. */
  refunds: number;
  /** '' = no name. */
  name: string;
  /** Epoch ms after which the job must not start; 0 = never expires. */
  expireAt: number;
  /** Times a processor snoozed the job. */
  snoozes: number;
  /** '' = not in a batch. */
  batch: string;
  /** The job's own retention: 'c' = delete when completed, 'x' = when dead, 'cx' both, '' = the worker's rules. */
  keep: string;
  /** The producer's trace context ('' = none): see src/telemetry/trace-field.ts. */
  trace: string;
  /** Added with `lifo: true`: enters waiting at the front of its priority. */
  lifo: boolean;
}

/** Header field `i` as a number, or `fallback` when it is empty (an option left at its default). */
function numberOr(h: readonly string[], i: number, fallback: number): number {
  const v = h[i];
  return v === undefined || v === '' ? fallback : Number(v);
}

/**
 * Reads the header of a record (the part before its first newline): the one place defaults are
 * applied. On the claim path for every job, so no closures or intermediate objects.
 */
export function readHeader(header: string): RecordHeader {
  const h = header.split('|');
  const createdAt = Number(h[HEADER.createdAt]);
  const startedAt = h[HEADER.startedAt];
  const finishedAt = h[HEADER.finishedAt];
  return {
    state: h[HEADER.state] ?? '',
    token: h[HEADER.token] ?? '',
    attempts: Number(h[HEADER.attempts]),
    base: numberOr(h, HEADER.base, 0),
    createdAt,
    runAt: numberOr(h, HEADER.runAt, createdAt),
    startedAt: startedAt ? Number(startedAt) : undefined,
    finishedAt: finishedAt ? Number(finishedAt) : undefined,
    priority: numberOr(h, HEADER.priority, 0),
    maxAttempts: numberOr(h, HEADER.maxAttempts, DEFAULT_MAX_ATTEMPTS),
    leaseMs: numberOr(h, HEADER.leaseMs, DEFAULT_LEASE_MS),
    backoff: h[HEADER.backoff] ?? '',
    timeoutMs: numberOr(h, HEADER.timeoutMs, 0),
    group: h[HEADER.group] ?? '',
    refunds: numberOr(h, HEADER.refunds, 0),
    name: h[HEADER.name] ?? '',
    expireAt: numberOr(h, HEADER.expireAt, 0),
    snoozes: numberOr(h, HEADER.snoozes, 0),
    batch: h[HEADER.batch] ?? '',
    keep: h[HEADER.keep] ?? '',
    trace: h[HEADER.trace] ?? '',
    lifo: h[HEADER.lifo] === '1',
  };
}

export interface ResolvedJobOptions {
  priority: number;
  maxAttempts: number;
  leaseMs: number;
  backoff: BackoffOptions;
  /** 0 = no timeout. */
  timeoutMs: number;
}

/** The header fields past the job options that the client writes at add ('' = none). */
export interface TailExtras {
  group?: string;
  dedupe?: string;
  name?: string;
  /** Epoch ms as a string. */
  expireAt?: string;
  batch?: string;
  keep?: string;
  /** The trace field (src/telemetry/trace-field.ts: no `|`, no newline). */
  trace?: string;
  /** '1' = lifo, '' = not. */
  lifo?: string;
}

/**
 * Fields 8.. of the header: 8..11 always, then up to the last non-empty one of 12 (timeoutMs), 13
 * group, 14 dedupe, 16 name, 17 expireAt, 19 batch, 20 keep, 21 trace, 22 lifo; empty where the value is the library
 * default. 15 (refunds) and 18 (snoozes) start empty: only scripts write them.
 */
export function encodeOptionTail(o: ResolvedJobOptions, x: TailExtras = {}): string {
  const prio = o.priority === 0 ? '' : String(o.priority);
  const max = o.maxAttempts === DEFAULT_MAX_ATTEMPTS ? '' : String(o.maxAttempts);
  const lease = o.leaseMs === DEFAULT_LEASE_MS ? '' : String(o.leaseMs);
  const tail = `${prio}|${max}|${lease}|${encodeBackoff(o.backoff)}`;
  const timeout = o.timeoutMs > 0 ? String(o.timeoutMs) : '';
  const rest = [
    timeout,
    x.group ?? '',
    x.dedupe ?? '',
    '',
    x.name ?? '',
    x.expireAt ?? '',
    '',
    x.batch ?? '',
    x.keep ?? '',
    x.trace ?? '',
    x.lifo ?? '',
  ];
  let last = rest.length;
  while (last > 0 && rest[last - 1] === '') last--;
  return last === 0 ? tail : `${tail}|${rest.slice(0, last).join('|')}`;
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

/** What a worker needs to run an attempt: the header and the data. */
export interface ClaimedRecord extends RecordHeader {
  dataJson: string;
}

/** The time (epoch ms, Redis's clock) a fencing token `<lease id>.<ms>` was granted at. */
export function tokenTime(token: string): number {
  return Number(token.slice(token.lastIndexOf('.') + 1));
}

export function decodeClaimed(record: string): ClaimedRecord {
  const nl = record.indexOf('\n');
  // Completed in place (no copy): this runs for every claimed job.
  const h = readHeader(record.slice(0, nl)) as ClaimedRecord;
  // A claimed record never carries a result (retry strips it), so the data runs to the end.
  h.dataJson = record.slice(nl + 1);
  return h;
}

/**
 * The annex: the queue's hash (key `errors`, named before it held more) of what a job carries beside its
 * record, one field per part, named `id` + suffix (see src/scripts/includes/annex_fields.lua, which
 * lists the fields in this order): error lines, progress, logs, parents (dependsOn), and the payload
 * when it is too large to sit in the record.
 */
export const ANNEX_SUFFIX = Object.freeze({
  errorLines: '',
  progress: '\x01p',
  logs: '\x01l',
  parents: '\x01d',
  body: '\x01b',
  /** Durable step results (job.step): lines `name \t json`. */
  steps: '\x01s',
  /** Parents in other queues (dependsOn `{ queue, id }`): lines `queue \t partition \t id`. */
  crossParents: '\x01x',
  /** Those of them the job still waits for (blocked), same lines. */
  crossPending: '\x01y',
  /** Signals sent to the job (queue.signal) and not consumed yet: lines `name \t json`, oldest first. */
  signals: '\x01g',
  /** The signal a parked job waits for (job.waitForSignal): `name \t deadline` ('' = none). */
  signalWait: '\x01w',
  /** The children job.addChildren added: lines `queue \t id \t i or s` (i: ignoreDependencyFailure). */
  children: '\x01c',
  /** Their ends, as they arrive: lines `queue \t id \t c or x \t result json` (includes/child_ended.lua). */
  childEnds: '\x01k',
  /** The job that added this one as its child (job.addChildren): `queue \t id`. */
  flowParent: '\x01u',
});
export type AnnexPart = keyof typeof ANNEX_SUFFIX;
const ANNEX_PARTS = Object.keys(ANNEX_SUFFIX) as AnnexPart[];

/** The annex field of one part of a job. */
export function annexField(id: string, part: AnnexPart): string {
  return id + ANNEX_SUFFIX[part];
}

/** Every annex field of a job, in ANNEX_SUFFIX order (for an HMGET of several jobs: see annexOf). */
export function annexFields(id: string): string[] {
  return ANNEX_PARTS.map((part) => id + ANNEX_SUFFIX[part]);
}

/** The data part of a record whose payload is kept in the annex (see includes/body_marker.lua). */
export const BODY_MARKER = '\x01';

export type Annex = Record<AnnexPart, string | null>;

/** The annex of the i-th job from an HMGET of the annexFields of several jobs. */
export function annexOf(values: readonly (string | null)[], i: number): Annex {
  const out = {} as Annex;
  ANNEX_PARTS.forEach((part, j) => {
    out[part] = values[i * ANNEX_PARTS.length + j] ?? null;
  });
  return out;
}

/** The steps field of the annex (lines `name \t json`, json '' = undefined; a later line wins). */
export function decodeSteps(field: string): Map<string, unknown> {
  return new Map(decodeLines(field));
}

/** Lines `name \t json` (json '' = undefined), in order. */
function* decodeLines(field: string): Generator<[string, unknown]> {
  for (const line of field.split('\n')) {
    const tab = line.indexOf('\t');
    if (tab < 0) continue;
    const json = line.slice(tab + 1);
    yield [line.slice(0, tab), json === '' ? undefined : JSON.parse(json)];
  }
}

/** The children of job.addChildren (annex `children`), with their ends (annex `childEnds`). */
function childrenOf(field: string, ends: string): NonNullable<JobInfo['children']> {
  const ended = new Map<string, 'completed' | 'dead'>();
  for (const line of ends.split('\n')) {
    const [queue, id, outcome] = line.split('\t');
    if (outcome) ended.set(`${queue}\t${id}`, outcome === 'c' ? 'completed' : 'dead');
  }
  return field.split('\n').map((line) => {
    const [queue = '', id = ''] = line.split('\t');
    const end = ended.get(`${queue}\t${id}`);
    return end ? { queue, id, ended: end } : { queue, id };
  });
}

/** A parked job waits without a deadline at this due time (wait-signal.lua's NEVER). */
const NEVER = 8_640_000_000_000_000;

/**
 * The signal wait of a job (annex `signalWait`, `name \t deadline`), while it is parked for it: delayed
 * at the wait's due time (after a retry or changeDelay the note is stale: wait-signal.lua, signal.lua).
 */
function parkedFor(
  state: string,
  runAt: number,
  field: string | null,
): { name: string; deadline?: number } | undefined {
  if (state !== 'd' || !field) return undefined;
  const tab = field.lastIndexOf('\t');
  const deadline = field.slice(tab + 1) === '' ? undefined : Number(field.slice(tab + 1));
  if (runAt !== (deadline ?? NEVER)) return undefined;
  return deadline === undefined ? { name: field.slice(0, tab) } : { name: field.slice(0, tab), deadline };
}

export function decodeRecord<D, R>(id: string, record: string, annex: Annex): JobInfo<D, R> {
  const nl = record.indexOf('\n');
  const h = readHeader(record.slice(0, nl));
  const rest = record.slice(nl + 1);
  const nl2 = rest.indexOf('\n');
  const inline = nl2 === -1 ? rest : rest.slice(0, nl2);
  const dataJson = inline === BODY_MARKER ? (annex.body ?? 'null') : inline;
  const info: JobInfo<D, R> = {
    id,
    state: stateName(h.state) ?? 'waiting',
    data: JSON.parse(dataJson) as D,
    attempts: h.attempts,
    maxAttempts: h.maxAttempts,
    attemptsLeft: Math.max(0, h.maxAttempts - (h.attempts - h.base)),
    priority: h.priority,
    leaseMs: h.leaseMs,
    backoff: decodeBackoff(h.backoff),
    timeoutMs: h.timeoutMs,
    snoozes: h.snoozes,
    errors: annex.errorLines ? decodeErrorLines(annex.errorLines) : [],
    logs: annex.logs ? annex.logs.split('\n').map((l) => JSON.parse(l) as string) : [],
    dependsOn: annex.parents ? annex.parents.split('\n') : [],
    createdAt: h.createdAt,
    runAt: h.runAt,
  };
  if (annex.progress !== null) info.progress = JSON.parse(annex.progress);
  if (annex.steps) info.steps = Object.fromEntries(decodeSteps(annex.steps));
  const wait = parkedFor(h.state, h.runAt, annex.signalWait);
  if (wait) info.waitingForSignal = wait;
  if (annex.children) info.children = childrenOf(annex.children, annex.childEnds ?? '');
  if (annex.flowParent) {
    const tab = annex.flowParent.indexOf('\t');
    info.parent = { queue: annex.flowParent.slice(0, tab), id: annex.flowParent.slice(tab + 1) };
  }
  if (annex.signals) {
    info.pendingSignals = [...decodeLines(annex.signals)].map(([name, payload]) => ({ name, payload }));
  }
  if (annex.crossParents) {
    info.dependsOnQueues = annex.crossParents.split('\n').map((line) => {
      const [queue = '', , parentId = ''] = line.split('\t');
      return { queue, id: parentId };
    });
  }
  if (h.group !== '') info.group = h.group;
  if (h.name !== '') info.name = h.name;
  if (h.expireAt > 0) info.expireAt = h.expireAt;
  if (h.batch !== '') info.batch = h.batch;
  if (h.lifo) info.lifo = true;
  if (h.keep !== '') info.keep = { completed: !h.keep.includes('c'), dead: !h.keep.includes('x') };
  if (h.startedAt !== undefined) info.startedAt = h.startedAt;
  if (h.finishedAt !== undefined) info.finishedAt = h.finishedAt;
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
