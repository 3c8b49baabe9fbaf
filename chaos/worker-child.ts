/**
 * One chaos worker process: a Surety Worker whose processor acts out the planned behaviour of each
 * attempt (behaviour.ts) and logs every execution to its own append-only file before returning.
 *
 * Started by pool.ts with `node --import tsx chaos/worker-child.ts <config JSON>` and an IPC channel:
 *   child -> parent  { type: 'ready', pid } once claiming has begun; { type: 'diag', ... } on request
 *   parent -> child  { type: 'close' } graceful close then exit 0; { type: 'diag' }
 * It exits at once when the parent goes away (IPC disconnect), so a dead harness leaves no workers.
 */
import { StaleJobError, Worker } from '../src/index.js';
import type { LaneDiagnostics } from '../src/worker/worker.js';
import { type ActEnv, actOut, type ChaosJob } from './act.js';
import { type ChaosResult, giveUpBackoff, type JobData } from './behaviour.js';
import { ExecLogWriter } from './exec-log.js';
import type { ParentData } from './producer.js';
import { throwingTracerProvider } from './tracer.js';

export interface ChildConfig {
  /** Where Redis is reached: the port of this slot's loopback proxy (chaos/network.ts). */
  port: number;
  queue: string;
  /** The parents queue (producer.ts ParentData): this process runs a plain Worker on it too. */
  parentsQueue?: string;
  logPath: string;
  seed: number;
  concurrency: number;
  prefetch: number | 'auto';
  /** The queue's default lease: an event-loop stall of a quarter of it is logged. */
  leaseMs: number;
  /** Retention of completed jobs: keep all, or 0 (deleted as they complete; the events stream then tells). */
  keepCompleted: 'all' | 0;
  recoverIntervalMs: number;
  heartbeatMs: number;
  pollIntervalMs: number;
  /** Run the processor as a module in sandboxes of this mode (chaos/sandbox-processor.ts), not as a function. */
  sandbox?: 'thread' | 'process';
  /** Give the worker a tracer provider that throws at random, seeded with this (chaos/tracer.ts). */
  tracerSeed?: number;
  /** Run as a batch worker (Worker option `batch`): each job of a batch acts out its own plan. */
  batch?: { size: number; minSize: number; waitMs: number };
}

/** Internal state of a Worker, read only to explain a stuck run in the report (never to drive the test). */
export interface WorkerDiag {
  pid: number;
  running: number;
  /** Jobs claimed and not started (Worker.diagnostics). */
  buffered: number;
  /** Jobs whose start is being confirmed before their processor runs (Worker.diagnostics). */
  confirming: number;
  batchesRunning: number;
  /** A batch worker's batch option. */
  batch?: { size: number; minSize: number; waitMs: number };
  /** Worker.diagnostics() per lane: leases held, claims and outcomes in flight. */
  lanes: LaneDiagnostics[];
  msSinceLastExecution: number | null;
}

const KEEP_ALL = { maxCount: 1_000_000, maxAgeMs: 86_400_000 };
/** With retention 0 the verdict reads completions from the events stream: keep all of it. */
const EVENTS_KEEP_ALL = { maxLen: 10_000_000 };
const MAX_ERROR_LINES = 2_000;

const cfg = JSON.parse(process.argv[2] ?? '{}') as ChildConfig;
const log = new ExecLogWriter(cfg.logPath);
let lastExecutionAt = 0;
let errorLines = 0;

const env: ActEnv = {
  seed: cfg.seed,
  pid: process.pid,
  log,
  sandbox: null,
  ...(cfg.batch ? { batch: true } : {}),
  onExecuted: () => {
    lastExecutionAt = Date.now();
  },
};
// The sandboxed module finds these in its environment (a thread and a forked process inherit it).
process.env.CHAOS_SEED = String(cfg.seed);
process.env.CHAOS_WORKER_PID = String(process.pid);
process.env.CHAOS_LOG = cfg.logPath;
if (cfg.sandbox) process.env.CHAOS_SANDBOX = cfg.sandbox;
const SANDBOX_MODULE = new URL('./sandbox-processor.ts', import.meta.url);

/**
 * A batch worker's processor: every job of the batch acts out its own plan at once, and the batch
 * returns one outcome per job (its result, or the Error it threw; an odd thrown value is wrapped in an
 * Error, as a batch can only fail a job with an Error). As a careful batch processor does, it stops
 * waiting for a job whose signal aborted (its timeout, a lost lease): a job that hangs past its
 * timeout ignoring the signal would otherwise hold its whole batch, and the groups of its siblings.
 */
const aborted = (job: ChaosJob) =>
  new Promise<Error>((resolve) => {
    const signal = (job as unknown as { signal: AbortSignal }).signal;
    const reason = () => resolve(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    if (signal.aborted) reason();
    else signal.addEventListener('abort', reason, { once: true });
  });
const actBatch = (jobs: ChaosJob[]) =>
  Promise.all(
    jobs.map((job) =>
      Promise.race([
        actOut(job, env).catch((err: unknown) =>
          err instanceof Error ? err : new Error(`odd value thrown: ${typeof err}`),
        ),
        aborted(job),
      ]),
    ),
  );

const processor = cfg.batch
  ? (actBatch as unknown as (jobs: unknown[]) => Promise<ChaosResult[]>)
  : cfg.sandbox
    ? SANDBOX_MODULE
    : (job: unknown) => actOut(job as ChaosJob, env);

const worker = new Worker<JobData, ChaosResult>(
  cfg.queue,
  processor as (job: unknown) => Promise<ChaosResult>,
  {
    // An options object (not a client), so Surety applies its own connection settings under test.
    connection: { host: '127.0.0.1', port: cfg.port, connectionName: `chaos-w-${process.pid}` },
    concurrency: cfg.concurrency,
    prefetch: cfg.prefetch,
    recoverIntervalMs: cfg.recoverIntervalMs,
    heartbeatMs: cfg.heartbeatMs,
    pollIntervalMs: cfg.pollIntervalMs,
    closeTimeoutMs: 2_000,
    backoffStrategies: { giveUp: giveUpBackoff },
    ...(cfg.sandbox ? { sandbox: cfg.sandbox } : {}),
    ...(cfg.batch ? { batch: cfg.batch } : {}),
    ...(cfg.tracerSeed === undefined
      ? {}
      : { telemetry: { tracerProvider: throwingTracerProvider(cfg.tracerSeed) } }),
    retention: { completed: cfg.keepCompleted === 0 ? { maxCount: 0 } : KEEP_ALL, dead: KEEP_ALL },
    ...(cfg.keepCompleted === 0 ? { events: EVENTS_KEEP_ALL } : {}),
  },
);

/**
 * The parents queue's Worker: a short run, and the failing kind throws. It also runs the flow children
 * of that queue (producer.ts ParentData with `fp`). Same connection settings and
 * name, through the same proxy, so every fault hits it too (clientKillOne finds its connections by
 * name); its errors are logged like the main Worker's.
 */
const PARENT_FAILURE = 'planned parent failure';
const parentsWorker =
  cfg.parentsQueue === undefined
    ? null
    : new Worker<ParentData>(
        cfg.parentsQueue,
        async (job) => {
          await new Promise((r) => setTimeout(r, 2 + (job.data.p % 20)));
          if (job.data.f) throw new Error(PARENT_FAILURE);
          // A flow child (chaos/flow-plan.ts): its result names it and its attempt, for its parent to get.
          if (job.data.fp !== undefined) return { c: job.id, a: job.attempt };
          return { p: job.data.p };
        },
        {
          connection: { host: '127.0.0.1', port: cfg.port, connectionName: `chaos-w-${process.pid}` },
          concurrency: 4,
          recoverIntervalMs: cfg.recoverIntervalMs,
          heartbeatMs: cfg.heartbeatMs,
          pollIntervalMs: cfg.pollIntervalMs,
          closeTimeoutMs: 2_000,
          retention: { completed: KEEP_ALL, dead: KEEP_ALL },
          // It writes to the main queue's stream too (a flow child's end releasing its parent there,
          // a parent's end settling its dependents): with retention 0, every writer keeps all of it.
          ...(cfg.keepCompleted === 0 ? { events: EVENTS_KEEP_ALL } : {}),
        },
      );
parentsWorker?.on('error', (err) => {
  if (!(err instanceof StaleJobError) && errorLines++ < MAX_ERROR_LINES)
    log.write({ t: 'e', code: err.code, msg: `parents: ${err.message.slice(0, 190)}`, at: Date.now() });
});

worker.on('active', (job) => log.write({ t: 'v', id: job.id, a: job.attempt, at: Date.now() }));
worker.on('completed', (job) => log.write({ t: 'c', id: job.id, a: job.attempt, at: Date.now() }));
worker.on('failed', (job, _err, outcome) => {
  if (outcome === 'dead') log.write({ t: 'd', id: job.id, a: job.attempt, at: Date.now() });
});
worker.on('leaseLost', (ids) => log.write({ t: 'l', ids, at: Date.now() }));
worker.on('error', (err) => {
  if (err instanceof StaleJobError) log.write({ t: 's', id: err.jobId, a: err.attempt });
  else if (errorLines++ < MAX_ERROR_LINES)
    log.write({ t: 'e', code: err.code, msg: err.message.slice(0, 200), at: Date.now() });
});

function crash(kind: string, err: unknown): never {
  log.write({ t: 'e', code: 'CRASH', msg: `${kind}: ${String(err).slice(0, 500)}`, at: Date.now() });
  console.error(kind, err);
  process.exit(70);
}
// Event-loop stalls: a 100 ms tick that comes late by a quarter of the lease or more is logged, so the
// verdict can tell duplicates caused by a blocked loop (a documented limit) from unexplained ones.
const TICK_MS = 100;
const stallMs = Math.max(250, Math.floor(cfg.leaseMs / 4));
let lastTick = Date.now();
setInterval(() => {
  const now = Date.now();
  if (now - lastTick - TICK_MS >= stallMs) log.write({ t: 'g', pid: process.pid, from: lastTick, to: now });
  lastTick = now;
}, TICK_MS).unref();

process.on('uncaughtException', (err) => crash('uncaughtException', err));
process.on('unhandledRejection', (err) => crash('unhandledRejection', err));
process.on('disconnect', () => process.exit(0));

process.on('message', (msg: { type?: string }) => {
  if (msg.type === 'close') {
    Promise.all([worker.close({ timeoutMs: 2_000 }), parentsWorker?.close({ timeoutMs: 2_000 })]).then(
      () => process.exit(0),
      () => process.exit(0),
    );
  } else if (msg.type === 'diag') {
    process.send?.({ type: 'diag', diag: diagnose() });
  }
});

// The docs promise that workers retry connection trouble by themselves; a Worker whose start() rejects
// never claims anything, so this process is useless: exit and let the harness report it.
Promise.all([worker.start(), parentsWorker?.start()]).then(
  () => process.send?.({ type: 'ready', pid: process.pid }),
  (err) => crash('Worker.start() rejected, the worker will never claim a job', err),
);

function diagnose(): WorkerDiag {
  const d = worker.diagnostics();
  return {
    pid: process.pid,
    running: d.running,
    buffered: d.buffered,
    confirming: d.confirming,
    batchesRunning: d.batchesRunning,
    ...(cfg.batch ? { batch: cfg.batch } : {}),
    lanes: d.lanes,
    msSinceLastExecution: lastExecutionAt === 0 ? null : Date.now() - lastExecutionAt,
  };
}
