/** Parent side of a worker child: fork it through tsx, wait for its messages (always with a deadline). */
import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ChildConfig, ChildMessage, DoneMessage } from './child-protocol.js';
import { track } from './cleanup.js';
import { withTimeout } from './clock.js';

const CHILD_FILE = fileURLToPath(new URL('./worker-child.ts', import.meta.url));

export interface SpawnOptions {
  /** Extra node flags for the child, e.g. --cpu-prof. */
  execArgv?: string[];
  doneTimeoutMs: number;
}

type Waiter = { type: ChildMessage['type']; resolve: (m: ChildMessage) => void };

export class WorkerProcess {
  private readonly proc: ChildProcess;
  private readonly inbox: ChildMessage[] = [];
  private waiters: Waiter[] = [];
  private failure: Error | null = null;
  private readonly untrack: () => void;

  private constructor(
    readonly config: ChildConfig,
    private readonly opts: SpawnOptions,
  ) {
    this.proc = fork(CHILD_FILE, [JSON.stringify(config)], {
      execArgv: ['--import', 'tsx', ...(opts.execArgv ?? [])],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const pid = this.proc.pid;
    this.untrack = track({
      stop: () => this.kill(),
      killSync: () => {
        if (pid !== undefined && this.proc.exitCode === null) process.kill(pid, 'SIGKILL');
      },
    });
    this.proc.on('message', (m: ChildMessage) => this.receive(m));
    this.proc.on('error', (err) => {
      this.failure ??= err;
      this.flushWaiters();
    });
    this.proc.on('exit', (code, signal) => {
      this.untrack();
      if (!this.failure) this.failure = new Error(`worker child exited (${code ?? signal})`);
      this.flushWaiters();
    });
  }

  /** Why the child failed or exited, if it did (a child nobody waits on reports nothing otherwise). */
  get failedWith(): Error | null {
    return this.failure;
  }

  static async spawn(config: ChildConfig, opts: SpawnOptions): Promise<WorkerProcess> {
    const child = new WorkerProcess(config, opts);
    try {
      await child.next('ready', 60_000);
    } catch (err) {
      await child.kill();
      throw err;
    }
    return child;
  }

  private receive(m: ChildMessage): void {
    if (m.type === 'failed') {
      this.failure ??= new Error(`${this.config.lib} worker: ${m.message}`);
      this.flushWaiters();
      return;
    }
    const i = this.waiters.findIndex((w) => w.type === m.type);
    if (i >= 0) this.waiters.splice(i, 1)[0]!.resolve(m);
    else this.inbox.push(m);
  }

  private flushWaiters(): void {
    // Waiters reject through their race with `failed()` below.
    for (const w of this.waiters.splice(0)) w.resolve({ type: 'failed', message: String(this.failure) });
  }

  private next(type: ChildMessage['type'], timeoutMs: number): Promise<ChildMessage> {
    const queued = this.inbox.findIndex((m) => m.type === type);
    if (queued >= 0) return Promise.resolve(this.inbox.splice(queued, 1)[0]!);
    if (this.failure) return Promise.reject(this.failure);
    const waiting = new Promise<ChildMessage>((resolve, reject) => {
      this.waiters.push({
        type,
        resolve: (m) => (m.type === 'failed' ? reject(this.failure) : resolve(m)),
      });
    });
    return withTimeout(waiting, timeoutMs, `${this.config.lib} worker child: '${type}'`);
  }

  /** Tells the child to start its worker; resolves once the worker is connected and fetching. */
  async start(): Promise<number> {
    this.proc.send({ type: 'start' });
    const m = await this.next('started', 30_000);
    return (m as { at: number }).at;
  }

  /** Mode `hold`: resolves once a processor runs in every slot (the child's report). */
  async holding(timeoutMs: number): Promise<void> {
    await this.next('holding', timeoutMs);
  }

  /** Resolves at `config.expect` completions (the child's report). */
  async done(): Promise<DoneMessage> {
    return (await this.next('done', this.opts.doneTimeoutMs)) as DoneMessage;
  }

  /** Graceful close of the worker, then the child exits; SIGKILL if it takes longer than 15 s. */
  async close(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.proc.once('exit', () => resolve()));
    this.proc.send({ type: 'close' });
    try {
      await withTimeout(exited, 15_000, `${this.config.lib} worker child exit`);
    } catch {
      await this.kill();
    }
  }

  async kill(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => this.proc.once('exit', () => resolve()));
    this.proc.kill('SIGKILL');
    await withTimeout(exited, 5_000, 'worker child SIGKILL').catch(() => {});
  }
}
