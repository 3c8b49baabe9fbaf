/**
 * Private redis-server processes for tests, benchmarks and the chaos harness: a free port, a temp dir,
 * killable and restartable (with AOF when asked), never the shared instance on 6379.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

export interface RedisServerOptions {
  /** appendonly yes + appendfsync always: every acknowledged write survives kill -9. */
  aof?: boolean;
  /** Extra `--name value` settings. */
  config?: Record<string, string>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export class RedisServer {
  readonly dir: string;
  port = 0;
  private proc: ChildProcess | null = null;

  constructor(private readonly opts: RedisServerOptions = {}) {
    this.dir = mkdtempSync(join(tmpdir(), 'surety-redis-'));
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  async start(): Promise<this> {
    if (this.port === 0) this.port = await freePort();
    const args = [
      '--port',
      String(this.port),
      '--bind',
      '127.0.0.1',
      '--dir',
      this.dir,
      '--save',
      '',
      '--daemonize',
      'no',
    ];
    if (this.opts.aof) args.push('--appendonly', 'yes', '--appendfsync', 'always');
    else args.push('--appendonly', 'no');
    for (const [k, v] of Object.entries(this.opts.config ?? {})) args.push(`--${k}`, v);
    const proc = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    let output = '';
    proc.stdout?.on('data', (d) => {
      if (output.length < 20_000) output += d;
    });
    proc.stderr?.on('data', (d) => {
      output += d;
    });
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`redis-server exited (${proc.exitCode}): ${output}`);
      if (await this.ping()) return this;
      if (Date.now() > deadline) throw new Error(`redis-server on ${this.port} did not start: ${output}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  private async ping(): Promise<boolean> {
    const c = new Redis({
      port: this.port,
      host: '127.0.0.1',
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    c.on('error', () => {});
    try {
      await c.connect();
      // While loading the AOF, PING fails with LOADING.
      return (await c.ping()) === 'PONG';
    } catch {
      return false;
    } finally {
      c.disconnect();
    }
  }

  /** kill -9: no shutdown save, no goodbye to clients. */
  async kill(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await exited;
    this.proc = null;
  }

  /** Starts again on the same port and dir (loading the AOF if enabled). */
  async restart(): Promise<this> {
    await this.kill();
    return this.start();
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export async function startRedis(opts?: RedisServerOptions): Promise<RedisServer> {
  return new RedisServer(opts).start();
}
