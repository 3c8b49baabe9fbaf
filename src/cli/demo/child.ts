/**
 * A demo worker process (the hidden `surety _demo-worker <url> <queue>` command): runs the built-in
 * demo processor and reports every event to the parent over IPC. It closes when the parent says so,
 * and stops on its own when the parent goes away (so a killed demo leaves no worker behind).
 */
import { Worker } from '../../worker/worker.js';
import { DEMO_RECOVER_INTERVAL_MS, type DemoData, demoProcessor } from './jobs.js';

export type ChildMessage =
  | { type: 'ready'; pid: number }
  | { type: 'started'; id: string; attempt: number }
  | { type: 'completed'; id: string; attempt: number; ms: number }
  | { type: 'failed'; id: string; attempt: number; ms: number; outcome: string; message: string }
  | { type: 'recovered'; requeued: string[]; dead: string[] }
  | { type: 'error'; code: string; message: string };

export async function runDemoChild(url: string, queue: string, prefix = 'surety'): Promise<void> {
  const send = (m: ChildMessage) => process.send?.(m);
  const starts = new Map<string, number>();
  const took = (id: string) => Math.round(performance.now() - (starts.get(id) ?? performance.now()));
  const worker = new Worker<DemoData, unknown>(
    queue,
    (job) => {
      starts.set(job.id, performance.now());
      send({ type: 'started', id: job.id, attempt: job.attempt });
      return demoProcessor(job);
    },
    {
      connection: url,
      prefix,
      concurrency: 3,
      recoverIntervalMs: DEMO_RECOVER_INTERVAL_MS,
      heartbeatMs: 1_000,
      pollIntervalMs: 1_000,
      autostart: false,
      logger: { warn: () => {} },
    },
  );
  worker.on('completed', (job) =>
    send({ type: 'completed', id: job.id, attempt: job.attempt, ms: took(job.id) }),
  );
  worker.on('failed', (job, err, outcome) =>
    send({
      type: 'failed',
      id: job.id,
      attempt: job.attempt,
      ms: took(job.id),
      outcome,
      message: err.message,
    }),
  );
  worker.on('recovered', (r) => send({ type: 'recovered', ...r }));
  worker.on('error', (err) => send({ type: 'error', code: err.code, message: err.message }));
  const closed = new Promise<void>((resolve) => {
    const close = (timeoutMs: number) => void worker.close({ timeoutMs }).finally(resolve);
    process.on('message', (m: { type?: string }) => {
      if (m?.type === 'close') close(5_000);
    });
    process.on('disconnect', () => close(1_000));
  });
  await worker.start();
  send({ type: 'ready', pid: process.pid });
  await closed;
  if (process.connected) process.disconnect();
}
