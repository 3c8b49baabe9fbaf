/**
 * The telemetry stage of `npm run bench` (`--only telemetry`, Surety alone): what OpenTelemetry
 * tracing costs (docs/telemetry.md), three ways in the same run, interleaved:
 *
 * - `off`: `telemetry: false` on the Queue and the Worker (what a process without the API package gets);
 * - `api, no SDK`: the default with @opentelemetry/api loaded but no SDK registered (the API's no-op
 *   tracer answers: what most applications that merely have the package installed get);
 * - `SDK`: a BasicTracerProvider registered globally with an AsyncLocalStorage context manager and a
 *   BatchSpanProcessor whose exporter discards the spans (the SDK's own cost, no network).
 *
 * Each mode, in this process: N/10 awaited single adds (one `add` span each), then a worker at
 * concurrency 50 drains N jobs added in bulk (one `add` span per 1 000, one `process` span per job).
 * Reported: adds/s and CPU µs per add; drain jobs/s and worker CPU µs per job (process.cpuUsage over
 * the drain, in which this process runs only the worker); medians of at least 3 interleaved rounds
 * (the starting mode rotates), after one warm-up round. And the hooks alone, without Redis: an add
 * span and a process span started, run in and ended, 100 000 times each (far less noisy than the rest).
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import type { Redis } from 'ioredis';
import { Queue, Worker } from '../src/index.js';
import { resolveTelemetry, type TracedAttempt } from '../src/telemetry/tracing.js';
import { monoMs } from './clock.js';
import { flushAll } from './redis-stats.js';

export type TelemetryMode = 'off' | 'api, no SDK' | 'SDK';
const MODES: TelemetryMode[] = ['off', 'api, no SDK', 'SDK'];

export interface TelemetryRow {
  mode: TelemetryMode;
  adds: number;
  addsPerSec: number;
  cpuUsPerAdd: number;
  n: number;
  jobsPerSec: number;
  cpuUsPerJob: number;
  /** The hooks alone, no Redis: an add call's span, and an attempt's span (started, run in, ended), ns. */
  addNs: number;
  processNs: number;
}

/**
 * Times the hooks alone, without Redis, over `calls` jobs: an add call's `produce` (with an await, as
 * add has) and an attempt's `wrap` + `ended`; ns per job each. Each add's trace field is carried into
 * the next attempt, so with an SDK the process span has a parent, as in production.
 */
async function hookNs(mode: TelemetryMode, calls: number): Promise<{ addNs: number; processNs: number }> {
  const tracing = resolveTelemetry('bench', mode !== 'off');
  const traces: string[] = new Array(calls);
  const run = tracing.wrap(
    'bench',
    (job: TracedAttempt) => job.id,
    (job) => traces[Number(job.id)]!,
  );
  // A macrotask turn every 1 000 calls lets the SDK's batch processor export, as it would in production.
  const turn = () => new Promise((resolve) => setImmediate(resolve));
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) {
    traces[i] = await tracing.produce(
      'bench',
      'add',
      {},
      (t) => Promise.resolve(t),
      () => '1',
    );
    if (i % 1_000 === 999) await turn();
  }
  const t1 = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) {
    const job: TracedAttempt = { id: String(i), attempt: 1, name: '' };
    run(job);
    tracing.ended(job, 'completed');
    if (i % 1_000 === 999) await turn();
  }
  const t2 = process.hrtime.bigint();
  return { addNs: Number(t1 - t0) / calls, processNs: Number(t2 - t1) / calls };
}

/** Accepts every batch and keeps nothing: the SDK's cost without an exporter's. */
const discard: SpanExporter = {
  export: (_spans, done) => done({ code: 0 }),
  shutdown: () => Promise.resolve(),
};

/** Registers the SDK globally for the `SDK` mode; returns how to take it down again. */
function registerSdk(): () => Promise<void> {
  const provider = new BasicTracerProvider({
    spanProcessors: [new BatchSpanProcessor(discard, { maxQueueSize: 100_000 })],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(provider);
  return async () => {
    await provider.shutdown();
    trace.disable();
    context.disable();
  };
}

function cpuUs(): number {
  const u = process.cpuUsage();
  return u.user + u.system;
}

async function measure(url: string, name: string, mode: TelemetryMode, n: number, adds: number) {
  const telemetry = mode === 'off' ? { telemetry: false } : {};
  const q = new Queue(name, { connection: url, ...telemetry });
  const c0 = cpuUs();
  const t0 = monoMs();
  for (let i = 0; i < adds; i++) await q.add({ i, s: 'x'.repeat(100) });
  const addMs = monoMs() - t0;
  const addCpu = cpuUs() - c0;
  await q.drain();
  for (let i = 0; i < n; i += 1_000)
    await q.addBulk(
      Array.from({ length: Math.min(1_000, n - i) }, (_, j) => ({ data: { i: i + j, s: 'x'.repeat(100) } })),
    );
  let done = 0;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const c1 = cpuUs();
  const t1 = monoMs();
  const w = new Worker(name, () => null, {
    connection: url,
    concurrency: 50,
    retention: { completed: { maxCount: 0 } },
    ...telemetry,
  });
  w.on('completed', () => {
    if (++done === n) finish();
  });
  await finished;
  const drainMs = monoMs() - t1;
  const drainCpu = cpuUs() - c1;
  await w.close();
  await q.close();
  return { addMs, addCpu, drainMs, drainCpu };
}

/** Jobs per hooks-alone measurement: long enough (~0.1 s off, ~1 s with the SDK) to average out noise. */
const HOOK_CALLS = 100_000;

const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!;

/** Runs the three modes `runs` times (the starting mode rotates) and returns the median row of each. */
export async function runTelemetryBench(
  url: string,
  admin: Redis,
  opts: { n: number; runs: number },
  log: (line: string) => void,
): Promise<TelemetryRow[]> {
  const adds = Math.max(200, Math.round(opts.n / 10));
  const samples = new Map<
    TelemetryMode,
    (Awaited<ReturnType<typeof measure>> & { addNs: number; processNs: number })[]
  >();
  // A warm-up round first (not counted): the first mode measured would otherwise pay for the JIT.
  // At least 3 rounds: a round takes about a second, and one is too noisy on a shared machine.
  await flushAll(admin);
  await measure(url, 'telemetry-warm-up', 'off', opts.n, adds);
  const rounds = Math.max(3, opts.runs);
  for (let run = 0; run < rounds; run++) {
    for (let k = 0; k < MODES.length; k++) {
      const mode = MODES[(run + k) % MODES.length]!;
      await flushAll(admin);
      const takeDown = mode === 'SDK' ? registerSdk() : undefined;
      try {
        const m = {
          ...(await measure(url, `telemetry-${k}-${run}`, mode, opts.n, adds)),
          ...(await hookNs(mode, HOOK_CALLS)),
        };
        samples.set(mode, [...(samples.get(mode) ?? []), m]);
        log(
          `  ${mode.padEnd(12)} run ${run + 1}: ${adds} adds in ${m.addMs.toFixed(0)} ms, ${opts.n} jobs drained in ${m.drainMs.toFixed(0)} ms (${(m.drainCpu / opts.n).toFixed(1)} CPU µs/job), hooks alone: add ${(m.addNs / 1000).toFixed(2)} µs, process ${(m.processNs / 1000).toFixed(2)} µs`,
        );
      } finally {
        await takeDown?.();
      }
    }
  }
  return MODES.filter((m) => samples.has(m)).map((mode) => {
    const s = samples.get(mode)!;
    return {
      mode,
      adds,
      addsPerSec: (adds / median(s.map((x) => x.addMs))) * 1000,
      cpuUsPerAdd: median(s.map((x) => x.addCpu)) / adds,
      n: opts.n,
      jobsPerSec: (opts.n / median(s.map((x) => x.drainMs))) * 1000,
      cpuUsPerJob: median(s.map((x) => x.drainCpu)) / opts.n,
      addNs: median(s.map((x) => x.addNs)),
      processNs: median(s.map((x) => x.processNs)),
    };
  });
}

export function renderTelemetryTable(rows: readonly TelemetryRow[]): string {
  const off = rows.find((r) => r.mode === 'off');
  const delta = (v: number, base: number | undefined) =>
    base === undefined ? '' : ` (${v >= base ? '+' : ''}${(v - base).toFixed(1)})`;
  const lines = [
    '| tracing | single adds/s | CPU µs per add | drain jobs/s | worker CPU µs per job | hooks alone: add span, µs | hooks alone: process span, µs |',
    '|---|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    lines.push(
      `| ${r.mode} | ${Math.round(r.addsPerSec)} | ${r.cpuUsPerAdd.toFixed(1)}${delta(r.cpuUsPerAdd, off?.cpuUsPerAdd)} | ${Math.round(r.jobsPerSec)} | ${r.cpuUsPerJob.toFixed(1)}${delta(r.cpuUsPerJob, off?.cpuUsPerJob)} | ${(r.addNs / 1000).toFixed(2)} | ${(r.processNs / 1000).toFixed(2)} |`,
    );
  }
  return lines.join('\n');
}
