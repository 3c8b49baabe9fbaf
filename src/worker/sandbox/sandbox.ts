/**
 * One sandbox: a worker thread or a forked child process that has loaded the processor module and
 * runs one job at a time (entry.ts on the other side). Calls from the sandboxed job to its Job
 * methods (RPC_METHODS) are answered here with the real Job, only while the run they name is in
 * progress (a late call is refused as a lost lease's is); thrown values come back as data and are
 * rebuilt as the library's error classes by the marker errorToData set (rebuildError). A sandbox that
 * exits, is killed, runs out of memory or fails to load its module is not used again (the pool starts
 * another). It fails the job it was running with SandboxError; a job it had not acknowledged yet
 * (`started`) fails with NotStartedError instead, which the pool gives to another sandbox.
 */

import { type ChildProcess, fork } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker as Thread } from 'node:worker_threads';
import * as errors from '../../errors.js';
import { attemptOf, type Job } from '../job.js';
import { expiredUnstarted, UnstartedError } from '../unstarted.js';
import {
  checkFromSandbox,
  errorToData,
  type FromSandbox,
  JOB_FIELDS,
  RPC_METHODS,
  rebuildError,
  type ToSandbox,
} from './protocol.js';

/** The library's error classes, by name: what rebuildError rebuilds. */
const CLASSES: Record<string, unknown> = { ...errors };

export type SandboxMode = 'thread' | 'process';

export interface SandboxConfig {
  /** Absolute path of the processor module. */
  module: string;
  mode: SandboxMode;
  /** Heap limit of each sandbox (MiB): resourceLimits.maxOldGenerationSizeMb, or --max-old-space-size. */
  memoryMb: number | undefined;
  /** Largest result accepted (the Worker's maxPayloadBytes), checked inside the sandbox. */
  maxPayloadBytes: number;
}

/**
 * The sandbox ended before it acknowledged the job given to it: the job did not run there (the
 * sandbox was already on its way out, e.g. its previous job's code called process.exit just after
 * returning). Not an outcome of the attempt: the pool runs the job in another sandbox.
 */
export class NotStartedError extends errors.SandboxError {}

/** What a refused late call answers: as the Job's own fenced methods do once the lease is gone. */
function refusedCall(method: string, jobId: string): { value: boolean } | Error {
  if (method === 'progress' || method === 'log') return { value: false };
  return new errors.LeaseExpiredError(
    `job ${jobId}: ${method} was called after its attempt ended (its processor had returned); refused`,
  );
}

/** The compiled entry (dist) or, from a source checkout, the TypeScript one run through tsx. */
const ENTRY_JS = fileURLToPath(new URL('./entry.js', import.meta.url));
const ENTRY = existsSync(ENTRY_JS) ? ENTRY_JS : fileURLToPath(new URL('./entry.ts', import.meta.url));
const ENTRY_IS_TS = ENTRY.endsWith('.ts');

/** A thread running the TypeScript entry: tsx's tsImport loads it (a thread has no --import). */
function threadBootstrap(): string {
  // The ESM build of tsx/esm/api (require.resolve would give the CommonJS one, which fails in a thread).
  const pkgFile = createRequire(import.meta.url).resolve('tsx/package.json');
  const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as {
    exports: Record<string, { import: { default: string } }>;
  };
  const api = new URL(pkg.exports['./esm/api']?.import.default ?? '', pathToFileURL(pkgFile)).href;
  const entry = pathToFileURL(ENTRY).href;
  return `import(${JSON.stringify(api)}).then((a) => a.tsImport(${JSON.stringify(entry)}, ${JSON.stringify(entry)}))`;
}

const RPC = new Set<string>(RPC_METHODS);

export class Sandbox {
  private readonly thread: Thread | null = null;
  private readonly child: ChildProcess | null = null;
  /** Resolves when the module is loaded; rejects with SandboxError if it fails to load or the sandbox dies first. */
  readonly ready: Promise<void>;
  private readyCallbacks!: { resolve: () => void; reject: (e: Error) => void };
  private current: {
    run: number;
    job: Job<unknown>;
    /** The sandbox acknowledged the run: from here on its death is this attempt's. */
    started: boolean;
    resolve: (v: unknown) => void;
    reject: (e: Error) => void;
  } | null = null;
  /** Runs given to this sandbox so far (the run number of the next is runs + 1). */
  private runs = 0;
  private dead: errors.SandboxError | null = null;
  private readonly exited: Promise<void>;
  /** An error event came before exit (a thread's out-of-memory or uncaught exception). */
  private lastError: string | null = null;
  private readonly maxPayloadBytes: number;

  constructor(config: SandboxConfig) {
    this.ready = new Promise((resolve, reject) => {
      this.readyCallbacks = { resolve, reject };
    });
    this.ready.catch(() => {}); // observed by run(); a sandbox may die before anyone waits
    this.maxPayloadBytes = config.maxPayloadBytes;
    const onMessage = (m: unknown) => this.onMessage(m);
    if (config.mode === 'thread') {
      const thread = new Thread(ENTRY_IS_TS ? threadBootstrap() : ENTRY, {
        eval: ENTRY_IS_TS,
        workerData: { module: config.module },
        ...(config.memoryMb ? { resourceLimits: { maxOldGenerationSizeMb: config.memoryMb } } : {}),
      });
      thread.on('message', onMessage);
      thread.on('error', (err) => {
        this.lastError = `${err.name}: ${err.message}${/OUT_OF_MEMORY$/.test(String((err as { code?: string }).code)) ? ' (out of memory)' : ''}`;
      });
      this.exited = new Promise((resolve) =>
        thread.once('exit', (code) => {
          this.onExit(this.lastError ?? `the sandbox thread exited with code ${code}`);
          resolve();
        }),
      );
      this.thread = thread;
    } else {
      const child = fork(ENTRY, [config.module], {
        execArgv: [
          ...(ENTRY_IS_TS ? ['--import', 'tsx'] : []),
          ...(config.memoryMb ? [`--max-old-space-size=${config.memoryMb}`] : []),
        ],
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      child.on('message', onMessage);
      child.on('error', (err) => {
        this.lastError = `${err.name}: ${err.message}`;
      });
      this.exited = new Promise((resolve) =>
        // 'close', not 'exit': it comes after the IPC channel is drained, so a message the sandbox
        // sent just before it died (its `started`) is read before its death is.
        child.once('close', (code, signal) => {
          this.onExit(
            signal
              ? `the sandbox process ${child.pid} was killed by ${signal}${signal === 'SIGABRT' ? ' (out of memory?)' : ''}`
              : `the sandbox process ${child.pid} exited with code ${code}${code === 134 ? ' (out of memory?)' : ''}`,
          );
          resolve();
        }),
      );
      this.child = child;
    }
  }

  /** The process id of a process sandbox (undefined for a thread). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  get alive(): boolean {
    return this.dead === null;
  }

  /** The sandbox has been given a job before (so a death now may be that job's doing). */
  get used(): boolean {
    return this.runs > 0;
  }

  /**
   * Runs one job in the sandbox; rejects with the processor's error (rebuilt), a SandboxError, or
   * NotStartedError when the sandbox ended before it took the job.
   */
  async run(job: Job<unknown>): Promise<unknown> {
    await this.ready;
    const run = ++this.runs;
    if (this.dead) throw new NotStartedError(this.dead.message);
    // Its expiry came while it waited for this sandbox, or its attempt was stopped (its lease lost, the
    // job cancelled) before a sandbox could take it: it must not start (the runner hands it back).
    // (A job whose start Redis already counted (Runner.confirm) has started there: it runs.)
    if (!attemptOf(job).startMarked && expiredUnstarted(job))
      throw new UnstartedError(`job ${job.id} expired before a sandbox took it`);
    if (job.signal.aborted) throw new UnstartedError(`job ${job.id} was stopped before a sandbox took it`);
    const fields: Record<string, unknown> = {};
    for (const f of JOB_FIELDS) fields[f] = (job as unknown as Record<string, unknown>)[f];
    const onAbort = () => this.send({ t: 'abort', run, reason: errorToData(job.signal.reason, CLASSES) });
    job.signal.addEventListener('abort', onAbort, { once: true });
    try {
      return await new Promise((resolve, reject) => {
        this.current = { run, job, started: false, resolve, reject };
        this.send({ t: 'run', run, job: fields, maxPayloadBytes: this.maxPayloadBytes });
        if (job.signal.aborted) onAbort();
      });
    } finally {
      this.current = null;
      job.signal.removeEventListener('abort', onAbort);
    }
  }

  /** Ends the sandbox (a job still running in it fails with SandboxError). Resolves once it has exited. */
  terminate(reason: string): Promise<void> {
    if (!this.dead) this.dead = new errors.SandboxError(reason);
    if (this.thread) void this.thread.terminate();
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGKILL');
    }
    return this.exited;
  }

  private send(m: ToSandbox): void {
    try {
      if (this.thread) this.thread.postMessage(m);
      else if (this.child?.connected) this.child.send(m);
    } catch {
      // the sandbox is going away: its exit fails the job
    }
  }

  private onMessage(raw: unknown): void {
    const m: FromSandbox | null = checkFromSandbox(raw);
    if (m === null) {
      // An outcome of the run in progress that is not well formed fails the attempt; anything else
      // that is not the protocol (a module posting its own messages to the parent) is ignored.
      const r = raw as { t?: unknown; run?: unknown } | null;
      const cur = this.current;
      if (cur && typeof r === 'object' && r?.t === 'done' && r.run === cur.run) {
        this.current = null;
        cur.reject(new errors.SandboxError('the sandbox sent an outcome that is not well formed'));
      }
      return;
    }
    if (m.t === 'ready') this.readyCallbacks.resolve();
    else if (m.t === 'loadFailed') {
      const err = new errors.SandboxError(`the processor module failed to load: ${m.error.message}`);
      this.dead = err;
      this.readyCallbacks.reject(err);
      void this.terminate(err.message);
    } else if (m.t === 'started') {
      if (this.current?.run === m.run && !this.current.started) {
        this.current.started = true;
        attemptOf(this.current.job).onStart?.(); // the attempt starts now: its start mark goes to Redis
      }
    } else if (m.t === 'done') {
      const cur = this.current;
      if (cur?.run !== m.run) return; // a run that already ended (failed by a timeout, say)
      this.current = null; // later calls of this run are refused at once
      if (!m.ok) cur.reject(rebuildError(m.error!, CLASSES));
      else {
        try {
          cur.resolve(m.json === '' ? undefined : JSON.parse(m.json!));
        } catch {
          cur.reject(new errors.SandboxError('the sandbox sent a result that is not JSON'));
        }
      }
    } else if (m.t === 'call') void this.answer(m);
  }

  /**
   * Calls the method of the running job's Job that the sandbox asked for, and sends back the result.
   * Only for the run in progress, its job and its attempt's token: a call from a job that already
   * returned is refused (progress and log answer false, the rest LeaseExpiredError), as the Job's own
   * fenced writes refuse a lost lease.
   */
  private async answer(m: Extract<FromSandbox, { t: 'call' }>): Promise<void> {
    const cur = this.current;
    const live = cur !== null && cur.run === m.run && cur.job.id === m.jobId && cur.job.token === m.token;
    try {
      if (!RPC.has(m.method)) throw new Error(`${m.method} is not a Job method a sandbox may call`);
      if (!live) {
        const refused = refusedCall(m.method, m.jobId);
        if (refused instanceof Error) throw refused;
        this.send({ t: 'reply', callId: m.callId, ok: true, value: refused.value });
        return;
      }
      const job = cur.job as unknown as Record<string, (...a: unknown[]) => unknown>;
      const value = await job[m.method]?.(...m.args);
      this.send({ t: 'reply', callId: m.callId, ok: true, value });
    } catch (err) {
      this.send({ t: 'reply', callId: m.callId, ok: false, error: errorToData(err, CLASSES) });
    }
  }

  private onExit(reason: string): void {
    const err = this.dead ?? new errors.SandboxError(reason);
    this.dead = err;
    this.readyCallbacks.reject(err);
    const cur = this.current;
    if (cur) cur.reject(cur.started ? err : new NotStartedError(err.message));
  }
}
