/**
 * The worker processes: `size` slots, each running one chaos/worker-child.ts process. A process killed
 * by the fault injector is replaced in its slot; one that exits on its own is a crash (reported as a
 * violation) and is replaced too, so the run can finish and show the damage.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ChildConfig, WorkerDiag } from './worker-child.js';

export interface WorkerProc {
  /** Spawn counter (names the log files). */
  n: number;
  slot: number;
  /** Its sandbox mode and whether it has a throwing tracer (reported). */
  role: Partial<ChildConfig>;
  pid: number;
  logPath: string;
  errPath: string;
  proc: ChildProcess;
  startedAt: number;
  exitedAt?: number;
  /** Set before the harness kills it, so the exit is not taken for a crash. */
  killedByHarness: boolean;
  stopped: boolean;
  crash?: { code: number | null; signal: string | null; stderrTail: string };
}

const CHILD_FILE = new URL('./worker-child.ts', import.meta.url).pathname;
const READY_TIMEOUT_MS = 45_000;

export class WorkerPool {
  readonly all: WorkerProc[] = [];
  private readonly slots: (WorkerProc | null)[];
  private spawned = 0;
  private closing = false;

  constructor(
    size: number,
    private readonly runDir: string,
    private readonly base: Omit<ChildConfig, 'logPath' | 'port'>,
    /** The port a slot's worker reaches Redis on (its proxy's). */
    private readonly portOf: (slot: number) => number,
    /** What sets a slot's worker apart (sandbox mode, throwing tracer), per spawn `n` (config.ts roleOf). */
    private readonly roleOf: (slot: number, n: number) => Partial<ChildConfig> = () => ({}),
  ) {
    this.slots = new Array<WorkerProc | null>(size).fill(null);
  }

  get size(): number {
    return this.slots.length;
  }

  /** Starts every slot and resolves once all are claiming. */
  async start(): Promise<void> {
    await Promise.all(this.slots.map((_, slot) => this.spawn(slot).ready));
  }

  current(slot: number): WorkerProc | null {
    return this.slots[slot] ?? null;
  }

  live(): WorkerProc[] {
    return this.slots.filter((w): w is WorkerProc => w !== null && w.exitedAt === undefined);
  }

  private spawn(slot: number): { w: WorkerProc; ready: Promise<void> } {
    const n = ++this.spawned;
    const logPath = join(this.runDir, `w${n}.log`);
    const errPath = join(this.runDir, `w${n}.stderr`);
    const role = this.roleOf(slot, n);
    const fd = openSync(errPath, 'a');
    const proc = fork(
      CHILD_FILE,
      [
        JSON.stringify({
          ...this.base,
          ...role,
          port: this.portOf(slot),
          logPath,
        } satisfies ChildConfig),
      ],
      {
        execArgv: ['--import', 'tsx'],
        stdio: ['ignore', fd, fd, 'ipc'],
      },
    );
    closeSync(fd);
    const w: WorkerProc = {
      n,
      slot,
      role,
      pid: proc.pid ?? -1,
      logPath,
      errPath,
      proc,
      startedAt: Date.now(),
      killedByHarness: false,
      stopped: false,
    };
    this.all.push(w);
    this.slots[slot] = w;
    const ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`worker w${n} (pid ${w.pid}) not ready after ${READY_TIMEOUT_MS} ms`)),
        READY_TIMEOUT_MS,
      );
      proc.on('message', (m: { type?: string }) => {
        if (m.type === 'ready') {
          clearTimeout(timer);
          resolve();
        }
      });
      proc.once('exit', () => {
        clearTimeout(timer);
        resolve(); // a crash before ready is reported by onExit; do not fail start() twice
      });
    });
    proc.once('exit', (code, signal) => this.onExit(w, code, signal));
    return { w, ready };
  }

  private onExit(w: WorkerProc, code: number | null, signal: NodeJS.Signals | null): void {
    w.exitedAt = Date.now();
    if (w.killedByHarness || this.closing) return;
    const text = existsSync(w.errPath) ? readFileSync(w.errPath, 'utf8') : '';
    w.crash = { code, signal, stderrTail: text.slice(-1_500) };
    if (this.slots[w.slot] === w) this.spawn(w.slot);
  }

  /** kill -9 of the slot's process, then a replacement (not awaited: it starts while chaos goes on). */
  async kill(slot: number): Promise<WorkerProc | null> {
    const w = this.current(slot);
    if (!w || w.exitedAt !== undefined) return null;
    w.killedByHarness = true;
    const exited = new Promise((r) => w.proc.once('exit', r));
    w.proc.kill('SIGKILL');
    await exited;
    if (!this.closing) this.spawn(slot);
    return w;
  }

  signal(w: WorkerProc, sig: 'SIGSTOP' | 'SIGCONT'): boolean {
    if (w.exitedAt !== undefined) return false;
    try {
      process.kill(w.pid, sig);
      w.stopped = sig === 'SIGSTOP';
      return true;
    } catch {
      return false;
    }
  }

  /** Asks every live worker for its internal state (for the report of a stuck run). */
  async diagnose(timeoutMs = 2_000): Promise<WorkerDiag[]> {
    const asks = this.live().map(
      (w) =>
        new Promise<WorkerDiag | null>((resolve) => {
          const timer = setTimeout(() => resolve(null), timeoutMs);
          const onMsg = (m: { type?: string; diag?: WorkerDiag }) => {
            if (m.type !== 'diag' || !m.diag) return;
            clearTimeout(timer);
            w.proc.off('message', onMsg);
            resolve(m.diag);
          };
          w.proc.on('message', onMsg);
          w.proc.send({ type: 'diag' }, (err) => {
            if (err) resolve(null);
          });
        }),
    );
    return (await Promise.all(asks)).filter((d): d is WorkerDiag => d !== null);
  }

  /** Graceful close of every live worker (each writes its last outcomes), then SIGKILL of stragglers. */
  async close(timeoutMs: number): Promise<void> {
    this.closing = true;
    const live = this.live();
    for (const w of live) {
      if (w.stopped) this.signal(w, 'SIGCONT');
      w.proc.send({ type: 'close' }, () => {});
    }
    const deadline = Date.now() + timeoutMs;
    await Promise.all(
      live.map(async (w) => {
        while (w.exitedAt === undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      }),
    );
    this.killAll();
  }

  /** Synchronous last resort (exit handlers): SIGKILL everything still alive. */
  killAll(): void {
    this.closing = true;
    for (const w of this.all) {
      if (w.exitedAt !== undefined) continue;
      w.killedByHarness = true;
      try {
        process.kill(w.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}
