/**
 * One sandbox: a worker thread or a forked child process that has loaded the processor module and
 * runs one job at a time (entry.ts on the other side). Calls from the sandboxed job to its Job
 * methods (RPC_METHODS) are answered here with the real Job; thrown values come back as data and are
 * rebuilt as the library's error classes by name (rebuildError). A sandbox that exits, is killed,
 * runs out of memory or fails to load its module fails the job it was running with SandboxError and
 * is not used again (the pool starts another).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker as Thread } from 'node:worker_threads';
import * as errors from '../../errors.js';
import type { Job } from '../job.js';
import {
  errorToData,
  type FromSandbox,
  JOB_FIELDS,
  RPC_METHODS,
  rebuildError,
  type ToSandbox,
} from './protocol.js';
import { SandboxError } from './sandbox-error.js';

export type SandboxMode = 'thread' | 'process';

export interface SandboxConfig {
  /** Absolute path of the processor module. */
  module: string;
  mode: SandboxMode;
  /** Heap limit of each sandbox (MiB): resourceLimits.maxOldGenerationSizeMb, or --max-old-space-size. */
  memoryMb: number | undefined;
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
  private current: { job: Job<unknown>; resolve: (v: unknown) => void; reject: (e: Error) => void } | null =
    null;
  private dead: SandboxError | null = null;
  private readonly exited: Promise<void>;
  /** An error event came before exit (a thread's out-of-memory or uncaught exception). */
  private lastError: string | null = null;

  constructor(config: SandboxConfig) {
    this.ready = new Promise((resolve, reject) => {
      this.readyCallbacks = { resolve, reject };
    });
    this.ready.catch(() => {}); // observed by run(); a sandbox may die before anyone waits
    const onMessage = (m: FromSandbox) => this.onMessage(m);
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
        child.once('exit', (code, signal) => {
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

  /** Runs one job in the sandbox; rejects with the processor's error (rebuilt) or a SandboxError. */
  async run(job: Job<unknown>): Promise<unknown> {
    await this.ready;
    if (this.dead) throw this.dead;
    const fields: Record<string, unknown> = {};
    for (const f of JOB_FIELDS) fields[f] = (job as unknown as Record<string, unknown>)[f];
    const onAbort = () => this.send({ t: 'abort', reason: errorToData(job.signal.reason) });
    job.signal.addEventListener('abort', onAbort, { once: true });
    try {
      return await new Promise((resolve, reject) => {
        this.current = { job, resolve, reject };
        this.send({ t: 'run', job: fields });
        if (job.signal.aborted) onAbort();
      });
    } finally {
      this.current = null;
      job.signal.removeEventListener('abort', onAbort);
    }
  }

  /** Ends the sandbox (a job still running in it fails with SandboxError). Resolves once it has exited. */
  terminate(reason: string): Promise<void> {
    if (!this.dead) this.dead = new SandboxError(reason);
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

  private onMessage(m: FromSandbox): void {
    if (m.t === 'ready') this.readyCallbacks.resolve();
    else if (m.t === 'loadFailed') {
      const err = new SandboxError(`the processor module failed to load: ${m.error.message}`);
      this.dead = err;
      this.readyCallbacks.reject(err);
      void this.terminate(err.message);
    } else if (m.t === 'done') {
      const cur = this.current;
      if (!cur) return;
      if (m.ok) cur.resolve(m.value);
      else cur.reject(rebuildError(m.error ?? { name: 'Error', message: 'failed' }, errors));
    } else if (m.t === 'call') void this.answer(m.callId, m.method, m.args);
  }

  /** Calls method `method` of the running job's Job with the sandbox's arguments and sends back the result. */
  private async answer(callId: number, method: string, args: unknown[]): Promise<void> {
    const job = this.current?.job as unknown as Record<string, (...a: unknown[]) => unknown> | undefined;
    try {
      if (!job) throw new Error(`${method}: no job is running in this sandbox`);
      if (!RPC.has(method) || typeof job[method] !== 'function')
        throw new Error(`${method} is not a Job method a sandbox may call`);
      const value = await job[method]?.(...(Array.isArray(args) ? args : []));
      this.send({ t: 'reply', callId, ok: true, value });
    } catch (err) {
      this.send({ t: 'reply', callId, ok: false, error: errorToData(err) });
    }
  }

  private onExit(reason: string): void {
    const err = this.dead ?? new SandboxError(reason);
    this.dead = err;
    this.readyCallbacks.reject(err);
    this.current?.reject(err);
  }
}
