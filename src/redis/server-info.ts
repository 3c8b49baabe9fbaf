/**
 * What an operator needs to know about the Redis server (queue.serverInfo(), the dashboard's Redis
 * panel): version, memory against maxmemory, clients, persistence, and warnings for the settings that
 * break Surety's promise that an acknowledged job is not lost. The eviction message is the one the
 * connect-time check (connection.ts) logs, so the two never disagree.
 */
import type { Redis } from 'ioredis';
import { Cluster } from 'ioredis';
import type { RedisClient } from './client.js';
import { untilClosed } from './in-flight.js';

/** The connect-time check's message for an eviction policy other than noeviction (else null). */
export function evictionProblem(policy: string): string | null {
  return policy === 'noeviction'
    ? null
    : `maxmemory-policy is ${policy}: when Redis reaches maxmemory it may evict queued jobs, which would be lost. Set maxmemory-policy noeviction.`;
}

export interface ServerWarning {
  /** EVICTION, NO_PERSISTENCE, RDB_ONLY, NO_AOF, FSYNC_NO, FSYNC_EVERYSEC, CONFIG_UNREADABLE. */
  code: string;
  /** 'danger': can lose acknowledged jobs; 'notice': a trade-off worth knowing. */
  level: 'danger' | 'notice';
  message: string;
}

export interface ServerInfo {
  version: string;
  mode: string;
  uptimeSeconds: number;
  usedMemory: number;
  /** 0: no limit. */
  maxMemory: number;
  maxMemoryPolicy: string;
  connectedClients: number;
  /** From INFO persistence (aof_enabled). */
  appendonly: boolean;
  /** From CONFIG GET; null when CONFIG is blocked (managed Redis). */
  appendfsync: string | null;
  /** RDB snapshot rules (CONFIG GET save); null when CONFIG is blocked. */
  save: string | null;
  warnings: ServerWarning[];
}

function fields(info: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of info.split(/\r?\n/)) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out.set(line.slice(0, i), line.slice(i + 1));
  }
  return out;
}

/** The node that holds the data (the first master of a cluster). */
async function dataNode(client: RedisClient): Promise<Redis | null> {
  if (!(client instanceof Cluster)) return client;
  if (client.status !== 'ready') await untilClosed(client, client.ping());
  return client.nodes('master')[0] ?? null;
}

/** The warnings for these settings (exported for tests and the CLI). */
export function serverWarnings(s: {
  maxMemoryPolicy: string;
  appendonly: boolean;
  appendfsync: string | null;
  save: string | null;
  configReadable: boolean;
}): ServerWarning[] {
  const out: ServerWarning[] = [];
  const eviction = evictionProblem(s.maxMemoryPolicy);
  if (eviction) out.push({ code: 'EVICTION', level: 'danger', message: eviction });
  if (!s.appendonly) {
    // `save` unknown (CONFIG blocked): whether snapshots exist cannot be said.
    const rdb = s.save === null ? null : s.save.trim() !== '';
    out.push({
      code: rdb === null ? 'NO_AOF' : rdb ? 'RDB_ONLY' : 'NO_PERSISTENCE',
      level: 'danger',
      message:
        rdb === null
          ? 'appendonly is no: jobs acknowledged since the last RDB snapshot (if any) are lost if Redis restarts. Set appendonly yes.'
          : rdb
            ? `appendonly is no: only RDB snapshots (save ${s.save}) persist data, so jobs acknowledged since the last snapshot are lost if Redis restarts. Set appendonly yes.`
            : 'appendonly is no and no RDB snapshots: every job is lost if Redis restarts. Set appendonly yes.',
    });
  } else if (s.appendfsync === 'no') {
    out.push({
      code: 'FSYNC_NO',
      level: 'danger',
      message:
        'appendfsync is no: the OS decides when the AOF reaches the disk (often 30 s), so a machine crash loses acknowledged jobs. Set appendfsync everysec or always.',
    });
  } else if (s.appendfsync === 'everysec') {
    out.push({
      code: 'FSYNC_EVERYSEC',
      level: 'notice',
      message:
        'appendfsync is everysec: a machine crash (not a Redis crash) can lose the last second of acknowledged writes. appendfsync always closes that gap at a cost in throughput.',
    });
  }
  if (!s.configReadable)
    out.push({
      code: 'CONFIG_UNREADABLE',
      level: 'notice',
      message: 'CONFIG GET is not allowed (managed Redis?): appendfsync and save could not be checked.',
    });
  return out;
}

/** Reads INFO (and CONFIG GET where allowed) from the server holding the queues. */
export async function serverInfo(client: RedisClient): Promise<ServerInfo | null> {
  const node = await dataNode(client);
  if (!node) return null;
  const info = fields(await untilClosed(node, node.info()));
  let appendfsync: string | null = null;
  let save: string | null = null;
  let configReadable = true;
  try {
    const reply = (await untilClosed(node, node.config('GET', 'appendfsync'))) as string[];
    appendfsync = reply[1] ?? null;
    save = ((await untilClosed(node, node.config('GET', 'save'))) as string[])[1] ?? null;
  } catch {
    configReadable = false;
  }
  const s = {
    version: info.get('redis_version') ?? 'unknown',
    mode: info.get('redis_mode') ?? 'standalone',
    uptimeSeconds: Number(info.get('uptime_in_seconds') ?? 0),
    usedMemory: Number(info.get('used_memory') ?? 0),
    maxMemory: Number(info.get('maxmemory') ?? 0),
    maxMemoryPolicy: info.get('maxmemory_policy') ?? 'unknown',
    connectedClients: Number(info.get('connected_clients') ?? 0),
    appendonly: info.get('aof_enabled') === '1',
    appendfsync,
    save,
  };
  return { ...s, warnings: serverWarnings({ ...s, configReadable }) };
}
