/**
 * The CLI's embedded Redis: when no Redis is reachable, `--redis embedded` and `surety demo` start a
 * private redis-server (AOF on, data in ./.surety/redis, a free loopback port) and stop it on exit.
 * Once ./.surety/redis holds data, `--redis embedded` always means that server (hasEmbeddedData).
 * A state file in that directory names the running server, so a second surety command in the same
 * directory uses it instead of starting another server on the same AOF (a lock file guards the start).
 */
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { EmbeddedRedis, findRedisServer, installHint, pingRedis } from '../redis/embedded.js';
import { CliError } from './errors.js';
import { addCleanup } from './lifecycle.js';

const STATE_FILE = 'surety-embedded.json';
const LOCK_FILE = 'surety-embedded.lock';

export interface EmbeddedHandle {
  url: string;
  /** The server's pid. */
  pid: number;
  /** True when this process started the server (and stops it on exit). */
  owned: boolean;
  dir: string;
}

export function embeddedDir(cwd = process.cwd()): string {
  return resolve(cwd, '.surety', 'redis');
}

/**
 * True when ./.surety/redis holds a private server's data (its AOF, an RDB, or a running server's
 * state file): then `--redis embedded` means that server, even if another Redis answers on the
 * default URL, so the commands the demo suggests read the demo's jobs and not some other Redis.
 */
export function hasEmbeddedData(dir = embeddedDir()): boolean {
  return ['appendonlydir', 'dump.rdb', STATE_FILE].some((f) => existsSync(join(dir, f)));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readPidPort(file: string): { pid: number; port: number } | null {
  try {
    const s = JSON.parse(readFileSync(file, 'utf8')) as { pid?: unknown; port?: unknown };
    return typeof s.pid === 'number' && typeof s.port === 'number' ? { pid: s.pid, port: s.port } : null;
  } catch {
    return null;
  }
}

async function running(dir: string): Promise<EmbeddedHandle | null> {
  const s = readPidPort(join(dir, STATE_FILE));
  if (!s || !alive(s.pid) || !(await pingRedis(s.port))) return null;
  return { url: `redis://127.0.0.1:${s.port}`, pid: s.pid, owned: false, dir };
}

/** Takes the start lock (waiting for another starter, and breaking the lock of a dead one). */
async function lock(dir: string): Promise<boolean> {
  const file = join(dir, LOCK_FILE);
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      const fd = openSync(file, 'wx');
      writeSync(fd, JSON.stringify({ pid: process.pid, port: 0 }));
      closeSync(fd);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = readPidPort(file);
    if (holder && !alive(holder.pid)) rmSync(file, { force: true });
    else if (Date.now() > deadline) return false;
    else await new Promise((r) => setTimeout(r, 50));
  }
}

/** Uses the server already running for ./.surety/redis, or starts one (stopped by the exit cleanups). */
export async function startEmbedded(
  say: (line: string) => void,
  reason = 'no Redis reachable',
): Promise<EmbeddedHandle> {
  const dir = embeddedDir();
  const shown = relative(process.cwd(), dir) || dir;
  mkdirSync(dir, { recursive: true });
  const existing = await running(dir);
  if (existing) {
    say(
      `using the private redis-server already running on port ${existing.url.split(':').pop()} (pid ${existing.pid}, data in ./${shown})`,
    );
    return existing;
  }
  const binary = process.env.SURETY_REDIS_SERVER || 'redis-server';
  if (!findRedisServer(binary)) {
    throw new CliError(
      `no Redis is reachable and ${binary} is not installed, so no private one can be started. ${installHint()} Or pass --redis <url> to use a Redis you already run.`,
    );
  }
  if (!(await lock(dir)))
    throw new CliError(`another surety command is starting a redis-server in ./${shown}; try again`);
  const unlock = () => rmSync(join(dir, LOCK_FILE), { force: true });
  try {
    const again = await running(dir);
    if (again) return again;
    const server = new EmbeddedRedis({ dir, aof: true, detached: true, binary });
    try {
      await server.start();
    } catch (err) {
      throw new CliError(`could not start redis-server: ${err instanceof Error ? err.message : String(err)}`);
    }
    const stateFile = join(dir, STATE_FILE);
    writeFileSync(stateFile, JSON.stringify({ pid: server.pid, port: server.port }));
    addCleanup(async () => {
      await server.stop();
      rmSync(stateFile, { force: true });
    });
    say(
      `${reason}: started a private redis-server on port ${server.port} (pid ${server.pid}, AOF on, data in ./${shown}); it stops when this command ends`,
    );
    return { url: server.url, pid: server.pid!, owned: true, dir };
  } finally {
    unlock();
  }
}
