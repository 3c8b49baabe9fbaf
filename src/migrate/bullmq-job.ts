/**
 * One BullMQ job as the migration reads it (its hash, its log, a fingerprint of what was read) and what
 * it becomes here: the arguments of import-bullmq.lua, or the reason it stays in BullMQ. Pure but for
 * the read; the scripts check the fingerprint again before they take the job (includes/bullmq_take.lua).
 */
import { createHash } from 'node:crypto';
import { MAX_ATTEMPTS, MAX_LOG_LINE_CHARS, MAX_LOG_LINES, MAX_PRIORITY } from '../defaults.js';
import { SuretyError } from '../errors.js';
import { MAX_DELAY_MS } from '../options/backoff.js';
import { LIBRARY_JOB_DEFAULTS, resolveAddOptions } from '../options/job.js';
import type { RedisClient } from '../redis/client.js';
import { encodeOptionTail } from '../store/job-record.js';
import type { BackoffOptions, JobOptions } from '../types.js';
import { toJson } from '../validate.js';
import { type BullMQKeys, bullmqFlowKeys, bullmqJobKey, bullmqLogsKey } from './bullmq-keys.js';

/** The BullMQ states jobs are moved from. */
export type SourceState = 'waiting' | 'paused' | 'prioritized' | 'delayed' | 'failed';

/** Why a job stays in BullMQ. */
export type KeptReason =
  | 'flow' /** a parent or child in a BullMQ flow: its links cannot cross over */
  | 'scheduler-occurrence' /** the next run of a scheduler that stays in BullMQ */
  | 'id-taken' /** a job of this queue here already has its id */
  | 'invalid' /** its data or options cannot be a Surety job (see the detail) */
  | 'busy'; /** BullMQ kept changing it while the migration tried to take it */

export interface RawJob {
  id: string;
  /** The hash's fields as read, in one order, and the SHA-1 of their values (bullmq_take.lua). */
  fields: string[];
  fingerprint: string;
  values: Record<string, string>;
  logs: string[];
  /** It has keys only flow jobs have. */
  flow: boolean;
}

/** Reads jobs `ids` (null: no longer there), one pipeline for all. */
export async function readJobs(
  client: RedisClient,
  k: BullMQKeys,
  ids: readonly string[],
): Promise<(RawJob | null)[]> {
  const pipe = client.pipeline();
  for (const id of ids) {
    pipe.hgetallBuffer(bullmqJobKey(k, id));
    pipe.lrange(bullmqLogsKey(k, id), 0, -1);
    pipe.exists(...bullmqFlowKeys(k, id));
  }
  const replies = (await pipe.exec()) ?? [];
  return ids.map((id, i) => {
    const [hashErr, hash] = replies[i * 3] ?? [];
    const [logsErr, logs] = replies[i * 3 + 1] ?? [];
    const [flowErr, flowCount] = replies[i * 3 + 2] ?? [];
    const failed = hashErr ?? logsErr ?? flowErr;
    if (failed) throw failed;
    const h = hash as Record<string, Buffer>;
    const fields = Object.keys(h);
    if (fields.length === 0) return null;
    return {
      id,
      fields,
      fingerprint: fingerprint(fields.map((f) => h[f]!)),
      values: Object.fromEntries(fields.map((f) => [f, h[f]!.toString('utf8')])),
      logs: logs as string[],
      flow: (flowCount as number) > 0,
    };
  });
}

/** SHA-1 of each value as `<byte length>:<bytes>`, as bullmq_take.lua computes it with redis.sha1hex. */
export function fingerprint(values: readonly Buffer[]): string {
  const h = createHash('sha1');
  for (const v of values) {
    h.update(`${v.length}:`);
    h.update(v);
  }
  return h.digest('hex');
}

/** import-bullmq.lua's per-job arguments. */
export interface ImportArgs {
  id: string;
  state: 'w' | 'd' | 'x';
  created: number;
  due: number | '';
  finished: number | '';
  optionTail: string;
  data: string;
  attempts: number;
  errors: string;
  logs: string;
  progress: string;
}

export type Mapped =
  | {
      ok: true;
      args: ImportArgs /** BullMQ options that have no Surety equivalent, dropped. */;
      dropped: string[];
    }
  | { ok: false; reason: KeptReason; detail: string };

/** Options with no bearing once the job has moved (their effect is already in the job). */
const SPENT_OPTIONS = new Set([
  'delay',
  'jobId',
  'timestamp',
  'stackTraceLimit',
  'sizeLimit',
  'prevMillis',
  'repeat',
  'repeatJobKey',
]);

/** The options the mapping carries over. */
const MAPPED_OPTIONS = new Set([
  'attempts',
  'backoff',
  'priority',
  'lifo',
  'removeOnComplete',
  'removeOnFail',
]);

/** BullMQ's abbreviations in a stored job's options (its optsEncodeMap), spelled out in the report. */
const LONG_NAMES: Record<string, string> = {
  de: 'deduplication',
  fpof: 'failParentOnFailure',
  cpof: 'continueParentOnFailure',
  idof: 'ignoreDependencyOnFailure',
  kl: 'keepLogs',
  rdof: 'removeDependencyOnFailure',
};

/**
 * What job `raw`, read in BullMQ state `state` (`due`: a delayed job's due time from its score),
 * becomes here. Options mean what they meant in BullMQ: no `attempts` is one attempt, no `backoff`
 * retries at once, exponential backoff has no cap.
 */
export function mapJob(raw: RawJob, state: SourceState, due: number | null, maxPayloadBytes: number): Mapped {
  const v = raw.values;
  if (raw.flow || v.parentKey !== undefined) {
    return { ok: false, reason: 'flow', detail: 'in a BullMQ flow (parent or child): it finishes in BullMQ' };
  }
  let bullOpts: Record<string, unknown>;
  let data: unknown;
  try {
    bullOpts = v.opts ? (JSON.parse(v.opts) as Record<string, unknown>) : {};
    data = v.data === undefined ? {} : JSON.parse(v.data);
  } catch {
    return { ok: false, reason: 'invalid', detail: 'its data or options are not JSON' };
  }
  const dropped: string[] = [];
  const opts: JobOptions = {
    id: raw.id,
    ...mapRetries(bullOpts.attempts, bullOpts.backoff, v.priority ?? bullOpts.priority, dropped),
  };
  if (typeof v.name === 'string' && v.name !== '') opts.name = v.name;
  if (bullOpts.lifo === true) opts.lifo = true;
  const keep = mapRemoval(bullOpts, dropped);
  if (keep) opts.keep = keep;
  for (const key of Object.keys(bullOpts)) {
    if (!MAPPED_OPTIONS.has(key) && !SPENT_OPTIONS.has(key)) dropped.push(LONG_NAMES[key] ?? key);
  }
  let tail: string;
  let json: string;
  try {
    const o = resolveAddOptions(opts, LIBRARY_JOB_DEFAULTS);
    tail = encodeOptionTail(o, { name: o.name, keep: o.keep, lifo: o.lifo });
    json = toJson('job data', data, maxPayloadBytes);
  } catch (err) {
    return { ok: false, reason: 'invalid', detail: err instanceof SuretyError ? err.message : String(err) };
  }
  const attempts = Math.max(0, Math.trunc(Number(v.atm ?? v.attemptsMade ?? 0)) || 0);
  const created = Math.trunc(Number(v.timestamp)) || 0;
  return {
    ok: true,
    dropped,
    args: {
      id: raw.id,
      state: state === 'failed' ? 'x' : state === 'delayed' ? 'd' : 'w',
      created,
      due: state === 'delayed' && due !== null ? due : '',
      finished: state === 'failed' ? Math.trunc(Number(v.finishedOn)) || created : '',
      optionTail: tail,
      data: json,
      attempts,
      errors: errorLines(v, attempts, created),
      logs: raw.logs
        .slice(-MAX_LOG_LINES)
        .map((line) => JSON.stringify(line.slice(0, MAX_LOG_LINE_CHARS)))
        .join('\n'),
      progress: progressOf(v.progress),
    },
  };
}

/**
 * A job's (or a scheduler template's) `attempts`, `backoff` and `priority` as they mean in BullMQ: no
 * attempts is one attempt, no backoff a retry at once. Values past Surety's bounds are kept at the
 * bound and reported in `dropped`.
 */
export function mapRetries(
  attempts: unknown,
  backoff: unknown,
  priority: unknown,
  dropped: string[],
): Pick<JobOptions, 'maxAttempts' | 'backoff' | 'priority'> {
  const out: Pick<JobOptions, 'maxAttempts' | 'backoff' | 'priority'> = {
    maxAttempts: Math.min(Math.max(1, Math.trunc(Number(attempts ?? 1)) || 1), MAX_ATTEMPTS),
    backoff: mapBackoff(backoff, dropped),
  };
  if (Number(attempts) > MAX_ATTEMPTS) dropped.push(`attempts ${attempts} (kept as ${MAX_ATTEMPTS})`);
  const p = Math.trunc(Number(priority ?? 0)) || 0;
  if (p > MAX_PRIORITY) dropped.push(`priority ${p} (kept as ${MAX_PRIORITY})`);
  if (p !== 0) out.priority = Math.min(p, MAX_PRIORITY);
  return out;
}

/** BullMQ's `backoff` as it means there; an unknown form is reported in `dropped` and becomes no delay. */
export function mapBackoff(value: unknown, dropped: string[]): BackoffOptions {
  // BullMQ retries at once when no backoff is set.
  if (value === undefined || value === null) return { type: 'fixed', delayMs: 0 };
  if (typeof value === 'number') return { type: 'fixed', delayMs: clampDelay(value) };
  const b = value as { type?: unknown; delay?: unknown; jitter?: unknown };
  const delayMs = clampDelay(Number(b.delay ?? 0));
  const jitter = typeof b.jitter === 'number' && b.jitter > 0;
  if (b.type === 'fixed') return { type: 'fixed', delayMs, jitter };
  // BullMQ's exponential delay has no ceiling: 10 years is the longest delay a Surety job can have.
  if (b.type === 'exponential') return { type: 'exponential', delayMs, maxDelayMs: MAX_DELAY_MS, jitter };
  if (typeof b.type === 'string' && /^[A-Za-z0-9_-]{1,50}$/.test(b.type)) {
    // A custom strategy: the Worker's backoffStrategies must hold one of this name.
    return { type: 'custom', name: b.type, jitter: false };
  }
  dropped.push(`backoff ${JSON.stringify(value)}`);
  return { type: 'fixed', delayMs: 0 };
}

function clampDelay(ms: number): number {
  return Number.isFinite(ms) ? Math.min(Math.max(0, Math.trunc(ms)), MAX_DELAY_MS) : 0;
}

/** removeOnComplete / removeOnFail `true` map to `keep`; a count or an age is a queue-wide retention here. */
function mapRemoval(o: Record<string, unknown>, dropped: string[]): JobOptions['keep'] | undefined {
  const keep: { completed?: boolean; dead?: boolean } = {};
  if (o.removeOnComplete === true) keep.completed = false;
  else if (o.removeOnComplete !== undefined && o.removeOnComplete !== false) {
    dropped.push('removeOnComplete (a count or age: use the Worker retention)');
  }
  if (o.removeOnFail === true) keep.dead = false;
  else if (o.removeOnFail !== undefined && o.removeOnFail !== false) {
    dropped.push('removeOnFail (a count or age: use the Worker retention)');
  }
  return Object.keys(keep).length > 0 ? keep : undefined;
}

/**
 * BullMQ keeps the last failure's reason and a stack per failed attempt (the latest last); here each
 * failed attempt is an error line `at|attempt|json` (job-record.ts decodeErrorLines), the latest with
 * the reason as its message.
 */
function errorLines(v: Record<string, string>, attempts: number, created: number): string {
  let stacks: string[] = [];
  try {
    const parsed = v.stacktrace ? (JSON.parse(v.stacktrace) as unknown) : [];
    if (Array.isArray(parsed)) stacks = parsed.filter((s): s is string => typeof s === 'string');
  } catch {
    stacks = [];
  }
  const reason = v.failedReason;
  if (stacks.length === 0 && !reason) return '';
  const at = Math.trunc(Number(v.finishedOn ?? v.processedOn)) || created;
  const count = Math.max(stacks.length, reason ? 1 : 0);
  const lines: string[] = [];
  for (let i = 0; i < count; i++) {
    const stack = stacks[stacks.length - count + i];
    const latest = i === count - 1;
    const first = stack?.split('\n', 1)[0] ?? '';
    const colon = first.indexOf(': ');
    const name = colon > 0 && /^\w+$/.test(first.slice(0, colon)) ? first.slice(0, colon) : 'Error';
    const message = latest && reason ? reason : colon > 0 ? first.slice(colon + 2) : first;
    const attempt = Math.max(1, attempts - (count - 1 - i));
    const body: Record<string, string> = { name, message };
    if (stack) body.stack = stack;
    lines.push(`${at}|${attempt}|${JSON.stringify(body)}`);
  }
  return lines.join('\n');
}

function progressOf(value: string | undefined): string {
  if (value === undefined || value === '' || value === '0') return '';
  try {
    return JSON.stringify(JSON.parse(value));
  } catch {
    return '';
  }
}
