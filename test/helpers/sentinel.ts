/**
 * A Redis Sentinel setup for tests, all on loopback and free ports: one master, one replica and three
 * sentinels (quorum 2) with short timeouts, so a killed master is replaced within a few seconds.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { pingRedis } from '../../src/redis/embedded.js';
import { RedisProcess } from './redis-process.js';
import { freePort, RedisServer } from './redis-server.js';

export const MASTER_NAME = 'mymaster';

export interface SentinelSetup {
  master: RedisServer;
  replica: RedisServer;
  sentinels: { host: string; port: number }[];
  /** `{ host, port }` of the master the sentinels currently report. */
  currentMaster(): Promise<{ host: string; port: number } | null>;
  stop(): Promise<void>;
}

/** Asks one sentinel a question; null if it does not answer. */
async function askSentinel<T>(port: number, ...args: string[]): Promise<T | null> {
  const c = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  c.on('error', () => {});
  try {
    await c.connect();
    return (await c.call('SENTINEL', ...args)) as T;
  } catch {
    return null;
  } finally {
    c.disconnect();
  }
}

async function replicaLinkUp(replica: RedisServer): Promise<boolean> {
  const c = new Redis(replica.url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
  c.on('error', () => {});
  try {
    return /master_link_status:up/.test(await c.info('replication'));
  } catch {
    return false;
  } finally {
    c.disconnect();
  }
}

async function waitFor(probe: () => Promise<boolean>, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`sentinel setup: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Starts master, replica (replicating, link up) and three sentinels that all know the replica and
 * each other, so a failover can start as soon as the master goes down.
 */
export async function startSentinelSetup(
  opts: { downAfterMs?: number; failoverTimeoutMs?: number } = {},
): Promise<SentinelSetup> {
  const master = await new RedisServer({ config: { 'repl-diskless-sync-delay': '0' } }).start();
  const replica = await new RedisServer({
    config: { replicaof: `${master.host} ${master.port}`, 'repl-diskless-sync-delay': '0' },
  }).start();
  const dir = mkdtempSync(join(tmpdir(), 'surety-sentinel-'));
  const procs: RedisProcess[] = [];
  const sentinels: { host: string; port: number }[] = [];
  const stop = async () => {
    await Promise.all(procs.map((p) => p.kill()));
    await Promise.all([master.stop(), replica.stop()]);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(() => replicaLinkUp(replica), 'the replica to sync', 10_000);
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const conf = join(dir, `sentinel-${i}.conf`);
      // Sentinel rewrites its config file (it records what it learns): one writable file each.
      writeFileSync(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          'sentinel resolve-hostnames no',
          `sentinel monitor ${MASTER_NAME} ${master.host} ${master.port} 2`,
          `sentinel down-after-milliseconds ${MASTER_NAME} ${opts.downAfterMs ?? 1_000}`,
          `sentinel failover-timeout ${MASTER_NAME} ${opts.failoverTimeoutMs ?? 3_000}`,
          `sentinel parallel-syncs ${MASTER_NAME} 1`,
          '',
        ].join('\n'),
      );
      const proc = new RedisProcess(`sentinel on ${port}`, [conf, '--sentinel']);
      procs.push(proc);
      await proc.start(() => pingRedis(port));
      sentinels.push({ host: '127.0.0.1', port });
    }
    // Sentinels find the replica through the master's INFO and each other through hello messages
    // (every 2 s): a failover needs both.
    await waitFor(
      async () => {
        for (const s of sentinels) {
          const replicas = await askSentinel<unknown[]>(s.port, 'REPLICAS', MASTER_NAME);
          const peers = await askSentinel<unknown[]>(s.port, 'SENTINELS', MASTER_NAME);
          if (!replicas || replicas.length < 1 || !peers || peers.length < 2) return false;
        }
        return true;
      },
      'the sentinels to discover the replica and each other',
      15_000,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    master,
    replica,
    sentinels,
    async currentMaster() {
      for (const s of sentinels) {
        const addr = await askSentinel<[string, string]>(s.port, 'GET-MASTER-ADDR-BY-NAME', MASTER_NAME);
        if (addr) return { host: addr[0], port: Number(addr[1]) };
      }
      return null;
    },
    stop,
  };
}
