/**
 * Resources per job.
 * `memory`: Redis used_memory (without client buffers, see usedMemory) per waiting job, over N bulk-added jobs of `{ i, s: 'x'.repeat(100) }`
 *   (FLUSHALL before; the producer's connection and scripts are warmed on another queue first, then
 *   FLUSHALL again, so the delta holds only the jobs and the queue's own structures).
 * `cost`: the whole life of N jobs (bulk add, then one worker process at concurrency 50, and again at
 *   concurrency 1, drains them):
 *   commands Redis ran per job (INFO commandstats summed over every command, so commands run inside
 *   Lua scripts count as well as EVALSHA itself; reset with CONFIG RESETSTAT), commands and round trips
 *   the clients sent per job (producer + worker, counted by wrapping the clients' send functions, see
 *   command-counter.ts), Redis CPU µs per job (INFO cpu delta) and worker CPU µs per job
 *   (process.cpuUsage in the worker child, from worker start to the N-th completion).
 */
import { flushAll, resetCommandStats, snapshot, usedMemory } from '../redis-stats.js';
import type { RunContext, Sample, Scenario } from './context.js';
import { confirmDrained, fillBulk, withProducer, withWorker } from './helpers.js';

/** Concurrencies of the cost scenario: the busy worker, and one job at a time (prefetch as configured). */
const COST_CONCURRENCY = [50, 1] as const;

export const memory: Scenario = {
  name: 'memory',
  describe: (s) => `Redis used_memory per waiting job, ${s.n} jobs of { i, s: 'x'.repeat(100) }`,
  async run(ctx) {
    await ctx.flush();
    const n = ctx.sizes.n;
    await withProducer(ctx, ctx.queueName('memory-warm'), (p) => fillBulk(p, 1));
    return withProducer(ctx, ctx.queueName('memory'), async (producer) => {
      await flushAll(ctx.admin);
      const before = await usedMemory(ctx.admin);
      await fillBulk(producer, n);
      const after = await usedMemory(ctx.admin);
      return [{ variant: '', metrics: { bytesPerJob: (after - before) / n } }];
    });
  },
};

export const cost: Scenario = {
  name: 'cost',
  describe: (s) =>
    `life cycle of ${s.n} jobs: bulk add, then one worker process (concurrency ${COST_CONCURRENCY.join(', then ')}) drains them`,
  async run(ctx) {
    const out: Sample[] = [];
    for (const c of COST_CONCURRENCY) out.push(await costOnce(ctx, c));
    return out;
  },
};

async function costOnce(ctx: RunContext, concurrency: number): Promise<Sample> {
  await ctx.flush();
  const n = ctx.sizes.n;
  const queue = ctx.queueName(`cost-c${concurrency}`);
  return withProducer(ctx, queue, (producer) =>
    withWorker(ctx, { queue, concurrency, mode: 'noop', expect: n }, async (w) => {
      const cpuBefore = (await snapshot(ctx.admin)).cpuUs;
      await resetCommandStats(ctx.admin);
      ctx.counter.start();
      await fillBulk(producer, n);
      const producerCount = ctx.counter.stop();
      const afterAdd = await snapshot(ctx.admin);
      await w.start();
      const done = await w.done();
      const end = await snapshot(ctx.admin);
      await confirmDrained(producer, 'cost');
      // The harness's one INFO between the phases is the only command of ours in the window.
      const redisCommands = end.commands - 1;
      const clientCommands = producerCount.commands + done.commands;
      const roundTrips = producerCount.roundTrips + done.roundTrips;
      return {
        variant: `bulk add, c=${concurrency}`,
        concurrency,
        metrics: {
          redisCommandsPerJob: redisCommands / n,
          redisCommandsAddPerJob: afterAdd.commands / n,
          clientCommandsPerJob: clientCommands / n,
          roundTripsPerJob: roundTrips / n,
          redisCpuUsPerJob: (end.cpuUs - cpuBefore) / n,
          workerCpuUsPerJob: done.cpuUs / n,
        },
      };
    }),
  );
}
