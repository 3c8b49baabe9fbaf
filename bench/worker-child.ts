/**
 * A worker process of the benchmark, forked by the harness (through tsx). It loads one library's
 * adapter, waits for `start`, runs a worker, and reports `done` at the expected number of completions.
 *
 * Completions are counted from the library's own completion event, which each of the three emits
 * only after the completion is written to Redis (Surety: after complete.lua returns; BullMQ 'completed'
 * after moveToFinished; Bee-Queue 'succeeded' after its MULTI). The harness confirms afterwards, with
 * the library's own counters, that nothing is left waiting, delayed or active.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { loadAdapter } from './adapters/index.js';
import type { JobData, WorkerHandle } from './adapters/types.js';
import type { ChildConfig, ChildMessage, ParentMessage } from './child-protocol.js';
import { monoMs, wallMs } from './clock.js';
import { installCounter } from './command-counter.js';

const config = JSON.parse(process.argv[2] ?? '{}') as ChildConfig;
const counter = installCounter();

function send(message: ChildMessage): void {
  process.send?.(message);
}

// The harness is gone (crashed, or killed): never outlive it.
process.on('disconnect', () => process.exit(1));

const samples: number[] = [];
let early = 0;
let completed = 0;
let failedReported = false;
let cpuStart: NodeJS.CpuUsage | undefined;
let worker: WorkerHandle | undefined;
let profiler: Session | undefined;

/** Samples every 100 µs from `start` to `done` only (module loading and shutdown are left out). */
async function startProfile(): Promise<void> {
  if (!config.profileFile) return;
  profiler = new Session();
  profiler.connect();
  await profiler.post('Profiler.enable');
  await profiler.post('Profiler.setSamplingInterval', { interval: 100 });
  await profiler.post('Profiler.start');
}

async function stopProfile(): Promise<void> {
  if (!profiler || !config.profileFile) return;
  const { profile } = await profiler.post('Profiler.stop');
  writeFileSync(config.profileFile, JSON.stringify(profile));
  profiler.disconnect();
  profiler = undefined;
}

// Held jobs (mode `hold`) end together, when `close` lets them go, so the worker can close gracefully.
let releaseHeld: () => void = () => {};
const held = new Promise<void>((resolve) => {
  releaseHeld = resolve;
});

let holding = 0;

function record(data: JobData): void | Promise<void> {
  if (config.mode === 'hold') {
    if (++holding === config.concurrency) send({ type: 'holding' });
    return held;
  }
  if (config.mode === 'latency') {
    samples.push(monoMs() - (data.t as number));
  } else if (config.mode === 'delayed') {
    const due = data.due as number;
    samples.push(wallMs() - due);
    if (Date.now() < due) early++;
  }
}

function onCompleted(): void {
  completed++;
  if (completed !== config.expect) return;
  const at = monoMs();
  const cpu = process.cpuUsage(cpuStart);
  const count = counter.stop();
  stopProfile().catch(onFailed);
  send({
    type: 'done',
    at,
    completed,
    cpuUs: cpu.user + cpu.system,
    commands: count.commands,
    roundTrips: count.roundTrips,
    samples,
    early,
  });
}

/**
 * Redis's reply while it loads a dataset. The scale stage's DEBUG RELOAD (bench/scale.ts) gives it to
 * a holder's background calls for the second or so the reload takes (Bee-Queue and Surety each report
 * one as an `error` event; Surety's reads ERR_CONNECTION `worker <id>: LOADING ...`); the reload
 * done, a library that reports it and goes on has lost nothing, and the stage's counts check after
 * the reload is what shows the held set still held.
 */
const LOADING = /\bLOADING Redis is loading\b/;

function onFailed(error: unknown): void {
  if (failedReported) return;
  if (error instanceof Error && LOADING.test(error.message)) return;
  failedReported = true;
  send({ type: 'failed', message: error instanceof Error ? error.message : String(error) });
}

async function start(): Promise<void> {
  const adapter = await loadAdapter(config.lib);
  await startProfile();
  cpuStart = process.cpuUsage();
  counter.start();
  worker = await adapter.worker({
    server: config.server,
    queue: config.queue,
    concurrency: config.concurrency,
    delayed: config.mode === 'delayed',
    noPrefetch: config.mode === 'hold',
    ...(config.batchSize === undefined ? {} : { batchSize: config.batchSize }),
    processor: record,
    onCompleted,
    onFailed,
  });
  send({ type: 'started', at: monoMs() });
}

async function close(): Promise<void> {
  try {
    await stopProfile();
    releaseHeld();
    await worker?.close();
  } finally {
    send({ type: 'closed' });
    // Let the message flush, then leave (also writes a --cpu-prof profile).
    setTimeout(() => process.exit(0), 20);
  }
}

process.on('message', (message: ParentMessage) => {
  const run = message.type === 'start' ? start : close;
  run().catch(onFailed);
});

// Import the library before reporting ready, so module loading is not part of any measurement.
loadAdapter(config.lib).then(
  () => send({ type: 'ready' }),
  (err) => onFailed(err),
);
