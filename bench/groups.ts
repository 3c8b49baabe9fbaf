/**
 * The groups stage of `npm run bench` (`--only groups`): Surety's groups against GroupMQ (the open
 * groups queue by OpenPanel; BullMQ has groups only in its paid Pro edition, Bee-Queue none), on one
 * private redis-server, per-group concurrency 1 in both (GroupMQ's only mode).
 *
 * For 1, 100 and G groups (G = 10 000 with --quick, 100 000 otherwise), N jobs spread evenly over the
 * groups: the backlog is added (Surety: addBulk of 1 000; GroupMQ has no bulk add: 200 single adds in
 * flight), then one worker at concurrency 50 in this process drains it, no-op processor. Reported:
 * enqueue and drain jobs/s, Redis CPU µs per job during the drain (INFO used_cpu_* deltas) and Redis
 * memory per group holding one waiting job (G groups of one job: used_memory delta / G, the job
 * included). Libraries alternate which goes first; Redis is flushed between measurements.
 */
import { Queue as GroupQueue, Worker as GroupWorker } from 'groupmq';
import { Redis } from 'ioredis';
import { Queue, Worker } from '../src/index.js';
import { monoMs } from './clock.js';
import { flushAll, parseInfo, usedMemory } from './redis-stats.js';

type Lib = 'surety' | 'groupmq';
const LIBS: Lib[] = ['surety', 'groupmq'];
const CONCURRENCY = 50;
const PAYLOAD = 'x'.repeat(100);

export interface GroupsRow {
  lib: Lib;
  groups: number;
  n: number;
  run: number;
  enqueuePerSec: number;
  drainPerSec: number;
  redisCpuUsPerJob: number;
}

export interface GroupMemoryRow {
  lib: Lib;
  groups: number;
  bytesPerGroup: number;
}

async function cpuUs(admin: Redis): Promise<number> {
  const info = parseInfo(await admin.info('cpu'));
  return (Number(info.used_cpu_user) + Number(info.used_cpu_sys)) * 1e6;
}

const groupOf = (i: number, groups: number) => `tenant-${i % groups}`;

async function fill(
  lib: Lib,
  url: string,
  name: string,
  n: number,
  groups: number,
): Promise<() => Promise<void>> {
  if (lib === 'surety') {
    const q = new Queue(name, { connection: url });
    await q.setGroupLimits({ concurrency: 1 });
    for (let i = 0; i < n; i += 1_000) {
      const size = Math.min(1_000, n - i);
      await q.addBulk(
        Array.from({ length: size }, (_, j) => ({
          data: { i: i + j, s: PAYLOAD },
          opts: { group: groupOf(i + j, groups) },
        })),
      );
    }
    return () => q.close();
  }
  const redis = new Redis(url);
  const q = new GroupQueue({ redis, namespace: name });
  let next = 0;
  const lane = async () => {
    while (next < n) {
      const i = next++;
      await q.add({ groupId: groupOf(i, groups), data: { i, s: PAYLOAD } });
    }
  };
  await Promise.all(Array.from({ length: 200 }, lane));
  return async () => {
    await q.close();
    redis.disconnect();
  };
}

/** Drains `n` jobs with one worker at CONCURRENCY; resolves with the elapsed ms. */
async function drain(lib: Lib, url: string, name: string, n: number): Promise<number> {
  let done = 0;
  let finish = () => {};
  const all = new Promise<void>((r) => (finish = r));
  const t0 = monoMs();
  if (lib === 'surety') {
    const w = new Worker(name, () => undefined, { connection: url, concurrency: CONCURRENCY });
    w.on('completed', () => {
      if (++done === n) finish();
    });
    await all;
    const ms = monoMs() - t0;
    await w.close();
    return ms;
  }
  const redis = new Redis(url, { maxRetriesPerRequest: null });
  const queue = new GroupQueue({ redis, namespace: name });
  const w = new GroupWorker({ queue, concurrency: CONCURRENCY, handler: async () => undefined });
  w.on('completed', () => {
    if (++done === n) finish();
  });
  void w.run();
  await all;
  const ms = monoMs() - t0;
  await w.close();
  await queue.close();
  redis.disconnect();
  return ms;
}

async function measure(
  lib: Lib,
  url: string,
  admin: Redis,
  n: number,
  groups: number,
  run: number,
): Promise<GroupsRow> {
  await flushAll(admin);
  const name = `bench-groups-${lib}-${groups}-r${run}`;
  const t0 = monoMs();
  const close = await fill(lib, url, name, n, groups);
  const enqueueMs = monoMs() - t0;
  await close();
  const cpu0 = await cpuUs(admin);
  const drainMs = await drain(lib, url, name, n);
  const cpu1 = await cpuUs(admin);
  return {
    lib,
    groups,
    n,
    run,
    enqueuePerSec: Math.round(n / (enqueueMs / 1000)),
    drainPerSec: Math.round(n / (drainMs / 1000)),
    redisCpuUsPerJob: Number(((cpu1 - cpu0) / n).toFixed(1)),
  };
}

async function memoryPerGroup(lib: Lib, url: string, admin: Redis, groups: number): Promise<GroupMemoryRow> {
  await flushAll(admin);
  const before = await usedMemory(admin);
  const close = await fill(lib, url, `bench-gmem-${lib}`, groups, groups);
  await close();
  const after = await usedMemory(admin);
  return { lib, groups, bytesPerGroup: Math.round((after - before) / groups) };
}

export async function runGroupsBench(
  url: string,
  admin: Redis,
  opts: { n: number; manyGroups: number; runs: number },
  log: (line: string) => void,
): Promise<{ rows: GroupsRow[]; memory: GroupMemoryRow[] }> {
  const rows: GroupsRow[] = [];
  for (const groups of [1, 100, opts.manyGroups]) {
    const n = Math.max(opts.n, groups);
    for (let run = 1; run <= opts.runs; run++) {
      const order = run % 2 === 1 ? LIBS : [...LIBS].reverse();
      for (const lib of order) {
        const row = await measure(lib, url, admin, n, groups, run);
        rows.push(row);
        log(
          `  ${lib.padEnd(8)} ${String(groups).padStart(6)} groups run ${run}: enqueue ${row.enqueuePerSec}/s, drain ${row.drainPerSec}/s, Redis CPU ${row.redisCpuUsPerJob} µs/job`,
        );
      }
    }
  }
  const memory: GroupMemoryRow[] = [];
  for (const lib of LIBS) memory.push(await memoryPerGroup(lib, url, admin, opts.manyGroups));
  return { rows, memory };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? Number.NaN : s[Math.floor(s.length / 2)]!;
};

export function renderGroupsTable(rows: GroupsRow[], memory: GroupMemoryRow[]): string {
  const lines = ['| groups | metric | Surety | GroupMQ | Surety / GroupMQ |', '|---|---|---|---|---|'];
  const groupCounts = [...new Set(rows.map((r) => r.groups))];
  const metrics: [keyof GroupsRow, string, boolean][] = [
    ['enqueuePerSec', 'enqueue jobs/s ↑', true],
    ['drainPerSec', 'drain jobs/s ↑', true],
    ['redisCpuUsPerJob', 'Redis CPU µs/job ↓', false],
  ];
  for (const g of groupCounts) {
    for (const [key, label] of metrics) {
      const of = (lib: Lib) =>
        median(rows.filter((r) => r.lib === lib && r.groups === g).map((r) => Number(r[key])));
      const s = of('surety');
      const m = of('groupmq');
      lines.push(`| ${g} | ${label} | ${s} | ${m} | ${(s / m).toFixed(2)}x |`);
    }
  }
  const mem = (lib: Lib) => memory.find((m) => m.lib === lib)!;
  const s = mem('surety');
  const m = mem('groupmq');
  lines.push(
    `| ${s.groups} | Redis bytes per group (1 job) ↓ | ${s.bytesPerGroup} | ${m.bytesPerGroup} | ${(s.bytesPerGroup / m.bytesPerGroup).toFixed(2)}x |`,
  );
  lines.push('');
  lines.push('BullMQ: no open-source groups (a BullMQ Pro feature), not measured here.');
  return lines.join('\n');
}
