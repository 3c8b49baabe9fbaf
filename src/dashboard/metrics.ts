/**
 * Prometheus metrics with prom-client.
 *
 * - `queueMetrics(queues)`: `surety_jobs{queue,state}` and `surety_workers{queue}` gauges, read through
 *   the Queue admin API (counts(), workers()) when Prometheus scrapes, so they cost nothing between scrapes.
 * - `workerMetrics(worker)`: counters fed by a Worker's `completed` / `failed` events, in this process.
 *   `surety_job_latency_seconds` is the time from the moment the job was due (its runAt, Redis clock) to
 *   its outcome. The Worker's events do not carry the attempt's start time, so neither the pure run
 *   duration nor the queue wait time can be derived here; they are not exported.
 */
import { Counter, Gauge, Histogram, type Metric, Registry } from 'prom-client';
import type { Worker } from '../worker/worker.js';
import type { QueueOverview, QueueRegistry } from './queues.js';

const STATES = ['waiting', 'delayed', 'blocked', 'active', 'completed', 'dead'] as const;

/** A registry with the queue gauges, collected on scrape from every discovered queue. */
export function queueMetrics(queues: QueueRegistry, registry = new Registry()): Registry {
  // Both gauges are collected in parallel on a scrape: they share one pass over the queues.
  let pass: Promise<QueueOverview[]> | null = null;
  const snapshot = () => {
    if (!pass) {
      pass = queues.overviews();
      const clear = () => setTimeout(() => (pass = null), 50).unref();
      pass.then(clear, clear);
    }
    return pass;
  };
  new Gauge({
    name: 'surety_jobs',
    help: 'Jobs per queue and state, read at scrape time.',
    labelNames: ['queue', 'state'] as const,
    registers: [registry],
    async collect() {
      const overviews = await snapshot();
      this.reset();
      for (const o of overviews) for (const s of STATES) this.set({ queue: o.name, state: s }, o.counts[s]);
    },
  });
  new Gauge({
    name: 'surety_workers',
    help: 'Live workers per queue (heartbeat not expired), read at scrape time.',
    labelNames: ['queue'] as const,
    registers: [registry],
    async collect() {
      const overviews = await snapshot();
      this.reset();
      for (const o of overviews) this.set({ queue: o.name }, o.workers);
    },
  });
  return registry;
}

function reuse<T extends Metric>(registry: Registry, name: string, create: () => T): T {
  return (registry.getSingleMetric(name) as T | undefined) ?? create();
}

export interface WorkerMetrics {
  registry: Registry;
  /** Stops counting (removes the listeners); the metrics stay registered. */
  stop(): void;
}

/**
 * Counts a Worker's outcomes in `registry` (default: a new one). Several workers may share a registry:
 * the metrics are created once and labelled by queue.
 */
// biome-ignore lint/suspicious/noExplicitAny: any Worker<Data, Result>; only its events and name are used.
export function workerMetrics(worker: Worker<any, any>, registry = new Registry()): WorkerMetrics {
  const completed = reuse(
    registry,
    'surety_jobs_completed_total',
    () =>
      new Counter({
        name: 'surety_jobs_completed_total',
        help: 'Jobs completed by workers of this process.',
        labelNames: ['queue'] as const,
        registers: [registry],
      }),
  );
  const failed = reuse(
    registry,
    'surety_jobs_failed_total',
    () =>
      new Counter({
        name: 'surety_jobs_failed_total',
        help: 'Failed attempts in workers of this process, by what happens next (waiting, delayed: retried; dead).',
        labelNames: ['queue', 'outcome'] as const,
        registers: [registry],
      }),
  );
  const latency = reuse(
    registry,
    'surety_job_latency_seconds',
    () =>
      new Histogram({
        name: 'surety_job_latency_seconds',
        help: 'Seconds from the time a job was due (runAt) to the outcome of its attempt.',
        labelNames: ['queue', 'status'] as const,
        buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800],
        registers: [registry],
      }),
  );
  const queue = worker.name;
  const since = (job: { runAt: number; createdAt: number }) =>
    Math.max(0, (Date.now() - Math.max(job.runAt, job.createdAt)) / 1000);
  const onCompleted = (job: { runAt: number; createdAt: number }) => {
    completed.inc({ queue });
    latency.observe({ queue, status: 'completed' }, since(job));
  };
  const onFailed = (job: { runAt: number; createdAt: number }, _err: Error, outcome: string) => {
    failed.inc({ queue, outcome });
    latency.observe({ queue, status: 'failed' }, since(job));
  };
  worker.on('completed', onCompleted);
  worker.on('failed', onFailed);
  return {
    registry,
    stop() {
      worker.off('completed', onCompleted);
      worker.off('failed', onFailed);
    },
  };
}
