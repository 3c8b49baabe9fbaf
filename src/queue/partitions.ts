/**
 * Partitioned queues: one logical queue spread over N hash tags `{prefix:queue:0}` ... so its load
 * spreads over a Redis Cluster's masters. This module decides which partition a job lives in and
 * checks a client's partition count against the one recorded in Redis.
 *
 * Routing is a pure function of the job id, so any client finds a job without asking Redis:
 *  - generated ids carry their partition (`<n>@<p>`);
 *  - a schedule's occurrence jobs live with their schedule (partition of the schedule key);
 *  - any other id goes to the partition of its hash (so an idempotent add by id always meets the
 *    job it repeats).
 * Two exceptions, which lookups cover by asking the other partitions when the home one has no such
 * job: `partitionKey` (jobs that must share a partition, e.g. a dependency graph), and a job with
 * `dependsOn`, which goes to its parents' partition (dependencies are checked atomically, in one slot).
 */
import { PartitionMismatchError } from '../errors.js';
import { callScript, type RedisClient, scripts } from '../scripts/specs.js';
import { type QueueKeys, queueKeys } from '../store/keys.js';
import { parseOccurrenceId } from '../store/occurrence-id.js';

/** FNV-1a (32 bit) of the UTF-16 code units: stable across processes and versions, and cheap. */
export function hashPartition(s: string, n: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % n;
}

const GENERATED = /^\d+@(\d+)$/;

/** The partition a job id routes to (its home: where add puts it unless partitionKey or dependsOn). */
export function partitionOf(id: string, n: number): number {
  if (n === 1) return 0;
  const g = GENERATED.exec(id);
  if (g) {
    const p = Number(g[1]);
    if (p < n) return p;
  }
  const occurrence = parseOccurrenceId(id);
  return hashPartition(occurrence ? occurrence.key : id, n);
}

/** The layout of one logical queue: its partitions' keys and how ids route to them. */
export class Layout {
  readonly parts: readonly QueueKeys[];
  /** The unpartitioned tag's keys: where the partition count is recorded. */
  readonly base: QueueKeys;
  private next = 0;

  constructor(
    prefix: string,
    name: string,
    readonly count: number,
  ) {
    this.base = queueKeys(prefix, name);
    this.parts =
      count === 1 ? [this.base] : Array.from({ length: count }, (_, p) => queueKeys(prefix, name, p));
  }

  get partitioned(): boolean {
    return this.count > 1;
  }

  /** Suffix the add script appends to generated ids in partition `p`. */
  idSuffix(p: number): string {
    return this.partitioned ? `@${p}` : '';
  }

  home(id: string): number {
    return partitionOf(id, this.count);
  }

  /** Partition for a new job: explicit key, then the parents', then the id's, then round-robin. */
  route(id: string, partitionKey: string, parents: string[]): number {
    if (!this.partitioned) return 0;
    if (partitionKey !== '') return hashPartition(partitionKey, this.count);
    if (parents.length > 0) return this.home(parents[0] as string);
    if (id !== '') return this.home(id);
    this.next = (this.next + 1) % this.count;
    return this.next;
  }

  /** Partitions to look in for `id`: its home first, then the others. */
  lookupOrder(id: string): number[] {
    const home = this.home(id);
    return [home, ...this.parts.map((_, p) => p).filter((p) => p !== home)];
  }
}

/**
 * Pauses or resumes every partition given (resume wakes their idle workers). A partition whose state
 * changes appends `paused` or `resumed` to its event stream, capped at `eventsMaxLen` (0: no event).
 */
export async function setPausedAll(
  client: RedisClient,
  parts: readonly QueueKeys[],
  paused: boolean,
  eventsMaxLen: number,
): Promise<void> {
  await Promise.all(
    parts.map((k) =>
      callScript(client, scripts.setPaused, k, {
        paused: paused ? '1' : '0',
        wakeChannel: k.wakeChannel,
        eventsMaxLen,
      }),
    ),
  );
}

/**
 * Checks (and for a new partitioned queue, records) the partition count in Redis, and returns the
 * queue's layout. `wanted` 0 ('auto') takes the recorded count. A count that differs from the
 * recorded one is refused: a client on the wrong layout would write keys no worker reads.
 */
export async function resolveLayout(
  client: RedisClient,
  prefix: string,
  name: string,
  wanted: number,
): Promise<Layout> {
  const { recorded, accepted } = await callScript(client, scripts.partitions, queueKeys(prefix, name), {
    partitions: wanted,
  });
  if (!accepted) throw new PartitionMismatchError(name, wanted, recorded);
  return new Layout(prefix, name, wanted === 0 ? recorded || 1 : wanted);
}
