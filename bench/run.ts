/**
 * `npm run bench`: Surety against BullMQ and Bee-Queue on one private redis-server (default config:
 * hz 10, no persistence; `--aof` for appendfsync always). Each scenario runs `runs` times with the
 * libraries interleaved (the starting library rotates each run), Redis flushed between measurements.
 * Prints a table (or JSON lines with --json) and writes bench/results/<date>.json and latest.svg.
 * See cli.ts for the options and scenarios/ for what each scenario measures.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { Redis } from 'ioredis';
import { startRedis } from '../test/helpers/redis-server.js';
import { loadAdapter } from './adapters/index.js';
import type { Adapter, ServerAddress } from './adapters/types.js';
import { cleanupAll, installExitHandlers, track } from './cleanup.js';
import { type BenchOptions, parseArgs, USAGE } from './cli.js';
import { monoMs, withTimeout } from './clock.js';
import { renderClusterTable, runClusterBench } from './cluster.js';
import { installCounter } from './command-counter.js';
import { renderGroupsTable, runGroupsBench } from './groups.js';
import { outboxUnavailable, renderOutboxTable, runOutboxBench } from './outbox.js';
import { RESULTS_DIR, writeResults } from './output.js';
import { flushAll, parseInfo } from './redis-stats.js';
import { renderTable } from './report.js';
import { Results } from './results.js';
import { renderSandboxTable, runSandboxBench } from './sandbox.js';
import { runScaleStage } from './scale-stage.js';
import type { RunContext, Scenario } from './scenarios/context.js';
import { SCENARIOS } from './scenarios/index.js';
import { renderSvg } from './svg.js';
import { renderTelemetryTable, runTelemetryBench } from './telemetry.js';
import { WorkerProcess } from './worker-process.js';
import { renderWorkflowsTable, runWorkflowsBench } from './workflows.js';

/** Safety net over every scenario run (each wait inside has its own, shorter deadline). */
const SCENARIO_TIMEOUT_MS = 10 * 60_000;
const DONE_TIMEOUT_MS = 180_000;

const log = (line: string) => process.stderr.write(`${line}\n`);

interface Harness {
  opts: BenchOptions;
  server: ServerAddress;
  admin: Redis;
  counter: ReturnType<typeof installCounter>;
  results: Results;
  queueSeq: number;
}

function makeContext(h: Harness, adapter: Adapter, run: number): RunContext & { kill(): Promise<void> } {
  const children = new Set<WorkerProcess>();
  return {
    adapter,
    server: h.server,
    admin: h.admin,
    sizes: h.opts.sizes,
    counter: h.counter,
    queueName: (tag) => `bench-${adapter.lib}-${tag}-r${run + 1}-${++h.queueSeq}`,
    producer: (queue) => adapter.producer(h.server, queue),
    spawnWorker: async (config) => {
      const profileFile = h.opts.cpuProf ? `${RESULTS_DIR}profiles/${config.queue}.cpuprofile` : undefined;
      if (profileFile) mkdirSync(`${RESULTS_DIR}profiles`, { recursive: true });
      const child = await WorkerProcess.spawn(
        { ...config, lib: adapter.lib, server: h.server, ...(profileFile ? { profileFile } : {}) },
        { doneTimeoutMs: DONE_TIMEOUT_MS },
      );
      children.add(child);
      return child;
    },
    flush: () => flushAll(h.admin),
    kill: async () => {
      await Promise.all([...children].map((c) => c.kill()));
    },
  };
}

async function runOne(h: Harness, scenario: Scenario, adapter: Adapter, run: number): Promise<void> {
  const ctx = makeContext(h, adapter, run);
  const t0 = monoMs();
  const pending = scenario.run(ctx);
  try {
    const samples = await withTimeout(pending, SCENARIO_TIMEOUT_MS, `${scenario.name} ${adapter.lib}`);
    for (const s of samples) h.results.add(scenario.name, adapter.lib, s);
    const shown = samples
      .map(
        (s) =>
          `${s.variant ? `${s.variant}: ` : ''}${Object.entries(s.metrics)
            .map(([k, v]) => `${k}=${+v.toFixed(2)}`)
            .join(' ')}`,
      )
      .join(' | ');
    log(`  run ${run + 1} ${adapter.label.padEnd(9)} ${shown}  (${((monoMs() - t0) / 1000).toFixed(1)} s)`);
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    h.results.fail(scenario.name, adapter.lib, message);
    log(`  run ${run + 1} ${adapter.label.padEnd(9)} FAILED: ${message}`);
    await ctx.kill();
    await withTimeout(pending, 20_000, 'abandoned scenario').catch(() => {});
  }
}

async function main(opts: BenchOptions): Promise<void> {
  const started = new Date();
  const loadStart = loadavg();
  const t0 = monoMs();
  installExitHandlers();
  const counter = installCounter();
  // DEBUG (loopback only): the scale stage settles its backlogs with DEBUG RELOAD (bench/scale.ts).
  const redis = await startRedis({ aof: opts.aof, config: { 'enable-debug-command': 'local' } });
  track({
    stop: () => redis.stop(),
    killSync: () => redis.pid !== undefined && process.kill(redis.pid, 'SIGKILL'),
  });
  const admin = new Redis(redis.port, '127.0.0.1', { maxRetriesPerRequest: 3 });
  counter.exclude(admin);
  const h: Harness = {
    opts,
    server: { host: '127.0.0.1', port: redis.port, url: redis.url },
    admin,
    counter,
    results: new Results(),
    queueSeq: 0,
  };
  const adapters = await Promise.all(opts.libs.map(loadAdapter));
  const version = parseInfo(await admin.info('server')).redis_version ?? '?';
  const scenarios = SCENARIOS.filter((s) => opts.only.includes(s.name));
  const notes = [
    `redis-server ${version} private instance, default config (hz 10) but for enable-debug-command local, ${opts.aof ? 'appendonly yes, appendfsync always' : 'no persistence'}`,
    ...adapters.map((a) => `${a.label}: ${a.retention} (production setting)`),
    'e2e end mark: the N-th completion event in the worker process (each library emits it after the write to Redis), CLOCK_MONOTONIC; queue checked empty after',
  ];
  log(
    `Surety benchmark: ${opts.runs} run(s), N=${opts.sizes.n}, libraries ${adapters.map((a) => a.label).join(', ')}`,
  );
  for (const n of notes) log(`  ${n}`);
  for (const scenario of scenarios) {
    log(`\n${scenario.name}: ${scenario.describe(opts.sizes)}`);
    for (let run = 0; run < opts.runs; run++) {
      for (let k = 0; k < adapters.length; k++) {
        await runOne(h, scenario, adapters[(run + k) % adapters.length]!, run);
      }
    }
  }
  let table = renderTable(h.results, opts.libs);
  if (opts.only.includes('cluster') && opts.libs.includes('surety')) {
    log('\ncluster: one queue, partitions 1 vs 3, on a private 3-master Redis Cluster (Surety only)');
    const rows = await runClusterBench(opts.sizes.n, opts.runs, log);
    const clusterTable = renderClusterTable(rows);
    table = `${table}\n\nRedis Cluster, 3 masters, N=${opts.sizes.n}, medians of ${opts.runs} run(s):\n${clusterTable}`;
    mkdirSync(RESULTS_DIR, { recursive: true });
    writeFileSync(
      `${RESULTS_DIR}${started.toISOString().slice(0, 10)}-cluster${opts.quick ? '-quick' : ''}.json`,
      `${JSON.stringify({ startedAt: started.toISOString(), n: opts.sizes.n, runs: opts.runs, rows }, null, 2)}\n`,
    );
  }
  if (opts.only.includes('groups') && opts.libs.includes('surety')) {
    const manyGroups = opts.quick ? 10_000 : 100_000;
    log(
      `\ngroups: Surety vs GroupMQ, per-group concurrency 1, 1 / 100 / ${manyGroups} groups, worker concurrency 50`,
    );
    await flushAll(admin);
    const { rows, memory } = await runGroupsBench(
      redis.url,
      admin,
      { n: opts.sizes.n, manyGroups, runs: opts.runs },
      log,
    );
    table = `${table}\n\nGroups, N=${opts.sizes.n} jobs (at least one per group), medians of ${opts.runs} run(s):\n${renderGroupsTable(rows, memory)}`;
    mkdirSync(RESULTS_DIR, { recursive: true });
    writeFileSync(
      `${RESULTS_DIR}${started.toISOString().slice(0, 10)}-groups${opts.quick ? '-quick' : ''}.json`,
      `${JSON.stringify({ startedAt: started.toISOString(), n: opts.sizes.n, runs: opts.runs, rows, memory }, null, 2)}\n`,
    );
  }
  if (opts.only.includes('sandbox')) {
    // Sandbox start-up is not counted (see bench/sandbox.ts): N/10 jobs are enough for the per-job cost.
    const n = Math.max(200, Math.round(opts.sizes.n / 10));
    log(`\nsandbox: per-job cost of function / thread / process processors, concurrency 1, N=${n}`);
    const rows = await runSandboxBench(redis.url, admin, { n, runs: opts.runs, libs: opts.libs }, log);
    table = `${table}\n\nSandboxed processors, N=${n} no-op jobs, concurrency 1, medians of ${opts.runs} run(s):\n${renderSandboxTable(rows)}`;
    mkdirSync(RESULTS_DIR, { recursive: true });
    writeFileSync(
      `${RESULTS_DIR}${started.toISOString().slice(0, 10)}-sandbox${opts.quick ? '-quick' : ''}.json`,
      `${JSON.stringify({ startedAt: started.toISOString(), n, runs: opts.runs, rows }, null, 2)}\n`,
    );
  }
  if (opts.only.includes('telemetry') && opts.libs.includes('surety')) {
    log(`\ntelemetry: OpenTelemetry off / API without SDK / SDK (spans discarded), N=${opts.sizes.n}`);
    const rows = await runTelemetryBench(redis.url, admin, { n: opts.sizes.n, runs: opts.runs }, log);
    table = `${table}\n\nOpenTelemetry tracing (bench/telemetry.ts), N=${opts.sizes.n}, worker concurrency 50, medians of ${Math.max(3, opts.runs)} rounds; (+x) = versus off:\n${renderTelemetryTable(rows)}`;
    mkdirSync(RESULTS_DIR, { recursive: true });
    writeFileSync(
      `${RESULTS_DIR}${started.toISOString().slice(0, 10)}-telemetry${opts.quick ? '-quick' : ''}.json`,
      `${JSON.stringify({ startedAt: started.toISOString(), n: opts.sizes.n, runs: opts.runs, rows }, null, 2)}\n`,
    );
  }
  if (opts.only.includes('workflows') && opts.libs.includes('surety')) {
    const latencyFlows = opts.sizes.latencyJobs;
    log(
      `\nworkflows: plain job vs signal park/resume vs parent with 1 / 10 children, about N=${opts.sizes.n} jobs per shape, latency over ${latencyFlows} flows one at a time`,
    );
    const rows = await runWorkflowsBench(
      redis.url,
      admin,
      { n: opts.sizes.n, latencyFlows, runs: opts.runs },
      log,
    );
    table = `${table}\n\nWorkflows (bench/workflows.ts), about N=${opts.sizes.n} jobs per shape, worker concurrency 50, medians of ${opts.runs} run(s); (x) = versus a plain job, extra = over its jobs run plain; latency: plain add -> start, signal sent / last child completed -> running again, ${latencyFlows} flows one at a time per run:\n${renderWorkflowsTable(rows)}`;
    if (opts.json)
      for (const row of rows)
        process.stdout.write(`${JSON.stringify({ stage: 'workflows', lib: 'surety', ...row })}\n`);
    mkdirSync(RESULTS_DIR, { recursive: true });
    writeFileSync(
      `${RESULTS_DIR}${started.toISOString().slice(0, 10)}-workflows${opts.quick ? '-quick' : ''}.json`,
      `${JSON.stringify({ startedAt: started.toISOString(), commit: gitDescribe(), n: opts.sizes.n, latencyFlows, runs: opts.runs, loadavgStart: loadStart.map((l) => l.toFixed(2)).join(' '), rows }, null, 2)}\n`,
    );
  }
  const noPostgres = opts.only.includes('outbox') ? outboxUnavailable() : undefined;
  if (noPostgres) log(`\noutbox: skipped: ${noPostgres}`);
  else if (opts.only.includes('outbox') && opts.libs.includes('surety')) {
    const sizes = { latencyJobs: opts.quick ? 100 : 200, txPairs: opts.quick ? 500 : 2_000 };
    log(
      `\noutbox: Postgres outbox, N=${opts.sizes.n}: relay vs addBulk, commit -> Redis latency (${sizes.latencyJobs} jobs), outbox.add in a transaction (${sizes.txPairs} pairs)`,
    );
    await flushAll(admin);
    const r = await runOutboxBench(redis.url, admin, { n: opts.sizes.n, runs: opts.runs, ...sizes }, log);
    table = `${table}\n\nPostgres outbox (bench/outbox.ts), N=${opts.sizes.n}, ${opts.runs} run(s); relay x1 / addBulk = ${r.ratio.toFixed(2)}x, relay x1 / addBulk + ids = ${r.ratioIds.toFixed(2)}x, relay x2 / addBulk = ${r.ratio2.toFixed(2)}x:\n${renderOutboxTable(r)}`;
    mkdirSync(RESULTS_DIR, { recursive: true });
    writeFileSync(
      `${RESULTS_DIR}${started.toISOString().slice(0, 10)}-outbox${opts.quick ? '-quick' : ''}.json`,
      `${JSON.stringify({ startedAt: started.toISOString(), commit: gitDescribe(), n: opts.sizes.n, runs: opts.runs, ...sizes, loadavgStart: loadStart.map((l) => l.toFixed(2)).join(' '), ...r }, null, 2)}\n`,
    );
  }
  if (opts.only.includes('scale')) {
    const scaleTable = await runScaleStage(
      { server: h.server, admin, libs: opts.libs, n: opts.sizes.n, ...opts.scale },
      { started, quick: opts.quick, partial: opts.scale.partial, redis: version, commit: gitDescribe() },
      log,
    );
    table = `${table}\n\n${scaleTable}`;
  }
  const header = [
    `Surety benchmark ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC: N=${opts.sizes.n} jobs, ${opts.runs} run(s) per scenario, libraries interleaved`,
    ...notes.map((n) => `  ${n}`),
    `  Surety at commit ${gitDescribe()}`,
    `  load average at start ${loadStart.map((l) => l.toFixed(2)).join(' ')}, at end ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} (${cpus().length} CPUs)`,
  ].join('\n');
  if (opts.json) {
    for (const line of h.results.toJson()) process.stdout.write(`${JSON.stringify(line)}\n`);
    log(`\n${header}\n\n${table}`);
  } else {
    process.stdout.write(`\n${header}\n\n${table}\n`);
  }
  const date = started.toISOString().slice(0, 10);
  const suffix = [opts.quick ? 'quick' : '', opts.partial ? 'partial' : '', opts.aof ? 'aof' : '']
    .filter(Boolean)
    .join('-');
  const files = writeResults(
    {
      date,
      startedAt: started.toISOString(),
      durationS: Math.round((monoMs() - t0) / 1000),
      machine: {
        cpus: cpus().length,
        cpuModel: cpus()[0]?.model ?? '?',
        memGiB: Math.round(totalmem() / 2 ** 30),
        loadavgStart: loadStart.map((l) => l.toFixed(2)).join(' '),
        loadavgEnd: loadavg()
          .map((l) => l.toFixed(2))
          .join(' '),
        node: process.version,
        redis: version,
      },
      options: {
        n: opts.sizes.n,
        runs: opts.runs,
        quick: opts.quick,
        aof: opts.aof,
        libs: opts.libs,
        sizes: opts.sizes,
      },
      scenarios: Object.fromEntries(scenarios.map((s) => [s.name, s.describe(opts.sizes)])),
      notes,
    },
    h.results,
    renderSvg(
      h.results,
      opts.libs,
      `${date}, N=${opts.sizes.n}, ${opts.runs} run(s), ${opts.aof ? 'AOF always' : 'no persistence'}`,
    ),
    suffix,
  );
  log(`\nwrote ${files.join(' and ')} in ${((monoMs() - t0) / 1000).toFixed(0)} s`);
  admin.disconnect();
}

/** HEAD and whether src/ has uncommitted changes (read-only git calls). */
function gitDescribe(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { encoding: 'utf8' }).trim();
    return dirty ? `${head} (src/ modified)` : head;
  } catch {
    return 'unknown';
  }
}

let parsed: BenchOptions | 'help';
try {
  parsed = parseArgs(process.argv.slice(2));
} catch (err) {
  log(err instanceof Error ? err.message : String(err));
  process.exit(2);
}
if (parsed === 'help') {
  log(USAGE);
} else {
  main(parsed)
    .catch((err) => {
      log(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      process.exitCode = 1;
    })
    .finally(async () => {
      await cleanupAll();
      process.exit();
    });
}
