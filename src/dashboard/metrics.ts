/**
 * Prometheus metrics with prom-client.
 *
 * - `queueMetrics(queues)`: `surety_jobs{queue,state}` and `surety_workers{queue}` gauges, read through
 *   the Queue admin API (counts(), workers()) when Prometheus scrapes, so they cost nothing between scrapes.
 * - `workerMetrics(worker)`: counters and histograms fed by a Worker's `completed` / `failed` events, in
 *   this process. Per attempt: `surety_job_duration_seconds` runs from `job.startedAt` (the processor was
 *   called, worker clock) to the outcome; `surety_job_wait_seconds` from the time the job was due
 *   (`runAt`, Redis clock) to `startedAt`, clamped at 0 against clock skew; `surety_job_latency_seconds`
 *   from `runAt` to the outcome (the sum of the two).
 */
import { Counter, Gauge, Histogram, type Metric, Registry } from 'prom-client';
import { JOB_STATES } from '../states.js';
import type { Job } from '../worker/job.js';
import type { Worker } from '../worker/worker.js';
import type { QueueOverview, QueueRegistry } from './queues.js';

const BUCKETS = [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800];

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
      for (const o of overviews)
        for (const s of JOB_STATES) this.set({ queue: o.name, state: s }, o.counts[s]);
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
        buckets: BUCKETS,
        registers: [registry],
      }),
  );
  const duration = reuse(
    registry,
    'surety_job_duration_seconds',
    () =>
      new Histogram({
        name: 'surety_job_duration_seconds',
        help: 'Seconds an attempt ran: from the call of the processor (job.startedAt) to its outcome.',
        labelNames: ['queue', 'status'] as const,
        buckets: BUCKETS,
        registers: [registry],
      }),
  );
  const wait = reuse(
    registry,
    'surety_job_wait_seconds',
    () =>
      new Histogram({
        name: 'surety_job_wait_seconds',
        help: 'Seconds a job waited to start once due: job.startedAt - runAt, clamped at 0 (clock skew).',
        labelNames: ['queue'] as const,
        buckets: BUCKETS,
        registers: [registry],
      }),
  );
  const retried = reuse(
    registry,
    'surety_jobs_retried_total',
    () =>
      new Counter({
        name: 'surety_jobs_retried_total',
        help: 'Failed attempts in workers of this process that will be retried (outcome waiting or delayed).',
        labelNames: ['queue'] as const,
        registers: [registry],
      }),
  );
  const recovered = reuse(
    registry,
    'surety_jobs_recovered_total',
    () =>
      new Counter({
        name: 'surety_jobs_recovered_total',
        help: 'Jobs of crashed or stalled workers whose lease expired, recovered by this worker: requeued, or dead when out of attempts.',
        labelNames: ['queue', 'outcome'] as const,
        registers: [registry],
      }),
  );
  const queue = worker.name;
  const seconds = (ms: number) => Math.max(0, ms / 1000);
  const observe = (job: Job<unknown>, status: 'completed' | 'failed') => {
    const now = Date.now();
    latency.observe({ queue, status }, seconds(now - Math.max(job.runAt, job.createdAt)));
    duration.observe({ queue, status }, seconds(now - job.startedAt));
    wait.observe({ queue }, seconds(job.startedAt - job.runAt));
  };
  const onCompleted = (job: Job<unknown>) => {
    completed.inc({ queue });
    observe(job, 'completed');
  };
  const onFailed = (job: Job<unknown>, _err: Error, outcome: string) => {
    failed.inc({ queue, outcome });
    if (outcome === 'waiting' || outcome === 'delayed') retried.inc({ queue });
    observe(job, 'failed');
  };
  const onRecovered = (r: { requeued: string[]; dead: string[] }) => {
    if (r.requeued.length > 0) recovered.inc({ queue, outcome: 'requeued' }, r.requeued.length);
    if (r.dead.length > 0) recovered.inc({ queue, outcome: 'dead' }, r.dead.length);
  };
  worker.on('completed', onCompleted);
  worker.on('failed', onFailed);
  worker.on('recovered', onRecovered);
  return {
    registry,
    stop() {
      worker.off('completed', onCompleted);
      worker.off('failed', onFailed);
      worker.off('recovered', onRecovered);
    },
  };
}
