/**
 * Queue discovery: the names of the queues that have keys under a prefix. Key names are derived from
 * queueKeys() (the one place that builds them), never written out here: the SCAN pattern is the queue's
 * hash tag with the name replaced by `*`, and each key found is accepted only if queueKeys(prefix, name)
 * produces exactly that key. SCAN walks the keyspace in small steps, so this never blocks Redis.
 */
import { Cluster } from 'ioredis';
import { DEFAULT_PREFIX } from '../defaults.js';
import type { RedisClient } from '../scripts/specs.js';
import { queueKeys } from '../store/keys.js';
import { checkPrefix, checkQueueAddress, checkQueueName } from '../validate.js';

const NAME_MARK = '\u0000';

function isQueueName(prefix: string, name: string): boolean {
  try {
    checkQueueName(name);
    checkQueueAddress(prefix, name);
    return true;
  } catch {
    return false;
  }
}

function escapeGlob(s: string): string {
  return s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/** Sorted names of the queues with at least one key under `prefix` (default 'surety'). */
export async function discoverQueues(client: RedisClient, prefix = DEFAULT_PREFIX): Promise<string[]> {
  checkPrefix(prefix);
  const tag = queueKeys(prefix, NAME_MARK).tag;
  const [before = '', after = ''] = tag.split(NAME_MARK);
  const pattern = `${escapeGlob(before)}*`;
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  const names = new Set<string>();
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1_000);
      cursor = next;
      for (const key of keys) {
        const end = key.indexOf(after, before.length);
        if (end < 0) continue;
        const name = key.slice(before.length, end);
        if (names.has(name) || !isQueueName(prefix, name)) continue;
        const own = queueKeys(prefix, name) as unknown as Record<string, string>;
        if (Object.values(own).includes(key)) names.add(name);
      }
    } while (cursor !== '0');
  }
  return [...names].sort();
}
