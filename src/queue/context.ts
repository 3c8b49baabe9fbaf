/**
 * What the queue's modules (enqueue, admin, reads, events, schedules, wait-for) need from the Queue
 * facade: its name and resolved options, its client, and its layout once the server was checked.
 */
import type { ResolvedQueueOptions } from '../options/queue.js';
import type { RedisClient } from '../scripts/specs.js';
import type { Layout } from './partitions.js';

export interface QueueContext {
  readonly name: string;
  readonly options: ResolvedQueueOptions;
  readonly client: RedisClient;
  /** Checks the server and the partition count once (again after a failure); the queue's layout. */
  open(): Promise<Layout>;
}
