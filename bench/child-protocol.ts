/** Messages between the harness (parent) and a worker child over the fork IPC channel. */
import type { LibName, ServerAddress } from './adapters/types.js';

/**
 * What the processor records at the start of each job:
 * - `noop`: nothing;
 * - `latency`: monoMs() - data.t (enqueue -> processor start, ms);
 * - `delayed`: wallMs() - data.due (lateness, ms), and whether Date.now() < data.due (started early);
 * - `hold`: nothing, and the job does not end until `close` (the scale stage's held set: jobs kept
 *   active under lease, renewed by the worker). Claims only for free slots (no prefetch); reports
 *   `holding` once a processor runs in every slot.
 */
export type ChildMode = 'noop' | 'latency' | 'delayed' | 'hold';

export interface ChildConfig {
  lib: LibName;
  server: ServerAddress;
  queue: string;
  concurrency: number;
  mode: ChildMode;
  /** Run a batch worker of this batch size (Surety's `batch` option; concurrency then counts batches). */
  batchSize?: number;
  /** Completions after which the child reports `done`. */
  expect: number;
  /** Write a V8 CPU profile of the measured window (start -> done) to this file. */
  profileFile?: string;
}

export type ParentMessage = { type: 'start' } | { type: 'close' };

export interface DoneMessage {
  type: 'done';
  /** monoMs() at the `expect`-th persisted completion. */
  at: number;
  completed: number;
  /** process.cpuUsage() user + system since `start`, µs. */
  cpuUs: number;
  commands: number;
  roundTrips: number;
  samples: number[];
  early: number;
}

export type ChildMessage =
  | { type: 'ready' }
  | { type: 'started'; at: number }
  | { type: 'holding' }
  | DoneMessage
  | { type: 'failed'; message: string }
  | { type: 'closed' };
