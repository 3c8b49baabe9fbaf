/**
 * Commands that act on an existing queue refuse a name nothing has used: `surety pause emials` would
 * otherwise write the pause flag of a new queue, which then shows in `surety queues` and `stats` as
 * if it were real, while `emails` keeps running. The refusal names the closest known queue.
 */
import { DEFAULT_PREFIX } from '../defaults.js';
import { closestName, discoverQueues } from '../queue/discover.js';
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
  const near = closestName(name, known);
  const where = g.prefix && g.prefix !== DEFAULT_PREFIX ? ` under prefix ${JSON.stringify(g.prefix)}` : '';
  throw new CliError(
    `no queue named ${JSON.stringify(name)}${where}${near ? `; did you mean ${JSON.stringify(near)}?` : ''} (surety queues lists them)`,
  );
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
