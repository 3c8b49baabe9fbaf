/**
 * A private Redis Cluster on loopback for tests and benchmarks: `masters` masters (and `replicasPer`
 * replicas each), started as ordinary private redis-servers with cluster-enabled, joined with
 * `redis-cli --cluster create`, and ready once every node sees every slot served (cluster_state:ok).
 * Failover is fast (cluster-node-timeout 1 000 ms) so a test can kill a master and watch its replica
 * take over within a few seconds.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { EmbeddedRedis } from '../../src/redis/embedded.js';

const run = promisify(execFile);

export interface ClusterOptions {
  masters?: number;
  replicasPer?: number;
  /** Extra `--name value` settings for every node. */
  config?: Record<string, string>;
  /** AOF on every node (appendfsync always). Default off. */
  aof?: boolean;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** A port whose cluster-bus twin (port + 10 000) is free too. */
async function clusterPort(taken: Set<number>): Promise<number> {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 30_000);
    if (taken.has(port) || taken.has(port + 10_000)) continue;
    if ((await portFree(port)) && (await portFree(port + 10_000))) {
      taken.add(port);
      taken.add(port + 10_000);
      return port;
    }
  }
}

export class RedisCluster {
  readonly nodes: EmbeddedRedis[] = [];
  readonly dir: string;

  constructor(private readonly opts: ClusterOptions = {}) {
    this.dir = mkdtempSync(join(tmpdir(), 'surety-cluster-'));
  }

  get seeds(): { host: string; port: number }[] {
    return this.nodes.map((n) => ({ host: n.host, port: n.port }));
  }

  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,...` */
  get url(): string {
    return `redis+cluster://${this.seeds.map((s) => `${s.host}:${s.port}`).join(',')}`;
  }

  async start(): Promise<this> {
    const masters = this.opts.masters ?? 3;
    const total = masters * (1 + (this.opts.replicasPer ?? 0));
    const taken = new Set<number>();
    for (let i = 0; i < total; i++) {
      const port = await clusterPort(taken);
      this.nodes.push(
        new EmbeddedRedis({
          dir: join(this.dir, String(port)),
          port,
          aof: this.opts.aof ?? false,
          config: {
            'cluster-enabled': 'yes',
            'cluster-config-file': 'nodes.conf',
            'cluster-node-timeout': '1000',
            // A replica whose master is down takes over however long it was disconnected.
            'cluster-replica-validity-factor': '0',
            ...this.opts.config,
          },
        }),
      );
    }
    await Promise.all(this.nodes.map((n) => n.start()));
    await run(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...this.nodes.map((n) => `${n.host}:${n.port}`),
        '--cluster-replicas',
        String(this.opts.replicasPer ?? 0),
        '--cluster-yes',
      ],
      { timeout: 60_000 },
    );
    await this.waitHealthy();
    return this;
  }

  /** Resolves once every running node reports cluster_state:ok, all slots served and all nodes known. */
  async waitHealthy(timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const running = this.nodes.filter((n) => n.running);
    for (;;) {
      const states = await Promise.all(running.map((n) => clusterInfo(n.port)));
      const ok = states.every(
        (s) =>
          s.cluster_state === 'ok' &&
          s.cluster_slots_ok === '16384' &&
          Number(s.cluster_known_nodes) >= running.length,
      );
      if (ok) return;
      if (Date.now() > deadline) throw new Error(`cluster not healthy: ${JSON.stringify(states)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** CLUSTER SLOTS as the first running node that answers sees it: [first slot, last slot, master port]. */
  private async slotMap(): Promise<[number, number, number][]> {
    for (const n of this.nodes.filter((x) => x.running)) {
      const c = new Redis({ port: n.port, host: n.host, lazyConnect: true, maxRetriesPerRequest: 0 });
      try {
        await c.connect();
        const slots = (await c.cluster('SLOTS')) as unknown as [number, number, [string, number]][];
        return slots.map(([from, to, [, port]]) => [from, to, port]);
      } catch {
        // node unreachable: ask the next one
      } finally {
        c.disconnect();
      }
    }
    throw new Error('no running node answers CLUSTER SLOTS');
  }

  /** The node serving `slot` as master now. */
  async masterOf(slot: number): Promise<EmbeddedRedis> {
    const row = (await this.slotMap()).find(([from, to]) => slot >= from && slot <= to);
    const node = row && this.nodes.find((x) => x.port === row[2]);
    if (!node) throw new Error(`no node serves slot ${slot}`);
    return node;
  }

  /** Waits until a node other than `dead` serves every slot as master (its replica took over). */
  async waitFailover(dead: EmbeddedRedis, timeoutMs = 30_000): Promise<EmbeddedRedis[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const masters = await this.masters().catch(() => [] as EmbeddedRedis[]);
      if (masters.length > 0 && !masters.includes(dead)) {
        await this.waitHealthy(Math.max(1_000, deadline - Date.now()));
        return masters;
      }
      if (Date.now() > deadline) throw new Error(`no failover within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** The nodes that are masters of at least one slot, as seen by a running node. */
  async masters(): Promise<EmbeddedRedis[]> {
    const ports = new Set((await this.slotMap()).map(([, , port]) => port));
    return this.nodes.filter((x) => ports.has(x.port));
  }

  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => n.kill()));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

async function clusterInfo(port: number): Promise<Record<string, string>> {
  const c = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 0, lazyConnect: true });
  try {
    await c.connect();
    const text = await c.cluster('INFO');
    return Object.fromEntries(
      String(text)
        .split('\r\n')
        .filter(Boolean)
        .map((l) => l.split(':') as [string, string]),
    );
  } catch (err) {
    return { error: String(err) };
  } finally {
    c.disconnect();
  }
}

export async function startCluster(opts?: ClusterOptions): Promise<RedisCluster> {
  return new RedisCluster(opts).start();
}
