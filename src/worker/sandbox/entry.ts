/**
 * Runs inside a sandbox (a worker thread or a forked process; see sandbox.ts): loads the processor
 * module named by the parent, then runs one job at a time. The job object carries the Job's plain
 * fields; its methods (RPC_METHODS) call the parent's Job over the message channel, tagged with the
 * run, the job's id and its attempt's token, so a call made after the job returned is refused by the
 * parent (protocol.ts). `step` is built on readStep/writeStep as Job.step is. `signal` aborts when the
 * parent's job.signal does. The result is checked here as the worker checks a function processor's
 * (toJson), so a value that is not JSON fails the attempt the same way in every mode.
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { resultError } from '../../error-normaliser.js';
import * as errors from '../../errors.js';
import { toJson } from '../../validate.js';
import { runStep, type StepIO, sleepStep } from '../durable-steps.js';
import { loadProcessor } from './load-processor.js';
import { errorToData, type FromSandbox, RPC_METHODS, rebuildError, type ToSandbox } from './protocol.js';

/** The library's error classes, by name: what errorToData marks and rebuildError rebuilds. */
const CLASSES: Record<string, unknown> = { ...errors };

const port = isMainThread ? null : parentPort;
const send = (m: FromSandbox): void => {
  if (port) port.postMessage(m);
  else process.send?.(m);
};
const onMessage = (fn: (m: ToSandbox) => void): void => {
  if (port) port.on('message', fn);
  else process.on('message', (m) => fn(m as ToSandbox));
};
// A forked sandbox whose worker went away (crashed, SIGKILL) exits instead of staying orphaned.
if (!port) process.on('disconnect', () => process.exit(0));

const spec: string = port ? (workerData as { module: string }).module : (process.argv[2] ?? '');
const calls = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
let nextCall = 1;
/** The run in progress and its job.signal's controller. */
let current: { run: number; controller: AbortController } | null = null;

function sandboxJob(run: number, fields: Record<string, unknown>): Record<string, unknown> {
  const controller = new AbortController();
  current = { run, controller };
  const jobId = String(fields.id);
  const token = String(fields.token);
  const call = (method: string, args: unknown[]): Promise<unknown> => {
    const callId = nextCall++;
    return new Promise((resolve, reject) => {
      calls.set(callId, { resolve, reject });
      send({ t: 'call', callId, run, jobId, token, method, args });
    });
  };
  const job: Record<string, unknown> = { ...fields, signal: controller.signal };
  for (const m of RPC_METHODS) job[m] = (...args: unknown[]) => call(m, args);
  // As Job.updateData: the new data is this job's data once the worker stored it.
  job.updateData = async (data: unknown) => {
    await call('updateData', [data]);
    job.data = data;
  };
  // The same step and sleep logic as a worker's Job (durable-steps.ts), over the channel.
  const io: StepIO = {
    readStep: (name) => call('readStep', [name]) as Promise<{ found: boolean; value?: unknown }>,
    writeStep: (name, value) => call('writeStep', [name, value]) as Promise<boolean>,
  };
  let sleeps = 0;
  job.step = (name: string, fn: () => unknown) => runStep(io, name, fn);
  job.sleep = (ms: number) => sleepStep(io, sleeps++, ms);
  return job;
}

/** Runs the processor for run `run`; its outcome is sent as `done` (never throws). */
function runJob(processor: (job: unknown) => unknown, m: Extract<ToSandbox, { t: 'run' }>): void {
  const job = sandboxJob(m.run, m.job);
  const fail = (err: unknown) => send({ t: 'done', run: m.run, ok: false, error: errorToData(err, CLASSES) });
  // Acknowledged before the processor is called: a sandbox that dies before this reaches the worker
  // did not run the job, and the worker gives it to another sandbox instead of failing it.
  send({ t: 'started', run: m.run });
  Promise.resolve()
    .then(() => processor(job))
    .then((value) => {
      let json: string;
      try {
        json = value === undefined ? '' : toJson(`result of job ${job.id}`, value, m.maxPayloadBytes);
      } catch (err) {
        fail(resultError(String(job.id), err));
        return;
      }
      send({ t: 'done', run: m.run, ok: true, json });
    }, fail)
    .catch(fail); // a send that threw (the channel closing): the worker sees the exit
}

async function main(): Promise<void> {
  let processor: (job: unknown) => unknown;
  try {
    processor = (await loadProcessor(spec, (m) => new Error(m))).processor as typeof processor;
  } catch (err) {
    send({ t: 'loadFailed', error: errorToData(err, CLASSES) });
    return;
  }
  onMessage((m) => {
    if (m.t === 'reply') {
      const pending = calls.get(m.callId);
      calls.delete(m.callId);
      if (m.ok) pending?.resolve(m.value);
      else pending?.reject(rebuildError(m.error ?? { name: 'Error', message: 'call failed' }, CLASSES));
    } else if (m.t === 'abort') {
      if (current?.run === m.run) current.controller.abort(rebuildError(m.reason, CLASSES));
    } else if (m.t === 'run') {
      // Started at the end of this turn of the event loop: whatever the last job's code scheduled for
      // the turn it returned in (process.exit from a setImmediate, nextTick or microtask) runs first,
      // so a sandbox ending that way dies before it acknowledges this job, which then goes elsewhere.
      // (The job can arrive in the same turn: its result sent from a timer, the next job read in the
      // poll phase that follows.)
      setImmediate(() => runJob(processor, m));
    }
  });
  send({ t: 'ready' });
}

void main();
