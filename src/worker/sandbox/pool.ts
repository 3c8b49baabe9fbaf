/**
 * The sandbox pool of a Worker given a processor module: up to `concurrency` sandboxes (sandbox.ts),
 * started on first need and reused, one job at a time each. A sandbox that dies while running a job
 * fails that job (SandboxError) and is dropped; the next job starts a new one. A job given to a
 * sandbox that dies before taking it (NotStartedError: the sandbox was already ending, e.g. its last
 * job's code called process.exit after returning) did not run: it is given to another sandbox, and
 * charged only when a sandbox that never ran a job dies before taking it (then the job itself, or the
 * module, is the likely cause, and the attempt fails rather than loop). An attempt aborted by the worker
 * (timeout, cancel, lost lease, close) whose processor ignores job.signal is given ABORT_GRACE_MS to
 * return, then its sandbox is ended, so it cannot hold a slot of the pool for ever.
 */
import { isAbsolute } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ClosedError, SandboxError, ValidationError } from '../../errors.js';
import type { Job } from '../job.js';
import { canLoadTypeScript, isTypeScript, noTypeScriptMessage } from './load-processor.js';
import { NotStartedError, Sandbox, type SandboxConfig } from './sandbox.js';

/** How long a sandbox may keep running an attempt the worker has aborted before it is ended. */
export const ABORT_GRACE_MS = 5_000;

export interface PoolConfig extends SandboxConfig {
  /** The most sandboxes at once: the worker's concurrency (read on each job, so it can change). */
  size(): number;
}

export class SandboxPool {
  private readonly all = new Set<Sandbox>();
  private readonly idle: Sandbox[] = [];
  private readonly waiters: (() => void)[] = [];
  private closed = false;

  /**
   * Refuses (ValidationError, at the Worker's construction) a TypeScript module that no sandbox could
   * load, rather than fail every attempt with the same load error.
   */
  constructor(private readonly config: PoolConfig) {
    if (isTypeScript(config.module) && !canLoadTypeScript())
      throw new ValidationError(noTypeScriptMessage(config.module));
  }

  /** Sandboxes alive now (idle or running a job). */
  get size(): number {
    return this.all.size;
  }

  /** Process ids of the process sandboxes alive now. */
  pids(): number[] {
    return [...this.all].map((s) => s.pid).filter((p): p is number => p !== undefined);
  }

  /** Runs `job` in a free sandbox (waiting for one when all are busy). */
  async run(job: Job<unknown>): Promise<unknown> {
    for (;;) {
      const sandbox = await this.acquire();
      try {
        return await this.runIn(sandbox, job);
      } catch (err) {
        // Only from a sandbox that had run a job before (runIn), which is now dropped: bounded by the
        // pool's size, since new sandboxes are charged instead.
        if (!(err instanceof NotStartedError) || job.signal.aborted) throw err;
      }
    }
  }

  private async runIn(sandbox: Sandbox, job: Job<unknown>): Promise<unknown> {
    const usedBefore = sandbox.used;
    let timer: NodeJS.Timeout | undefined;
    const onAbort = () => {
      timer = setTimeout(
        () => void sandbox.terminate(`the attempt was aborted and ran on for ${ABORT_GRACE_MS} ms`),
        ABORT_GRACE_MS,
      );
      timer.unref();
    };
    job.signal.addEventListener('abort', onAbort, { once: true });
    try {
      return await sandbox.run(job);
    } catch (err) {
      // A sandbox that never ran a job before this one: its death is charged to this attempt.
      if (err instanceof NotStartedError && !usedBefore) throw new SandboxError(err.message);
      throw err;
    } finally {
      clearTimeout(timer);
      job.signal.removeEventListener('abort', onAbort);
      this.release(sandbox);
    }
  }

  /** Ends every sandbox (after the worker's running jobs finished or were failed). */
  async close(): Promise<void> {
    this.closed = true;
    for (const wake of this.waiters.splice(0)) wake();
    await Promise.all([...this.all].map((s) => s.terminate('the worker closed')));
    this.all.clear();
    this.idle.length = 0;
  }

  private async acquire(): Promise<Sandbox> {
    for (;;) {
      if (this.closed) throw new ClosedError('sandbox pool');
      const idle = this.idle.pop();
      if (idle?.alive) return idle;
      if (idle) {
        this.all.delete(idle); // died while idle (killed from outside)
        continue;
      }
      if (this.all.size < Math.max(1, this.config.size())) {
        const sandbox = new Sandbox(this.config);
        this.all.add(sandbox);
        return sandbox;
      }
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  private release(sandbox: Sandbox): void {
    if (sandbox.alive && !this.closed) this.idle.push(sandbox);
    else {
      this.all.delete(sandbox);
      if (sandbox.alive) void sandbox.terminate('the worker closed');
    }
    this.waiters.shift()?.();
  }
}

/** The module path of a processor given as a URL or an absolute path string, else null. */
export function modulePath(processor: unknown): string | null {
  if (processor instanceof URL) return processor.protocol === 'file:' ? fileURLToPath(processor) : null;
  if (typeof processor !== 'string') return null;
  if (processor.startsWith('file:')) return fileURLToPath(processor);
  return isAbsolute(processor) ? processor : null;
}
