/**
 * The sandbox stage of `npm run bench` (`--only sandbox`): the per-job cost of running the processor
 * in a sandbox (docs/sandbox.md). One worker at concurrency 1 in this process drains N no-op jobs:
 * Surety with a function, a thread sandbox and a process sandbox; BullMQ with a function and its
 * sandboxed processor (a file path) in a child process and in a worker thread (useWorkerThreads).
 * Each worker first runs one job (so the sandbox is started: start-up is not counted), then gets the
 * N jobs (bulk adds of 1 000, much faster than the drain); the clock runs from the first add to the
 * N-th completion event.
 * Reported: jobs/s, µs per job, and the overhead per job over the same library's function processor.
 */
import { Queue as BullQueue, Worker as BullWorker } from 'bullmq';
import type { Redis } from 'ioredis';
import { Queue, Worker } from '../src/index.js';
import { monoMs } from './clock.js';
import { flushAll } from './redis-stats.js';

const MODULE = new URL('./sandbox-processor.mjs', import.meta.url);
const noop = (job: { data: unknown }) => ({ n: (job.data as { n: number }).n });

export interface SandboxRow {
  lib: 'surety' | 'bullmq';
  mode: 'function' | 'thread' | 'process';
  n: number;
  jobsPerSec: number;
  usPerJob: number;
}

interface Drainable {
  warm(): Promise<void>;
  /** Adds n jobs, resolves at the n-th completion (ms taken). */
  drain(n: number): Promise<number>;
  close(): Promise<void>;
}

function counter(): { seen: () => void; until: (n: number) => Promise<void> } {
  let count = 0;
  let target = Number.POSITIVE_INFINITY;
  let done: (() => void) | undefined;
  return {
    seen: () => {
      count++;
      if (count >= target) done?.();
    },
    until: (n) =>
      new Promise<void>((resolve) => {
        count = 0;
        target = n;
        done = resolve;
      }),
  };
}

function surety(url: string, name: string, mode: SandboxRow['mode']): Drainable {
  const q = new Queue(name, { connection: url });
  const retention = { completed: { maxCount: 0 } }; // like BullMQ's removeOnComplete
  const w =
    mode === 'function'
      ? new Worker(name, noop, { connection: url, concurrency: 1, retention })
      : new Worker(name, MODULE, { connection: url, concurrency: 1, sandbox: mode, retention });
  const c = counter();
  w.on('completed', () => c.seen());
  return {
    async warm() {
      const done = c.until(1);
      await q.add({ n: 0 });
      await done;
    },
    async drain(n) {
      const done = c.until(n);
      const t0 = monoMs();
      for (let i = 0; i < n; i += 1_000)
        await q.addBulk(Array.from({ length: Math.min(1_000, n - i) }, (_, j) => ({ data: { n: i + j } })));
      await done;
      return monoMs() - t0;
    },
    async close() {
      await w.close();
      await q.close();
    },
  };
}

function bullmq(url: string, name: string, mode: SandboxRow['mode']): Drainable {
  const connection = { url };
  const q = new BullQueue(name, { connection, defaultJobOptions: { removeOnComplete: true } });
  const w = new BullWorker(name, mode === 'function' ? async (job) => noop(job) : MODULE.pathname, {
    connection,
    concurrency: 1,
    useWorkerThreads: mode === 'thread',
  });
  const c = counter();
  w.on('completed', () => c.seen());
  return {
    async warm() {
      const done = c.until(1);
      await q.add('bench', { n: 0 });
      await done;
    },
    async drain(n) {
      const done = c.until(n);
      const t0 = monoMs();
      for (let i = 0; i < n; i += 1_000)
        await q.addBulk(
          Array.from({ length: Math.min(1_000, n - i) }, (_, j) => ({ name: 'bench', data: { n: i + j } })),
        );
      await done;
      return monoMs() - t0;
    },
    async close() {
      await w.close();
      await q.close();
    },
  };
}

const CASES: [SandboxRow['lib'], SandboxRow['mode']][] = [
  ['surety', 'function'],
  ['surety', 'thread'],
  ['surety', 'process'],
  ['bullmq', 'function'],
  ['bullmq', 'thread'],
  ['bullmq', 'process'],
];

/** Runs every case `runs` times (interleaved) and returns the median row of each. */
export async function runSandboxBench(
  url: string,
  admin: Redis,
  opts: { n: number; runs: number; libs: readonly string[] },
  log: (line: string) => void,
): Promise<SandboxRow[]> {
  const samples = new Map<string, number[]>();
  for (let run = 0; run < opts.runs; run++) {
    for (const [lib, mode] of CASES) {
      if (!opts.libs.includes(lib)) continue;
      await flushAll(admin);
      const name = `sandbox-${lib}-${mode}-${run}`;
      const d = lib === 'surety' ? surety(url, name, mode) : bullmq(url, name, mode);
      try {
        await d.warm();
        const ms = await d.drain(opts.n);
        const key = `${lib}/${mode}`;
        samples.set(key, [...(samples.get(key) ?? []), ms]);
        log(`  ${key} run ${run + 1}: ${opts.n} jobs in ${ms.toFixed(0)} ms`);
      } finally {
        await d.close();
      }
    }
  }
  return [...samples].map(([key, list]) => {
    const sorted = [...list].sort((a, b) => a - b);
    const ms = sorted[Math.floor(sorted.length / 2)]!;
    const [lib, mode] = key.split('/') as [SandboxRow['lib'], SandboxRow['mode']];
    return { lib, mode, n: opts.n, jobsPerSec: (opts.n / ms) * 1000, usPerJob: (ms * 1000) / opts.n };
  });
}

export function renderSandboxTable(rows: readonly SandboxRow[]): string {
  const base = (lib: string) => rows.find((r) => r.lib === lib && r.mode === 'function')?.usPerJob;
  const lines = [
    '| library | processor | jobs/s | µs per job | overhead per job |',
    '|---|---|---:|---:|---:|',
  ];
  for (const r of rows) {
    const b = base(r.lib);
    const over = r.mode === 'function' || b === undefined ? '-' : `+${Math.round(r.usPerJob - b)} µs`;
    lines.push(
      `| ${r.lib} | ${r.mode} | ${Math.round(r.jobsPerSec)} | ${Math.round(r.usPerJob)} | ${over} |`,
    );
  }
  return lines.join('\n');
}
