/**
 * The one interface every library is driven through. Adapters use each library's public API with its
 * production setting for finished jobs (see `retention`) and otherwise its defaults.
 */
export type LibName = 'surety' | 'bullmq' | 'beequeue';

export const LIB_NAMES: readonly LibName[] = ['surety', 'bullmq', 'beequeue'];

export type JobData = Record<string, unknown>;

export interface JobSpec {
  data: JobData;
  /** Epoch ms at which the job becomes due (a delayed job); absent: due now. */
  runAt?: number;
}

export interface StateCounts {
  waiting: number;
  delayed: number;
  active: number;
}

export interface ServerAddress {
  host: string;
  port: number;
  url: string;
}

export interface Producer {
  add(data: JobData): Promise<void>;
  /** One bulk call of the library (the caller chunks by 1 000). */
  addBulk(jobs: readonly JobSpec[]): Promise<void>;
  /** Jobs not finished yet (waiting + delayed + active), from the library's own counters. */
  outstanding(): Promise<number>;
  /** The library's own counters, by state (waiting includes prioritized). */
  counts(): Promise<StateCounts>;
  close(): Promise<void>;
}

export interface WorkerSpec {
  server: ServerAddress;
  queue: string;
  concurrency: number;
  /** The scenario uses delayed jobs (Bee-Queue must then be told to activate them). */
  delayed: boolean;
  /**
   * Claim only for free slots. Surety otherwise prefetches (leases jobs ahead of free slots, counted
   * active); BullMQ and Bee-Queue never do.
   */
  noPrefetch?: boolean;
  /** A batch worker of this size (Surety only: the others have no free batch worker). */
  batchSize?: number;
  /**
   * Runs at the start of every job; the job ends when it returns, or when the promise it returns
   * settles (the scale stage's held set: jobs kept active until the bench lets them go).
   */
  processor(data: JobData): void | Promise<void>;
  /** Called once per completion, after the library has persisted it in Redis. */
  onCompleted(): void;
  onFailed(error: unknown): void;
}

export interface WorkerHandle {
  close(): Promise<void>;
}

export interface Adapter {
  readonly lib: LibName;
  readonly label: string;
  /** What happens to completed jobs, as configured here. */
  readonly retention: string;
  /** Resolves once the producer's connection is ready. */
  producer(server: ServerAddress, queue: string): Promise<Producer>;
  /** Starts a worker; resolves once it is connected and fetching. */
  worker(spec: WorkerSpec): Promise<WorkerHandle>;
}
