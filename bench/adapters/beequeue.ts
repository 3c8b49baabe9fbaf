/**
 * Bee-Queue with its production setting `removeOnSuccess: true`. Neither side subscribes to job events
 * (`getEvents: false`, `storeJobs: false`: no caller waits on a job); the worker still publishes them
 * (`sendEvents`, default true). Delayed jobs need `activateDelayedJobs: true` on the worker.
 */
import BeeQueue from 'bee-queue';
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

class BeeProducer implements Producer {
  constructor(private readonly queue: BeeQueue<JobData>) {}

  async add(data: JobData): Promise<void> {
    await this.queue.createJob(data).save();
  }

  async addBulk(jobs: readonly JobSpec[]): Promise<void> {
    const created = jobs.map((j) => {
      const job = this.queue.createJob(j.data);
      return j.runAt === undefined ? job : job.delayUntil(j.runAt);
    });
    const errors = await this.queue.saveAll(created);
    if (errors.size > 0) throw [...errors.values()][0];
  }

  async outstanding(): Promise<number> {
    const h = await this.queue.checkHealth();
    return h.waiting + h.delayed + h.active;
  }

  async counts(): Promise<StateCounts> {
    const { waiting, delayed, active } = await this.queue.checkHealth();
    return { waiting, delayed, active };
  }

  close(): Promise<void> {
    return this.queue.close();
  }
}

export const beequeue: Adapter = {
  lib: 'beequeue',
  label: 'Bee-Queue',
  retention: 'removeOnSuccess: true',

  async producer(server: ServerAddress, name: string): Promise<Producer> {
    const queue = new BeeQueue<JobData>(name, {
      redis: { host: server.host, port: server.port },
      isWorker: false,
      getEvents: false,
      storeJobs: false,
    });
    await queue.ready();
    return new BeeProducer(queue);
  },

  async worker(spec: WorkerSpec): Promise<WorkerHandle> {
    const queue = new BeeQueue<JobData>(spec.queue, {
      redis: { host: spec.server.host, port: spec.server.port },
      isWorker: true,
      getEvents: false,
      storeJobs: false,
      removeOnSuccess: true,
      activateDelayedJobs: spec.delayed,
    });
    queue.on('succeeded', () => spec.onCompleted());
    queue.on('failed', (_job, err) => spec.onFailed(err));
    queue.on('error', (err) => spec.onFailed(err));
    await queue.ready();
    queue.process(spec.concurrency, async (job) => spec.processor(job.data));
    return { close: () => queue.close(10_000) };
  },
};
