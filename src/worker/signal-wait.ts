/**
 * job.waitForSignal (docs/workflows.md#signals): the n-th wait of an attempt takes the oldest pending
 * signal of its name, or parks the job until one comes or its deadline passes, in one fenced script
 * (wait-signal.lua). What the wait ended with is a durable step (`~signal:<n>`), so a re-run of the
 * processor (a crash after the take, or later waits) replays it: a signal is consumed once.
 */
import {
  LeaseExpiredError,
  ParkedError,
  PayloadTooLargeError,
  SignalTimeoutError,
  ValidationError,
} from '../errors.js';
import type { WaitSignalAnswer } from '../scripts/replies.js';
import { checkSignalName } from '../validate.js';

/** What a wait needs of its job (the worker's Job): its steps, and how its attempt reaches Redis. */
export interface SignalWaiter {
  readonly id: string;
  readonly attempt: number;
  readStep(name: string): Promise<{ found: boolean; value?: unknown }>;
  /** wait-signal.lua for this attempt; undefined for a job built by hand (no worker). */
  readonly takeSignal:
    | ((name: string, n: number, timeoutMs: number) => Promise<WaitSignalAnswer>)
    | undefined;
  /** The job parked: its worker lets it go (the runner frees its slot). */
  parked(err: Error): void;
}

/** Step names of the n-th wait: its deadline and what it ended with. */
export const WAIT_STEP = '~wait:';
export const SIGNAL_STEP = '~signal:';
/** The longest a wait may last (as a snooze: 10 years). */
export const MAX_SIGNAL_TIMEOUT_MS = 10 * 365 * 24 * 3_600_000;

export function checkSignalTimeout(timeoutMs: unknown): number {
  if (timeoutMs === undefined) return 0;
  if (
    typeof timeoutMs !== 'number' ||
    !Number.isInteger(timeoutMs) ||
    timeoutMs < 1 ||
    timeoutMs > MAX_SIGNAL_TIMEOUT_MS
  )
    throw new ValidationError(
      `waitForSignal timeoutMs must be an integer from 1 to ${MAX_SIGNAL_TIMEOUT_MS}, got ${String(timeoutMs)}`,
    );
  return timeoutMs;
}

/** What a finished wait stored: the payload taken (u: it was undefined) or the timeout. */
type WaitRecord = { payload: unknown; u?: boolean } | { timedOut: true };

function ended(job: SignalWaiter, name: string, record: WaitRecord): unknown {
  if ('timedOut' in record) throw new SignalTimeoutError(job.id, name);
  return record.u ? undefined : record.payload;
}

export async function waitForSignal(
  job: SignalWaiter,
  n: number,
  name: string,
  opts: { timeoutMs?: number } | undefined,
): Promise<unknown> {
  const signalName = checkSignalName(name);
  const timeoutMs = checkSignalTimeout(opts?.timeoutMs);
  const done = await job.readStep(`${SIGNAL_STEP}${n}`);
  if (done.found) return ended(job, signalName, done.value as WaitRecord);
  if (!job.takeSignal)
    throw new ValidationError(`job ${job.id}: waitForSignal needs a Worker (this job was built by hand)`);
  const r = await job.takeSignal(signalName, n, timeoutMs);
  switch (r.outcome) {
    case 'taken':
      return r.value === '' ? undefined : JSON.parse(r.value);
    case 'timeout':
      throw new SignalTimeoutError(job.id, signalName);
    case 'stored':
      return ended(job, signalName, JSON.parse(r.value) as WaitRecord);
    case 'too_large':
      throw new PayloadTooLargeError(
        `job ${job.id}: the payload of signal ${signalName} would take its steps past 1 MiB; not taken`,
      );
    case 'parked': {
      const err = new ParkedError(job.id, `signal ${JSON.stringify(signalName)}`);
      job.parked(err);
      throw err;
    }
    default:
      throw new LeaseExpiredError(
        `job ${job.id}: the lease of attempt ${job.attempt} was lost; signal ${signalName} not taken`,
      );
  }
}
