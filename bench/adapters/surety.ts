/**
 * Surety with its defaults: retention keeps the last 1 000 completed jobs (its production setting),
 * lifecycle events on. SURETY_EVENTS=off turns the event stream off in producer and worker, to
 * measure what events cost: SURETY_EVENTS=off npm run bench -- --only cost --libs surety
 */
import { Queue, Worker } from '../../src/index.js';
import type {
  Adapter,
  JobData,
  JobSpec,
  Producer,
  ServerAddress,
  StateCounts,
  WorkerHandle,
  WorkerSpec,
} from './types.js';

class SuretyProducer implements Producer {
  constructor(private readonly queue: Queue<JobData>) {}

  async add(data: JobData): Promise<void> {
    await this.queue.add(data);
  }

  async addBulk(jobs: readonly JobSpec[]): Promise<void> {
    await this.queue.addBulk(
      jobs.map((j) =>
        j.runAt === undefined ? { data: j.data } : { data: j.data, opts: { runAt: j.runAt } },
      ),
    );
  }

  async outstanding(): Promise<number> {
    const c = await this.counts();
    return c.waiting + c.delayed + c.active;
  }

  async counts(): Promise<StateCounts> {
    const { waiting, delayed, active } = await this.queue.counts();
    return { waiting, delayed, active };
  }

  close(): Promise<void> {
    return this.queue.close();
  }
}

const EVENTS = process.env.SURETY_EVENTS !== 'off';

export const surety: Adapter = {
  lib: 'surety',
  label: 'Surety',
  retention: `default retention: keeps the last 1 000 completed jobs; events ${EVENTS ? 'on' : 'off (SURETY_EVENTS=off)'}`,

  async producer(server: ServerAddress, name: string): Promise<Producer> {
    const queue = new Queue<JobData>(name, { connection: server.url, events: EVENTS });
    await queue.counts();
    return new SuretyProducer(queue);
  },

  async worker(spec: WorkerSpec): Promise<WorkerHandle> {
    const options = {
      connection: spec.server.url,
      concurrency: spec.concurrency,
      ...(spec.noPrefetch ? { prefetch: 0 } : {}),
      events: EVENTS,
      ...(process.env.SURETY_BENCH_NO_OTEL ? { telemetry: false } : {}),
    };
    const worker =
      spec.batchSize === undefined
        ? new Worker<JobData>(spec.queue, (job) => spec.processor(job.data), options)
        : new Worker<JobData>(
            spec.queue,
            async (jobs) => {
              await Promise.all(jobs.map((job) => spec.processor(job.data)));
            },
            { ...options, batch: { size: spec.batchSize } },
          );
    worker.on('completed', () => spec.onCompleted());
    worker.on('failed', (_job, err) => spec.onFailed(err));
    worker.on('error', (err) => spec.onFailed(err));
    await worker.start();
    return { close: () => worker.close() };
  },
};
