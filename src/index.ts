export { discoverQueues } from './admin/discover.js';
export {
  type RepartitionOptions,
  type RepartitionResult,
  repartition,
} from './admin/repartition.js';
export { EmbeddedRedis, type EmbeddedRedisOptions } from './embedded-redis.js';
export * from './errors.js';
export {
  type QueueEvent,
  type QueueEventName,
  QueueEvents,
  type QueueEventsOptions,
  type ReadEventsOptions,
} from './events.js';
export { type QueueKeys, queueKeys } from './keys.js';
export type { ConnectionOption, Logger, QueueOptions } from './options.js';
export { Queue } from './queue.js';
export type { RecoveredJobs } from './recovery.js';
export type {
  AddedJob,
  BackoffOptions,
  JobCounts,
  JobInfo,
  JobOptions,
  JobState,
  QueueMetrics,
  Retention,
  RetentionRule,
  WorkerDescription,
} from './types.js';
export type { BackoffStrategy } from './worker/backoff.js';
export { Job } from './worker/job.js';
export type { WorkerOptions } from './worker/options.js';
export { type Processor, Worker, type WorkerEvents } from './worker/worker.js';
