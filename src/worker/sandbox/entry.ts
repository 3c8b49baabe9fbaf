/**
 * Runs inside a sandbox (a worker thread or a forked process; see sandbox.ts): loads the processor
 * module named by the parent, then runs one job at a time. The job object carries the Job's plain
 * fields; its methods (RPC_METHODS) call the parent's Job over the message channel, and `step` is
 * built on readStep/writeStep as Job.step is. `signal` aborts when the parent's job.signal does.
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import * as errors from '../../errors.js';
import { runStep, type StepIO, sleepStep } from '../durable-steps.js';
import { loadProcessor } from './load-processor.js';
import { errorToData, type FromSandbox, RPC_METHODS, rebuildError, type ToSandbox } from './protocol.js';

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
let controller: AbortController | null = null;

function call(method: string, args: unknown[]): Promise<unknown> {
  const callId = nextCall++;
  return new Promise((resolve, reject) => {
    calls.set(callId, { resolve, reject });
    send({ t: 'call', callId, method, args });
  });
}

function sandboxJob(fields: Record<string, unknown>): Record<string, unknown> {
  controller = new AbortController();
  const job: Record<string, unknown> = { ...fields, signal: controller.signal };
  for (const m of RPC_METHODS) job[m] = (...args: unknown[]) => call(m, args);
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

async function main(): Promise<void> {
  let processor: (job: unknown) => unknown;
  try {
    processor = (await loadProcessor(spec, (m) => new Error(m))).processor as typeof processor;
  } catch (err) {
    send({ t: 'loadFailed', error: errorToData(err) });
    return;
  }
  onMessage((m) => {
    if (m.t === 'reply') {
      const pending = calls.get(m.callId);
      calls.delete(m.callId);
      if (m.ok) pending?.resolve(m.value);
      else pending?.reject(rebuildError(m.error ?? { name: 'Error', message: 'call failed' }, errors));
    } else if (m.t === 'abort') {
      controller?.abort(rebuildError(m.reason, errors));
    } else if (m.t === 'run') {
      Promise.resolve()
        .then(() => processor(sandboxJob(m.job)))
        .then(
          (value) => send({ t: 'done', ok: true, value }),
          (err) => send({ t: 'done', ok: false, error: errorToData(err) }),
        );
    }
  });
  send({ t: 'ready' });
}

void main();
