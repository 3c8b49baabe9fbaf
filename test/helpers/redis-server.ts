/**
 * Private redis-server processes for tests, benchmarks and the chaos harness: a free port, a temp dir,
 * killable and restartable (with AOF when asked), never the shared instance on 6379. A thin layer over
 * the library's EmbeddedRedis that owns a temp dir and removes it on stop.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EmbeddedRedis } from '../../src/redis/embedded.js';

export { freePort } from '../../src/redis/embedded.js';

export interface RedisServerOptions {
  /** appendonly yes + appendfsync always: every acknowledged write survives kill -9. Default off. */
  aof?: boolean;
  /** Extra `--name value` settings. */
  config?: Record<string, string>;
}

export class RedisServer extends EmbeddedRedis {
  constructor(opts: RedisServerOptions = {}) {
    super({ dir: mkdtempSync(join(tmpdir(), 'surety-redis-')), aof: opts.aof ?? false, config: opts.config });
  }

  /** Kills the server (kill -9) and removes its temp dir. */
  override async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export async function startRedis(opts?: RedisServerOptions): Promise<RedisServer> {
  return new RedisServer(opts).start();
}
