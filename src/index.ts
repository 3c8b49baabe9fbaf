// Every error class (docs/errors.md); the script-refusal mapping stays internal.
export {
  BatchExistsError,
  BatchResultError,
  CancelledError,
  ClosedError,
  ConnectionError,
  CrossPartitionError,
  DependencyFailedError,
  DurabilityError,
  ExpiredError,
  ImportError,
  InvalidStateError,
  JobFailedError,
  JobNotFoundError,
  LeaseExpiredError,
  ListenerError,
  NotSerializableError,
  NotSettledError,
  ParkedError,
  PartitionMismatchError,
  PayloadTooLargeError,
  PostgresError,
  PostgresNotInstalledError,
  PostgresSchemaError,
  QueueActiveError,
  RateLimitError,
  RedisConfigError,
  RedisFullError,
  RedisServerNotFoundError,
  RepartitionError,
  SandboxError,
  SignalTimeoutError,
  SnoozeError,
  SnoozeLimitError,
  StaleJobError,
  SuretyError,
  TelemetryError,
  TimeoutError,
  UnrecoverableError,
  ValidationError,
  WaitTimeoutError,
} from './errors.js';
export type { QueueOptions } from './options/queue.js';
export { discoverQueues } from './queue/discover.js';
export {
  type QueueEvent,
  type QueueEventName,
  QueueEvents,
  type QueueEventsOptions,
  type ReadEventsOptions,
} from './queue/events.js';
export type { ExplainReason, Explanation } from './queue/explain.js';
export type {
  CancelOptions,
  CancelOutcome,
  Flow,
  FlowNode,
  FlowNodeState,
  FlowOptions,
  FlowRef,
} from './queue/flow.js';
export type {
  EffectiveGroupLimits,
  GroupInfo,
  GroupLimits,
  GroupPage,
  RateLimit,
} from './queue/flow-control.js';
export type { QueueStats, SearchOptions, SearchResult } from './queue/insights.js';
export type { DrainOptions } from './queue/job-edits.js';
export { MAX_METRICS_RETENTION_MS } from './queue/metrics-history.js';
export { MAX_PRIORITIES_PER_CALL } from './queue/priority-counts.js';
export { Queue } from './queue/queue.js';
export type { ListOptions } from './queue/reads.js';
export type { RecoveredJobs } from './queue/recovery.js';
export {
  type RepartitionOptions,
  type RepartitionResult,
  repartition,
} from './queue/repartition.js';
export type { ScheduleInfo, ScheduleOptions, ScheduleTiming } from './queue/schedule-timing.js';
export type { SignalResult } from './queue/signals.js';
export type { WaitOptions } from './queue/wait-for.js';
export type { ConnectionOption, Logger } from './redis/client.js';
export { EmbeddedRedis, type EmbeddedRedisOptions } from './redis/embedded.js';
export { type ServerInfo, type ServerWarning, serverInfo } from './redis/server-info.js';
export { type QueueKeys, queueKeys } from './store/keys.js';
export type { TracerProviderLike } from './telemetry/api.js';
export type { AttemptOutcome, TelemetryOption } from './telemetry/tracing.js';
export type {
  AddedBatch,
  AddedJob,
  BackoffOptions,
  BatchCallbackData,
  BatchInfo,
  BatchOptions,
  DedupeOptions,
  JobAttemptError,
  JobCounts,
  JobInfo,
  JobOptions,
  JobState,
  QueueMetrics,
  Retention,
  RetentionRule,
  WorkerDescription,
} from './types.js';
export { Job } from './worker/job.js';
export type { ProcessorMap } from './worker/named-processors.js';
export type { BackoffStrategy, WorkerBatchOptions, WorkerOptions } from './worker/options.js';
export { type BatchProcessor, type Processor, Worker, type WorkerEvents } from './worker/worker.js';
