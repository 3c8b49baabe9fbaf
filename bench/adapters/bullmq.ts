/**
 * BullMQ with its production setting `removeOnComplete: true` (set as the queue's default job option);
 * everything else is the default (its event stream included).
 */
import { Queue, Worker } from 'bullmq';
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

const JOB_NAME = 'bench';

class BullProducer implements Producer {
  constructor(private readonly queue: Queue) {}

  async add(data: JobData): Promise<void> {
    await this.queue.add(JOB_NAME, data);
  }

  async addBulk(jobs: readonly JobSpec[]): Promise<void> {
    const now = Date.now();
    await this.queue.addBulk(
      jobs.map((j) => ({
        name: JOB_NAME,
        data: j.data,
        opts: j.runAt === undefined ? {} : { delay: Math.max(0, j.runAt - now), timestamp: now },
      })),
    );
  }

  async outstanding(): Promise<number> {
    const c = await this.queue.getJobCounts('wait', 'prioritized', 'delayed', 'active', 'waiting-children');
    return Object.values(c).reduce((a, b) => a + b, 0);
  }

  async counts(): Promise<StateCounts> {
    const c = await this.queue.getJobCounts('wait', 'prioritized', 'delayed', 'active');
    return { waiting: (c.wait ?? 0) + (c.prioritized ?? 0), delayed: c.delayed ?? 0, active: c.active ?? 0 };
  }

  close(): Promise<void> {
    return this.queue.close();
  }
}

export const bullmq: Adapter = {
  lib: 'bullmq',
  label: 'BullMQ',
  retention: 'removeOnComplete: true',

  async producer(server: ServerAddress, name: string): Promise<Producer> {
    const queue = new Queue(name, {
      connection: { host: server.host, port: server.port },
      defaultJobOptions: { removeOnComplete: true },
    });
    await queue.waitUntilReady();
    return new BullProducer(queue);
  },

  async worker(spec: WorkerSpec): Promise<WorkerHandle> {
    const worker = new Worker(spec.queue, async (job) => spec.processor(job.data as JobData), {
      connection: { host: spec.server.host, port: spec.server.port },
      concurrency: spec.concurrency,
    });
    worker.on('completed', () => spec.onCompleted());
    worker.on('failed', (_job, err) => spec.onFailed(err));
    worker.on('error', (err) => spec.onFailed(err));
    await worker.waitUntilReady();
    return { close: () => worker.close() };
  },
};
