/**
 * Commands that act on an existing queue refuse a name nothing has used: `surety pause emials` would
 * otherwise write the pause flag of a new queue, which then shows in `surety queues` and `stats` as
 * if it were real, while `emails` keeps running. The refusal names the closest known queue.
 */
import { DEFAULT_PREFIX } from '../defaults.js';
import { discoverQueues } from '../queue/discover.js';
import type { Queue } from '../queue/queue.js';
import { checkNames, type GlobalOptions, openQueue, openRedis, type RedisHandle } from './connection.js';
import { CliError } from './errors.js';

/** Opens `name` like openQueue, or fails (exit 1) when no key of that queue exists. */
export async function openKnownQueue<D = unknown, R = unknown>(
  name: string,
  handle: RedisHandle,
  g: GlobalOptions,
): Promise<Queue<D, R>> {
  const queue = openQueue<D, R>(name, handle, g);
  if (await queue.exists()) return queue;
  const known = await discoverQueues(handle.client, g.prefix);
  const near = closest(name, known);
  const where = g.prefix && g.prefix !== DEFAULT_PREFIX ? ` under prefix ${JSON.stringify(g.prefix)}` : '';
  throw new CliError(
    `no queue named ${JSON.stringify(name)}${where}${near ? `; did you mean ${JSON.stringify(near)}?` : ''} (surety queues lists them)`,
  );
}

/**
 * The known name within a few edits of `name`, if any: 1 for names of up to 3 characters, else a third
 * of its length, at least 2 and at most 3 (`emial` is 2 edits from `emails`: a swap and a dropped
 * letter, the commonest pair of typos).
 */
export function closest(name: string, known: readonly string[]): string | undefined {
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

/**
 * Rows from each named queue (every queue under the prefix when none is named), each tagged with its
 * queue name: what `workers` and `schedules` list.
 */
export async function rowsOfQueues<T extends object>(
  names: string[],
  g: GlobalOptions,
  read: (queue: Queue) => Promise<T[]>,
): Promise<(T & { queue: string })[]> {
  checkNames(names);
  const handle = await openRedis(g);
  const queues =
    names.length > 0
      ? await Promise.all(names.map((name) => openKnownQueue(name, handle, g)))
      : (await discoverQueues(handle.client, g.prefix)).map((name) => openQueue(name, handle, g));
  const rows: (T & { queue: string })[] = [];
  for (const queue of queues) {
    for (const row of await read(queue)) rows.push({ queue: queue.name, ...row });
  }
  return rows;
}
