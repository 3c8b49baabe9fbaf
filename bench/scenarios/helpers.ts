/** Shared pieces of the scenarios: payload, bulk fill, worker lifetime, drain check. */
import type { JobData, JobSpec, Producer } from '../adapters/types.js';
import type { ChildConfig } from '../child-protocol.js';
import { sleep, withTimeout } from '../clock.js';
import type { WorkerProcess } from '../worker-process.js';
import type { RunContext } from './context.js';

export const BULK_CHUNK = 1_000;

const FILLER = 'x'.repeat(100);

/** The job payload of every scenario: `{ i, s: 'x'.repeat(100) }` (plus timing fields where needed). */
export function payload(i: number): JobData {
  return { i, s: FILLER };
}

/** Adds `n` jobs in awaited bulk calls of BULK_CHUNK. */
export async function fillBulk(
  producer: Producer,
  n: number,
  make: (i: number) => JobSpec = (i) => ({ data: payload(i) }),
): Promise<void> {
  for (let start = 0; start < n; start += BULK_CHUNK) {
    const chunk: JobSpec[] = [];
    for (let i = start; i < Math.min(n, start + BULK_CHUNK); i++) chunk.push(make(i));
    await producer.addBulk(chunk);
  }
}

export async function addSerial(producer: Producer, n: number): Promise<void> {
  for (let i = 0; i < n; i++) await producer.add(payload(i));
}

/** Runs `fn` with a worker child, and always closes the child (killing it if it does not exit). */
export async function withWorker<T>(
  ctx: RunContext,
  config: Omit<ChildConfig, 'lib' | 'server'>,
  fn: (worker: WorkerProcess) => Promise<T>,
): Promise<T> {
  const worker = await ctx.spawnWorker(config);
  try {
    return await fn(worker);
  } finally {
    await worker.close();
  }
}

export async function withProducer<T>(
  ctx: RunContext,
  queue: string,
  fn: (producer: Producer) => Promise<T>,
): Promise<T> {
  const producer = await withTimeout(ctx.producer(queue), 30_000, `${ctx.adapter.lib} producer ready`);
  try {
    return await fn(producer);
  } finally {
    await withTimeout(producer.close(), 10_000, `${ctx.adapter.lib} producer close`).catch(() => {});
  }
}

/**
 * After the worker reported its last completion, the library's own counters must show nothing
 * waiting, delayed or active (polled for at most 2 s); otherwise the measurement is wrong.
 */
export async function confirmDrained(producer: Producer, what: string): Promise<void> {
  const deadline = Date.now() + 2_000;
  for (;;) {
    const left = await producer.outstanding();
    if (left === 0) return;
    if (Date.now() > deadline)
      throw new Error(`${what}: ${left} jobs still outstanding after the last completion`);
    await sleep(10);
  }
}

export function perSecond(jobs: number, ms: number): number {
  return (jobs / ms) * 1000;
}
