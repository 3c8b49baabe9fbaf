/**
 * Redis calls per job: a guard on counts, not on time. Script calls and Redis commands (those inside
 * scripts included) per job are set by how the worker batches its calls, not by the machine's speed,
 * so they can be bounded in CI where throughput cannot. A change that makes the worker call Redis
 * per job where it called per batch fails here, in the commit that makes it: commit 66577f1 took a
 * drain at concurrency 50 from 0.013 to 0.060 script calls per job (e2e at concurrency 1 from 74k to
 * 8k jobs/s), and only a bisect of the benchmark found it a week later.
 *
 * Each bound is about 1.5 times what this code measures at full speed (in the comment beside it) and
 * above what it measured with redis-server under valgrind, some 50 times slower, where the replies'
 * timing changes the batches most. A change that needs more calls raises a bound here, in review, with
 * the cost it measured (`npx tsx bench/redis-instructions.ts`).
 */
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { Queue, Worker } from '../../src/index.js';
import { uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const N = 2_000;

interface Counts {
  /** FCALL, EVALSHA and EVAL calls per job. */
  scripts: number;
  /** Every command per job, those run inside scripts included (INFO commandstats). */
  commands: number;
}

/** Runs `work` between a reset and a read of the server's command statistics; per job of `jobs`. */
async function countDuring(admin: Redis, jobs: number, work: () => Promise<void>): Promise<Counts> {
  await admin.config('RESETSTAT');
  await work();
  let scripts = 0;
  let commands = 0;
  for (const line of (await admin.info('commandstats')).split('\n')) {
    const m = /^cmdstat_(\w+):calls=(\d+)/.exec(line);
    // The statistics' own reset and read, and ACL mode's checks, are not the workload.
    if (!m || ['config', 'info', 'acl'].includes(m[1]!)) continue;
    commands += Number(m[2]);
    if (['fcall', 'evalsha', 'eval'].includes(m[1]!)) scripts += Number(m[2]);
  }
  return { scripts: scripts / jobs, commands: commands / jobs };
}

/** A no-op worker with `prefetch`, not started; `all` resolves at `n` completions. */
function worker(name: string, n: number, prefetch: number | 'auto', partitions = 1, concurrency = 50) {
  let done = 0;
  let finish!: () => void;
  const all = new Promise<void>((r) => {
    finish = r;
  });
  const w = new Worker(name, () => undefined, {
    connection: fx.url,
    concurrency,
    prefetch,
    partitions,
    autostart: false,
    events: false,
  });
  w.on('completed', () => {
    if (++done === n) finish();
  });
  return { w, all };
}

async function bulkAdd(queue: Queue, n: number): Promise<void> {
  for (let i = 0; i < n; i += 1_000) {
    await queue.addBulk(Array.from({ length: Math.min(1_000, n - i) }, (_, j) => ({ data: { i: i + j } })));
  }
}

/** Counts per job while a no-op worker drains N bulk-added jobs. */
async function drainCounts(prefetch: number | 'auto', partitions: number, concurrency = 50): Promise<Counts> {
  const name = uniqueName('cost');
  const queue = new Queue(name, { connection: fx.url, events: false, partitions });
  await bulkAdd(queue, N);
  const { w, all } = worker(name, N, prefetch, partitions, concurrency);
  const c = await countDuring(fx.redis, N, async () => {
    await w.start();
    await all;
  });
  await w.close();
  await queue.close();
  return c;
}

describe('Redis calls per job (counts, not time)', () => {
  it('a single add is one script call', async () => {
    const name = uniqueName('cost');
    const queue = new Queue(name, { connection: fx.url, events: false });
    await queue.counts(); // connected and the library loaded before counting
    const c = await countDuring(fx.redis, 200, async () => {
      for (let i = 0; i < 200; i++) await queue.add({ i });
    });
    await queue.close();
    expect(c.scripts).toBe(1);
    // 8.0: add-one and the 7 commands it runs, one of them the EXISTS that finds no delayed job to
    // promote before the new one (includes/enqueue.lua's promote_due).
    expect(c.commands).toBeLessThanOrEqual(9);
  });

  it.each([
    // prefetch 0: a claim of 50 started jobs and their complete, per 50 jobs
    [1, 0, 0.06, 0.9], // 0.042 script calls and 0.57 commands per job (under valgrind 0.042, 0.62)
    // prefetch 50: prefetched jobs start as slots free, their start marks riding on the completions
    // (begin.lua's awaited call per batch of freed slots took 0.045 and 0.061 at auto)
    [1, 50, 0.045, 0.6], // 0.0215, 0.29
    [1, 'auto', 0.04, 0.5], // 0.015, 0.20
    // 3 partitions, short jobs: the lanes take turns at whole batches (worker/slot-share.ts), so about
    // as many calls as one. A share of the slots per claim took 0.13-0.15 and 1.7-1.9 at prefetch 0.
    [3, 0, 0.09, 1.2], // 0.044-0.060, 0.57-0.77 (under valgrind 0.052, 0.73)
    // auto: capacity is slots + prefetch, so shares were already whole batches (0.066-0.104 with begin)
    [3, 'auto', 0.05, 0.6], // 0.0175, 0.23
  ] as const)(
    'a worker draining a backlog of %s partition(s) at concurrency 50, prefetch %s, calls Redis per batch, not per job',
    async (partitions, prefetch, maxScripts, maxCommands) => {
      const c = await drainCounts(prefetch, partitions);
      expect(c.scripts).toBeLessThanOrEqual(maxScripts);
      expect(c.commands).toBeLessThanOrEqual(maxCommands);
    },
  );

  it("a worker at concurrency 1 sends each job's start with a completion, never a call per job", async () => {
    // Prefetched jobs start as the one before completes; their marks ride on the complete call.
    const c = await drainCounts('auto', 1, 1);
    expect(c.scripts).toBeLessThanOrEqual(0.07); // 0.034
    expect(c.commands).toBeLessThanOrEqual(0.9); // 0.46
  });

  it('an idle worker runs serial adds with one complete each at most (the interactive path)', async () => {
    const name = uniqueName('cost');
    const queue = new Queue(name, { connection: fx.url, events: false });
    await queue.counts();
    const n = 300;
    const { w, all } = worker(name, n, 'auto');
    await w.start();
    const c = await countDuring(fx.redis, n, async () => {
      for (let i = 0; i < n; i++) await queue.add({ i });
      await all;
    });
    await w.close();
    await queue.close();
    // add-one hands the job to the idle worker (no claim per job), then one complete call
    expect(c.scripts).toBeLessThanOrEqual(2.3); // 1.94-2.05 (under valgrind 2.01)
    expect(c.commands).toBeLessThanOrEqual(40); // 30-32
  });
});
