/**
 * A redis-server (or redis-sentinel) process with arguments of the test's choosing, for setups that
 * EmbeddedRedis does not cover: a TLS-only server (no plain port to PING) and sentinels (a config
 * file plus --sentinel). Ready when the caller's probe says so; killed with SIGKILL.
 */
import { type ChildProcess, spawn } from 'node:child_process';

export class RedisProcess {
  private proc: ChildProcess | null = null;
  private output = '';

  constructor(
    readonly label: string,
    private readonly args: string[],
  ) {}

  get running(): boolean {
    return this.proc !== null && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** Spawns redis-server and polls `ready` until it resolves true (or the process exits, or the deadline). */
  async start(ready: () => Promise<boolean>, timeoutMs = 10_000): Promise<this> {
    this.output = '';
    const proc = spawn('redis-server', this.args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    const keep = (d: Buffer) => {
      this.output = (this.output + d.toString()).slice(-20_000);
    };
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (!this.running) throw new Error(`${this.label} exited: ${this.lastLines()}`);
      if (await ready()) return this;
      if (Date.now() > deadline) {
        await this.kill();
        throw new Error(`${this.label} was not ready within ${timeoutMs} ms: ${this.lastLines()}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  lastLines(n = 5): string {
    return this.output.trim().split('\n').slice(-n).join(' | ');
  }

  /** kill -9, resolved once the process has exited. */
  async kill(): Promise<void> {
    const p = this.proc;
    this.proc = null;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      p.once('exit', () => resolve());
      p.kill('SIGKILL');
    });
  }
}
