/**
 * Private PostgreSQL servers for tests, benchmarks and harnesses, as redis-server.ts gives Redis: initdb
 * in a temp dir, a free port on 127.0.0.1, killable (kill -9) and restartable on the same data, never
 * the shared instance on 5432. PostgreSQL refuses to run as root: as root, the data dir is given to
 * the `postgres` user and the server runs as that user.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../../src/redis/embedded.js';

/** The directory of initdb and postgres: on PATH, else Debian's /usr/lib/postgresql/<version>/bin. */
export function postgresBin(): string {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'postgres'))) return dir;
  }
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) {
    const dir = join(root, v, 'bin');
    if (existsSync(join(dir, 'initdb'))) return dir;
  }
  throw new Error('PostgreSQL is not installed (initdb not found): apt-get install postgresql');
}

/** uid and gid of the `postgres` user when running as root (PostgreSQL refuses root), else none. */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
  return { uid, gid };
}

export class PostgresServer {
  readonly dir: string;
  port = 0;
  private proc: ChildProcess | null = null;
  private readonly user = runAs();
  private readonly bin = postgresBin();

  constructor() {
    this.dir = mkdtempSync(join(tmpdir(), 'surety-pg-'));
    if (this.user) chownSync(this.dir, this.user.uid, this.user.gid);
    execFileSync(
      join(this.bin, 'initdb'),
      ['-D', join(this.dir, 'data'), '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-sync'],
      { stdio: 'ignore', ...(this.user ?? {}) },
    );
  }

  /** postgres://postgres@127.0.0.1:<port>/postgres */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  /** Starts the server (on its earlier port after a kill) and resolves once it accepts connections. */
  async start(timeoutMs = 30_000): Promise<this> {
    if (this.port === 0) this.port = await freePort();
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      this.spawnServer();
      if (await this.ready(deadline)) return this;
      // A server killed a moment ago can leave its shared memory in use: start again until it is free.
      this.proc?.kill('SIGKILL');
      if (Date.now() > deadline) throw new Error(`postgres on port ${this.port} did not start`);
    }
  }

  private spawnServer(): void {
    const proc = spawn(
      join(this.bin, 'postgres'),
      [
        '-D',
        join(this.dir, 'data'),
        '-p',
        String(this.port),
        '-k',
        this.dir,
        '-c',
        'listen_addresses=127.0.0.1',
        // Process kills, not machine crashes, are what the tests inflict: the OS keeps unsynced writes.
        '-c',
        'fsync=off',
        '-c',
        'max_connections=200',
      ],
      { stdio: 'ignore', ...(this.user ?? {}) },
    );
    proc.on('error', () => {});
    this.proc = proc;
  }

  private async ready(deadline: number): Promise<boolean> {
    const proc = this.proc;
    while (Date.now() < deadline && proc?.exitCode === null && proc.signalCode === null) {
      const client = new pg.Client({ connectionString: this.url });
      client.on('error', () => {});
      try {
        await client.connect();
        await client.query('SELECT 1');
        return true;
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      } finally {
        await client.end().catch(() => {});
      }
    }
    return false;
  }

  /** kill -9 of the postmaster: its backends notice and exit; start() brings it back on the same data. */
  async kill(): Promise<void> {
    const proc = this.proc;
    this.proc = null;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGKILL');
    await exited;
  }

  /** Stops the server and removes its data. */
  async stop(): Promise<void> {
    const proc = this.proc;
    this.proc = null;
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGQUIT'); // immediate shutdown: nothing to keep
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export async function startPostgres(): Promise<PostgresServer> {
  return new PostgresServer().start();
}
