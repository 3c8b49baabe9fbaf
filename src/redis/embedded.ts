/**
 * A private redis-server process: started from PATH on a free port with its own data directory,
 * ready once it answers PING, stopped cleanly (SIGTERM: the AOF is flushed) or killed (SIGKILL).
 * Used by the CLI's embedded mode (`--redis embedded`, `surety demo`) and by the tests, benchmarks
 * and chaos runs, which need killable, restartable servers that never touch a shared instance.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { delimiter, isAbsolute, join } from 'node:path';
import { Redis, type RedisOptions } from 'ioredis';
import { RedisServerNotFoundError } from '../errors.js';
import { safeTimeout } from '../timers.js';

export interface EmbeddedRedisOptions {
  /** Data directory (created if missing): the AOF lives here. */
  dir: string;
  /** TCP port. Default: a free port chosen at start (another one is tried if it is taken meanwhile). */
  port?: number;
  /** Address to listen on. Default 127.0.0.1 (never reachable from other machines). */
  bind?: string;
  /**
   * Persistence. `true` or 'always' (default): appendonly yes + appendfsync always, so every
   * acknowledged write survives kill -9; 'everysec': Redis's usual AOF trade-off; `false`: none.
   */
  aof?: boolean | 'always' | 'everysec';
  /** Extra settings, passed as `--name value` (e.g. { 'maxmemory-policy': 'noeviction' }). */
  config?: Record<string, string>;
  /** The redis-server binary: a path, or a name looked up on PATH. Default 'redis-server'. */
  binary?: string;
  /**
   * Run the server in its own process group, so a terminal's Ctrl-C reaches only the parent, which
   * stops the server after its own cleanup (e.g. after workers finished their jobs). Default false.
   */
  detached?: boolean;
  /** How long start() waits for the server to answer PING. Default 10 000 ms. */
  startTimeoutMs?: number;
}

/** How to install redis-server on this platform, in one sentence. */
export function installHint(platform: NodeJS.Platform = process.platform): string {
  const docker = 'or run one with Docker: docker run -d -p 6379:6379 redis:7';
  if (platform === 'darwin') return `Install it with: brew install redis (${docker}).`;
  if (platform === 'win32') {
    return `Redis does not run natively on Windows: use WSL (then: sudo apt-get install redis-server), ${docker}.`;
  }
  let os = '';
  try {
    os = readFileSync('/etc/os-release', 'utf8').toLowerCase();
  } catch {
    // not Linux, or a minimal image: fall through to the generic hint
  }
  const like = (name: string) => new RegExp(`^(id|id_like)=.*\\b${name}\\b`, 'm').test(os);
  if (like('debian') || like('ubuntu'))
    return `Install it with: sudo apt-get install redis-server (${docker}).`;
  if (like('fedora') || like('rhel') || like('centos'))
    return `Install it with: sudo dnf install redis (${docker}).`;
  if (like('alpine')) return `Install it with: sudo apk add redis (${docker}).`;
  if (like('arch')) return `Install it with: sudo pacman -S redis (${docker}).`;
  return `Install Redis >= 7 from your package manager (Debian/Ubuntu: sudo apt-get install redis-server; macOS: brew install redis), ${docker}.`;
}

/** The absolute path of `binary` (a path, or a name looked up on PATH), or null if it is not there. */
export function findRedisServer(
  binary = 'redis-server',
  env: NodeJS.ProcessEnv = process.env,
): string | null {
  const executable = (p: string) => {
    try {
      accessSync(p, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  };
  if (binary.includes('/') || isAbsolute(binary)) return executable(binary) ? binary : null;
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir && executable(join(dir, binary))) return join(dir, binary);
  }
  return null;
}

/** A TCP port that was free a moment ago on `host`. */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

/** True when a Redis server on host:port answers PING (false while it is still loading its AOF). */
export async function pingRedis(
  port: number,
  host = '127.0.0.1',
  timeoutMs = 1_000,
  /** Extra client options, e.g. `tls` for a TLS-only server. */
  extra: RedisOptions = {},
): Promise<boolean> {
  const c = new Redis({
    ...extra,
    port,
    host,
    lazyConnect: true,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  c.on('error', () => {});
  try {
    await c.connect();
    return (await c.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    c.disconnect();
  }
}

export class EmbeddedRedis {
  readonly dir: string;
  readonly host: string;
  port: number;
  private readonly autoPort: boolean;
  private proc: ChildProcess | null = null;
  private output = '';

  constructor(private readonly opts: EmbeddedRedisOptions) {
    this.dir = opts.dir;
    this.host = opts.bind ?? '127.0.0.1';
    this.port = opts.port ?? 0;
    this.autoPort = !opts.port;
  }

  get url(): string {
    return `redis://${this.host}:${this.port}`;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  get running(): boolean {
    return this.proc !== null && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** The server's command-line arguments (for logs and tests). */
  args(): string[] {
    const args = ['--port', String(this.port), '--bind', this.host, '--dir', this.dir];
    args.push('--save', '', '--daemonize', 'no');
    const aof = this.opts.aof ?? true;
    if (aof === false) args.push('--appendonly', 'no');
    else args.push('--appendonly', 'yes', '--appendfsync', aof === 'everysec' ? 'everysec' : 'always');
    for (const [k, v] of Object.entries(this.opts.config ?? {})) args.push(`--${k}`, v);
    return args;
  }

  /** Starts the server (loading the AOF in `dir` if there is one) and resolves once it answers PING. */
  async start(): Promise<this> {
    if (this.running) return this;
    const binary = this.opts.binary ?? 'redis-server';
    const path = findRedisServer(binary);
    if (!path) throw new RedisServerNotFoundError(binary, installHint());
    mkdirSync(this.dir, { recursive: true });
    for (let attempt = 1; ; attempt++) {
      if (this.port === 0) this.port = await freePort(this.host);
      try {
        await this.spawnAndWait(path);
        return this;
      } catch (err) {
        // Someone took the free port between our check and the server's bind: try another one.
        if (!this.autoPort || attempt >= 5 || !/already in use/i.test(this.output)) throw err;
        this.port = 0;
      }
    }
  }

  private async spawnAndWait(path: string): Promise<void> {
    this.output = '';
    const proc = spawn(path, this.args(), {
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: this.opts.detached ?? false,
    });
    this.proc = proc;
    const keep = (d: Buffer) => {
      this.output = (this.output + d.toString()).slice(-20_000);
    };
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    let spawnError: Error | null = null;
    proc.once('error', (err) => {
      spawnError = err;
    });
    const deadline = Date.now() + (this.opts.startTimeoutMs ?? 10_000);
    for (;;) {
      if (spawnError) throw spawnError;
      if (proc.exitCode !== null || proc.signalCode !== null) {
        this.proc = null;
        throw new Error(`redis-server exited (${proc.exitCode ?? proc.signalCode}): ${this.lastLines()}`);
      }
      if (await pingRedis(this.port, this.host)) return;
      if (Date.now() > deadline) {
        await this.kill();
        throw new Error(`redis-server on port ${this.port} did not answer PING: ${this.lastLines()}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  private lastLines(): string {
    return this.output.trim().split('\n').slice(-5).join(' | ');
  }

  private async signal(sig: NodeJS.Signals, timeoutMs: number): Promise<boolean> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) {
      this.proc = null;
      return true;
    }
    const exited = new Promise<boolean>((resolve) => {
      const timer = safeTimeout(() => resolve(false), timeoutMs);
      p.once('exit', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    p.kill(sig);
    const done = await exited;
    if (done) this.proc = null;
    return done;
  }

  /** kill -9: no shutdown, no final fsync (what a crash looks like). */
  async kill(): Promise<void> {
    await this.signal('SIGKILL', 10_000);
  }

  /** Clean shutdown (SIGTERM: the AOF is flushed and fsynced); SIGKILL if it takes over `timeoutMs`. */
  async stop(timeoutMs = 10_000): Promise<void> {
    if (!(await this.signal('SIGTERM', timeoutMs))) await this.kill();
  }

  /** Kills the server and starts it again on the same port and directory (loading the AOF if on). */
  async restart(): Promise<this> {
    await this.kill();
    return this.start();
  }
}
