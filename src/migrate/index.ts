/**
 * `surety/migrate`: moving a running BullMQ queue's jobs and schedulers into a Surety queue
 * (docs/migrating-from-bullmq.md, "Moving a live queue").
 */
export type { KeptReason, SourceState } from './bullmq-job.js';
export {
  type BullMQCounts,
  type ImportFromBullMQOptions,
  type ImportReport,
  importFromBullMQ,
} from './import.js';
