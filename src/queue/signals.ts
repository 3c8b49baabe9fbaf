/**
 * queue.signal (docs/workflows.md#signals): a message for one job, which a job.waitForSignal of its
 * name takes. One script (signal.lua) keeps it with the job and, if the job is parked waiting for that
 * name, makes it waiting again.
 */
import { callScript, scripts } from '../scripts/specs.js';
import { type JobStateName, stateName } from '../states.js';
import { checkJobId, checkSignalName, toJson } from '../validate.js';
import { jobPartition } from './admin.js';
import type { QueueContext } from './context.js';

/** The most signals one job keeps unconsumed; more are refused (`reason: 'full'`). */
export const MAX_PENDING_SIGNALS = 1_000;

export interface SignalResult {
  /** The job keeps the signal until a wait for its name takes it. */
  delivered: boolean;
  /** The job's state after the signal ('missing' when no such job exists). */
  state: JobStateName | 'missing';
  /** The job was parked waiting for this name, and is waiting to run again now. */
  woke: boolean;
  /** Why it was not delivered: the job has ended, does not exist, or keeps 1 000 unconsumed signals. */
  reason?: 'ended' | 'missing' | 'full';
}

export async function sendSignal(
  ctx: QueueContext,
  id: string,
  name: string,
  payload: unknown,
): Promise<SignalResult> {
  checkJobId(id);
  const signalName = checkSignalName(name);
  const json =
    payload === undefined
      ? ''
      : toJson(`payload of signal ${signalName}`, payload, ctx.options.maxPayloadBytes);
  const k = await jobPartition(ctx, id);
  const r = await callScript(ctx.client, scripts.signal, k, {
    now: '',
    id,
    name: signalName,
    payload: json,
    maxPending: MAX_PENDING_SIGNALS,
    wakeChannel: k.wakeChannel,
    eventsMaxLen: ctx.options.eventsMaxLen,
  });
  const state = stateName(r.state) ?? 'missing';
  if (r.outcome === 'kept' || r.outcome === 'woke')
    return { delivered: true, state, woke: r.outcome === 'woke' };
  return { delivered: false, state, woke: false, reason: r.outcome };
}
