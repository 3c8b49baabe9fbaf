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

/** `s` with SCAN's glob characters escaped, to match it literally. */
export function escapeGlob(s: string): string {
  return s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/** Sorted names of the queues with at least one key under `prefix` (default 'surety'). */
export async function discoverQueues(client: RedisClient, prefix = DEFAULT_PREFIX): Promise<string[]> {
  checkPrefix(prefix);
  const tag = queueKeys(prefix, NAME_MARK).tag;
  const [before = '', after = ''] = tag.split(NAME_MARK);
  const pattern = `${escapeGlob(before)}*`;
  const names = new Set<string>();
  await scanKeys(client, pattern, (key) => {
    const end = key.indexOf(after, before.length);
    if (end < 0) return;
    const name = key.slice(before.length, end);
    if (names.has(name) || !isQueueName(prefix, name)) return;
    const own = queueKeys(prefix, name) as unknown as Record<string, string>;
    if (Object.values(own).includes(key)) names.add(name);
  });
  return [...names].sort();
}

/**
 * Calls `each` for every key matching the SCAN `pattern`, on every master of a Cluster, in steps of
 * about 1 000 keys: SCAN never blocks Redis.
 */
export async function scanKeys(
  client: RedisClient,
  pattern: string,
  each: (key: string) => void,
): Promise<void> {
  const nodes = client instanceof Cluster ? client.nodes('master') : [client];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1_000);
      cursor = next;
      for (const key of keys) each(key);
    } while (cursor !== '0');
  }
}

/**
 * For a queue name nothing has used (the CLI's refusal, the dashboard's 404): the known name within a
 * few edits of `name`, if any: 1 for names of up to 3 characters, else a third
 * of its length, at least 2 and at most 3 (`emial` is 2 edits from `emails`: a swap and a dropped
 * letter, the commonest pair of typos).
 */
export function closestName(name: string, known: readonly string[]): string | undefined {
  const budget = name.length <= 3 ? 1 : Math.min(3, Math.max(2, Math.floor(name.length / 3)));
  let best: string | undefined;
  let bestDistance = budget + 1;
  for (const k of known) {
    const d = editDistance(name.toLowerCase(), k.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  return best;
}

/** Levenshtein distance with adjacent transpositions counted as one edit ("emials" -> "emails"). */
function editDistance(a: string, b: string): number {
  const rows: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      const row = rows[i]!;
      let d = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d = Math.min(d, rows[i - 2]![j - 2]! + 1);
      row[j] = d;
    }
  }
  return rows[a.length]![b.length]!;
}
