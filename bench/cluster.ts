/**
 * The cluster stage of `npm run bench` (`--only cluster`): one logical queue on a private 3-master
 * Redis Cluster, with partitions 1 and 3. For each: N jobs added in bulk, then drained by one worker
 * (concurrency 50, no-op processor) in this process. Reported per run: enqueue and drain jobs/s, and
 * each master's Redis CPU per job during the drain (INFO used_cpu_* deltas), i.e. how evenly the
 * load spreads. Surety only: the other libraries keep a queue in one slot by design.
 *
 * This 2-core machine runs the three masters and the worker on the same cores, so it cannot show a
 * speed-up; the per-master cost is what docs/scaling.md sizes a cluster from.
 */
import { Redis } from 'ioredis';
import { Queue, Worker } from '../src/index.js';
import { RedisCluster } from '../test/helpers/redis-cluster.js';
import { monoMs } from './clock.js';
import { parseInfo } from './redis-stats.js';

export interface ClusterRow {
  partitions: number;
  run: number;
  enqueuePerSec: number;
  drainPerSec: number;
  /** Redis CPU µs per job on each master during the drain, in the masters' port order. */
  cpuUsPerJobByMaster: number[];
  /** Largest master's share of the total Redis CPU of the drain (1/3 = perfectly even). */
  maxShare: number;
}

async function cpuUs(ports: number[]): Promise<number[]> {
  return Promise.all(
    ports.map(async (port) => {
      const c = new Redis({ port, host: '127.0.0.1' });
      try {
        const info = parseInfo(await c.info('cpu'));
        return (Number(info.used_cpu_user) + Number(info.used_cpu_sys)) * 1e6;
      } finally {
        c.disconnect();
      }
    }),
  );
}

async function runOnce(
  cluster: RedisCluster,
  partitions: number,
  n: number,
  run: number,
): Promise<ClusterRow> {
  const name = `bench-cluster-p${partitions}-r${run}`;
  const connection = cluster.url;
  const queue = new Queue<number>(name, { connection, partitions, events: false });
  const ports = (await cluster.masters()).map((m) => m.port).sort((a, b) => a - b);
  try {
    const items = Array.from({ length: n }, (_, i) => ({ data: i }));
    const t0 = monoMs();
    for (let i = 0; i < n; i += 10_000) await queue.addBulk(items.slice(i, i + 10_000));
    const enqueuePerSec = n / ((monoMs() - t0) / 1000);
    let done = 0;
    let finish: () => void = () => {};
    const finished = new Promise<void>((r) => {
      finish = r;
    });
    const before = await cpuUs(ports);
    const t1 = monoMs();
    const worker = new Worker<number>(name, () => undefined, {
      connection,
      partitions,
      concurrency: 50,
      events: false,
      retention: { completed: { maxCount: 0, maxAgeMs: 0 } },
    });
    worker.on('completed', () => {
      if (++done === n) finish();
    });
    await finished;
    const drainMs = monoMs() - t1;
    const after = await cpuUs(ports);
    await worker.close();
    const deltas = after.map((a, i) => a - before[i]!);
    const total = deltas.reduce((s, d) => s + d, 0);
    return {
      partitions,
      run,
      enqueuePerSec,
      drainPerSec: n / (drainMs / 1000),
      cpuUsPerJobByMaster: deltas.map((d) => d / n),
      maxShare: Math.max(...deltas) / total,
    };
  } finally {
    await queue.close();
  }
}

/** Runs the stage and returns its rows; logs progress through `log`. */
export async function runClusterBench(
  n: number,
  runs: number,
  log: (line: string) => void,
): Promise<ClusterRow[]> {
  const cluster = await new RedisCluster({ masters: 3 }).start();
  const rows: ClusterRow[] = [];
  try {
    for (let run = 0; run < runs; run++) {
      for (const partitions of run % 2 === 0 ? [1, 3] : [3, 1]) {
        const row = await runOnce(cluster, partitions, n, run);
        rows.push(row);
        log(
          `  partitions ${partitions}, run ${run + 1}: enqueue ${(row.enqueuePerSec / 1000).toFixed(1)}k/s, drain ${(row.drainPerSec / 1000).toFixed(1)}k/s, Redis CPU per job by master ${row.cpuUsPerJobByMaster.map((c) => c.toFixed(1)).join(' / ')} µs (largest share ${(row.maxShare * 100).toFixed(0)} %)`,
        );
      }
    }
  } finally {
    await cluster.stop();
  }
  return rows;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

/** The stage's summary table: medians per partition count. */
export function renderClusterTable(rows: ClusterRow[]): string {
  const lines = [
    '| partitions (3 masters) | enqueue (bulk) | drain, C=50 | Redis CPU µs/job per master, busiest first | total µs/job | largest master share |',
    '|---|---|---|---|---|---|',
  ];
  for (const p of [1, 3]) {
    const r = rows.filter((x) => x.partitions === p);
    if (r.length === 0) continue;
    // Busiest master first: with one partition the queue's slot lands on a different master per run.
    const sorted = r.map((x) => [...x.cpuUsPerJobByMaster].sort((a, b) => b - a));
    const perMaster = [0, 1, 2].map((i) => median(sorted.map((x) => x[i] ?? 0)));
    // The median of each run's total, not the sum of the columns' medians: when two partitions share a
    // master in some runs (a busiest master of ~10 µs, a third of ~0.1), the columns' medians come from
    // different runs and their sum overstated the total by up to 7 %.
    const totals = r.map((x) => x.cpuUsPerJobByMaster.reduce((s, c) => s + c, 0));
    lines.push(
      `| ${p} | ${(median(r.map((x) => x.enqueuePerSec)) / 1000).toFixed(1)}k/s | ${(median(r.map((x) => x.drainPerSec)) / 1000).toFixed(1)}k/s | ${perMaster.map((c) => c.toFixed(1)).join(' / ')} | ${median(totals).toFixed(1)} | ${(median(r.map((x) => x.maxShare)) * 100).toFixed(0)} % |`,
    );
  }
  return lines.join('\n');
}
