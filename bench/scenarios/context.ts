/** What a scenario gets from the runner, and what it gives back. */
import type { Redis } from 'ioredis';
import type { Adapter, Producer, ServerAddress } from '../adapters/types.js';
import type { ChildConfig } from '../child-protocol.js';
import type { CommandCounter } from '../command-counter.js';
import type { WorkerProcess } from '../worker-process.js';

export interface Sizes {
  /** Jobs per throughput, memory and cost measurement. */
  n: number;
  /** Jobs of the latency scenario (added 2 ms apart). */
  latencyJobs: number;
  /** Jobs of the delayed scenario, due uniformly over `delayedWindowMs`. */
  delayedJobs: number;
  delayedWindowMs: number;
}

/** One measurement: a scenario variant (e.g. `c=50`) and its metrics (keys of METRICS). */
export interface Sample {
  variant: string;
  concurrency?: number;
  metrics: Record<string, number>;
}

export interface RunContext {
  adapter: Adapter;
  server: ServerAddress;
  /** The harness's own client (excluded from command counts). */
  admin: Redis;
  sizes: Sizes;
  /** Counts the commands this (producer) process sends. */
  counter: CommandCounter;
  /** A queue name not used before in this run of the harness. */
  queueName(tag: string): string;
  /** A fresh producer on `queue`; the caller closes it. */
  producer(queue: string): Promise<Producer>;
  /** A worker child, loaded and waiting for start(); the caller closes it. */
  spawnWorker(config: Omit<ChildConfig, 'lib' | 'server'>): Promise<WorkerProcess>;
  /** Empties Redis (FLUSHALL) between measurements. */
  flush(): Promise<void>;
}

export interface Scenario {
  name: string;
  /** One line for the report header. */
  describe(sizes: Sizes): string;
  run(ctx: RunContext): Promise<Sample[]>;
}
