/**
 * What each script answers, typed, and the decoder that reads it. A script's reply is positional Lua
 * (a table of strings and integers); this is the one place that knows those positions, next to the
 * `-- Returns:` line of the script's header. Decoders never throw for an answer the script documents:
 * a refusal (NOT_FOUND, INVALID_STATE, STALE) is returned as a `Refusal` value, and the caller turns it
 * into a typed error with `refusalError` (errors.ts) when that is what it means for the caller.
 */

import { type JobStateName, stateName } from '../states.js';
import { parseRefusal, type Refusal } from './refusals.js';

type Flat = (string | number)[];

function flat(reply: unknown): Flat {
  return Array.isArray(reply) ? (reply as Flat) : [];
}

/** add.lua: one entry per row, in order (none for a checkOnly call). */
export interface AddedRow {
  id: string;
  isNew: boolean;
  /**
   * The job's state; for an outbox row an earlier relay added, whose job has since gone (state letter
   * `g`: ended and deleted, or removed; only the relay sends marks), 'completed'.
   */
  state: JobStateName;
}

export function decodeAdd(reply: unknown): AddedRow[] {
  const r = flat(reply);
  const out: AddedRow[] = [];
  for (let i = 0; i + 2 < r.length; i += 3) {
    const letter = String(r[i + 2]);
    const state = letter === 'g' ? 'completed' : (stateName(letter) ?? 'waiting');
    out.push({ id: String(r[i]), isNew: r[i + 1] === 1, state });
  }
  return out;
}

/** A job leased by a claim: its id and its record (see job-record.ts decodeClaimed). */
export interface ClaimedJob {
  id: string;
  record: string;
  /**
   * Set by the lane on a claim's reply: the claim's send time on the lane's clock and Redis's time in
   * the reply, so the lane can tell how long the job's lease surely lasts (worker/lane.ts).
   */
  sent?: { at: number; redisNow: number };
}

/** claim.lua. */
export interface ClaimAnswer {
  now: number;
  /** Due time of the first delayed job when fewer jobs than asked were claimed; null when none. */
  nextDue: number | null;
  paused: boolean;
  /**
   * > 0: the fetcher stands registered for that many handoffs (add-one.lua may lease it each of the
   * next plain jobs, up to that many); 0: not registered.
   */
  registered: number;
  /**
   * Jobs handed off with the registration this claim withdrew, whose message may not have arrived
   * (see worker/handoff.ts): not claimed by this call, and possibly already received.
   */
  replayed: ClaimedJob[];
  /** >0: the rate limiter holds claims back for this many ms. */
  limitedMs: number;
  /** The jobs leased to the caller, in claim order. */
  jobs: ClaimedJob[];
}

export function decodeClaim(reply: unknown): ClaimAnswer {
  const r = flat(reply);
  const jobs: ClaimedJob[] = [];
  // { now, nextDue, paused, limitedMs, registered, replayed, id, record, ... }: the last `replayed`
  // pairs are the replayed handoffs.
  const replayed: ClaimedJob[] = [];
  const firstReplayed = r.length - 2 * Number(r[5] ?? 0);
  for (let i = 6; i + 1 < r.length; i += 2) {
    (i < firstReplayed ? jobs : replayed).push({ id: String(r[i]), record: String(r[i + 1]) });
  }
  return {
    now: Number(r[0]),
    nextDue: r[1] === '' || r[1] === undefined ? null : Number(r[1]),
    paused: r[2] === 1,
    registered: Number(r[4] ?? 0),
    replayed,
    limitedMs: Number(r[3] ?? 0),
    jobs,
  };
}

/** complete.lua: the refused rows only, in row order (a batch may hold two attempts of one job). */
export interface RefusedRow {
  id: string;
  refusal: Refusal;
}

/** complete.lua: refused rows, and the start marks riding on the call whose lease is gone. */
export interface CompleteAnswer {
  refused: RefusedRow[];
  lostStarts: string[];
  /** The call queued notifications for children in other queues: the caller forwards them. */
  notified: boolean;
}

export function decodeComplete(reply: unknown): CompleteAnswer {
  const r = flat(reply);
  const refused: RefusedRow[] = [];
  const lostStarts: string[] = [];
  let notified = false;
  for (let i = 0; i + 1 < r.length; i += 2) {
    if (r[i + 1] === 'XNOTIFY') notified = true;
    else if (r[i + 1] === 'START_LOST') lostStarts.push(String(r[i]));
    else refused.push({ id: String(r[i]), refusal: refusalOf(r[i + 1]) });
  }
  return { refused, lostStarts, notified };
}

/** fail.lua: one entry per row, in order: where the job went, or why the failure was refused. */
export type FailedRow =
  | { id: string; outcome: 'waiting' | 'delayed' | 'dead' | 'snoozed' | 'limited' }
  | { id: string; refusal: Refusal };

export function decodeFail(reply: unknown): FailAnswer {
  const r = flat(reply);
  const out: FailedRow[] = [];
  let notified = false;
  for (let i = 0; i + 1 < r.length; i += 2) {
    const id = String(r[i]);
    const outcome = String(r[i + 1]);
    if (outcome === 'XNOTIFY') notified = true;
    else if (
      outcome === 'waiting' ||
      outcome === 'delayed' ||
      outcome === 'dead' ||
      outcome === 'snoozed' ||
      outcome === 'limited'
    )
      out.push({ id, outcome });
    else out.push({ id, refusal: refusalOf(outcome) });
  }
  return { rows: out, notified };
}

/**
 * fail.lua: `rows`, one per row sent; `notified`: the call queued notifications for children in other
 * queues (its `xnotify` outbox), which the caller forwards (src/queue/cross-queue.ts).
 */
export interface FailAnswer {
  rows: FailedRow[];
  notified: boolean;
}

/** cross-resolve.lua: what the notification did to the child. */
export interface CrossResolveAnswer {
  outcome: 'released' | 'counted' | 'failed' | 'none';
  /** The child died and its end queued notifications for children in other queues. */
  notified: boolean;
}

export function decodeCrossResolve(reply: unknown): CrossResolveAnswer {
  const r = flat(reply);
  return { outcome: String(r[0]) as CrossResolveAnswer['outcome'], notified: r[1] === 1 };
}

/** wait-signal.lua: the wait's outcome and its value (a payload's JSON, or the deadline when parked). */
export interface WaitSignalAnswer {
  outcome: 'taken' | 'timeout' | 'stored' | 'parked' | 'stale' | 'too_large';
  value: string;
}

export function decodeWaitSignal(reply: unknown): WaitSignalAnswer {
  const r = flat(reply);
  return { outcome: String(r[0]) as WaitSignalAnswer['outcome'], value: String(r[1] ?? '') };
}

/** wait-children.lua: ready (with the annex fields of the children and their ends), parked, or stale. */
export type WaitChildrenAnswer =
  | { outcome: 'ready'; children: string; ends: string }
  | { outcome: 'parked'; open: number }
  | { outcome: 'stale' };

export function decodeWaitChildren(reply: unknown): WaitChildrenAnswer {
  const r = flat(reply);
  if (r[0] === 'ready') return { outcome: 'ready', children: String(r[1] ?? ''), ends: String(r[2] ?? '') };
  if (r[0] === 'parked') return { outcome: 'parked', open: Number(r[1]) };
  return { outcome: 'stale' };
}

/** signal.lua: what became of the signal, and the job's state letter ('' when it does not exist). */
export interface SignalAnswer {
  outcome: 'kept' | 'woke' | 'ended' | 'missing' | 'full';
  state: string;
}

export function decodeSignal(reply: unknown): SignalAnswer {
  const r = flat(reply);
  return { outcome: String(r[0]) as SignalAnswer['outcome'], state: String(r[1] ?? '') };
}

/** extend.lua, start.lua (ids whose lease is gone), release.lua (ids handed back). */
export function decodeIds(reply: unknown): string[] {
  return flat(reply).map(String);
}

/** recover.lua. */
export interface RecoverAnswer {
  requeued: string[];
  dead: string[];
}

export function decodeRecover(reply: unknown): RecoverAnswer {
  const r = Array.isArray(reply) ? (reply as unknown[]) : [];
  return { requeued: decodeIds(r[0]), dead: decodeIds(r[1]) };
}

/** retry.lua, remove.lua, promote.lua, cancel.lua: null when done ('OK'), else the refusal. */
export function decodeJobChange(reply: unknown): Refusal | null {
  return reply === 'OK' ? null : refusalOf(reply);
}

/** clean.lua. */
export interface CleanAnswer {
  removed: number;
  more: boolean;
}

export function decodeClean(reply: unknown): CleanAnswer {
  const r = flat(reply);
  return { removed: Number(r[0] ?? 0), more: r[1] === 1 };
}

/** add-log.lua: the lines the job's log holds now, or the refusal (NOT_FOUND). */
export function decodeLogLines(reply: unknown): number | Refusal {
  return typeof reply === 'number' ? reply : refusalOf(reply);
}

/** drain.lua: jobs deleted by the call, and jobs still in the drained states after it. */
export interface DrainAnswer {
  removed: number;
  left: number;
}

export function decodeDrain(reply: unknown): DrainAnswer {
  const r = flat(reply);
  return { removed: Number(r[0] ?? 0), left: Number(r[1] ?? 0) };
}

/** obliterate.lua: the next SCAN cursor ('0': done), and the active jobs that refused the call (0: none). */
export interface ObliterateAnswer {
  cursor: string;
  active: number;
}

export function decodeObliterate(reply: unknown): ObliterateAnswer {
  const r = flat(reply);
  return { cursor: String(r[0] ?? '0'), active: Number(r[1] ?? 0) };
}

/** schedule.lua. */
export interface ScheduleAnswer {
  version: number;
  changed: boolean;
}

export function decodeSchedule(reply: unknown): ScheduleAnswer {
  const r = flat(reply);
  return { version: Number(r[0]), changed: r[1] === 1 };
}

/** partitions.lua: the recorded count (0: none yet) and whether the caller's count is accepted. */
export interface PartitionsAnswer {
  recorded: number;
  accepted: boolean;
}

export function decodePartitions(reply: unknown): PartitionsAnswer {
  const r = flat(reply);
  return { recorded: Number(r[0] ?? 0), accepted: r[1] === 1 };
}

/** progress.lua (false: lease lost), advance-schedule.lua (false: someone else advanced), unschedule.lua. */
export function decodeFlag(reply: unknown): boolean {
  return reply === 1;
}

/** move-in.lua (jobs written), heartbeat.lua (Redis time of the beat). */
export function decodeNumber(reply: unknown): number {
  return Number(reply);
}

/** read-steps.lua: the steps field ('' when none), null when the caller's lease is gone. */
export function decodeStepsField(reply: unknown): string | null {
  return typeof reply === 'string' ? reply : null;
}

/** set-paused.lua and scripts whose answer carries nothing. */
export function decodeNothing(_reply: unknown): void {}

function refusalOf(value: unknown): Refusal {
  const text = String(value);
  return parseRefusal(text) ?? { code: 'UNEXPECTED', text };
}

/** import-bullmq.lua: what became of one BullMQ job. */
export type ImportOutcome = 'moved' | 'exists' | 'changed' | 'gone';
/** import-copy.lua: the copy is here (now or from an earlier run), or the id belongs to another job. */
export type CopyOutcome = 'copied' | 'exists';
/** bullmq-take.lua. */
export type TakeOutcome = 'moved' | 'changed' | 'gone';
/** import-release.lua. */
export type ReleaseOutcome = 'released' | 'absent';
/** import-undo.lua. */
export type UndoOutcome = 'undone' | 'absent';

function oneOf<T extends string>(script: string, allowed: readonly T[]): (reply: unknown) => T {
  return (reply) => {
    if (typeof reply === 'string' && (allowed as readonly string[]).includes(reply)) return reply as T;
    throw new Error(`${script}.lua replied ${String(reply)}`);
  };
}

export const decodeImport = oneOf<ImportOutcome>('import-bullmq', ['moved', 'exists', 'changed', 'gone']);
export const decodeCopy = oneOf<CopyOutcome>('import-copy', ['copied', 'exists']);
export const decodeTake = oneOf<TakeOutcome>('bullmq-take', ['moved', 'changed', 'gone']);
export const decodeRelease = oneOf<ReleaseOutcome>('import-release', ['released', 'absent']);
export const decodeUndo = oneOf<UndoOutcome>('import-undo', ['undone', 'absent']);

/** bullmq-drop-scheduler.lua. */
export type SchedulerDrop = 'dropped' | 'changed' | 'gone';
export const decodeSchedulerDrop = oneOf<SchedulerDrop>('bullmq-drop-scheduler', [
  'dropped',
  'changed',
  'gone',
]);
