/**
 * Processing throughput. `e2e`: N jobs pre-filled, then one worker child (no-op processor) drains them;
 * timed from the parent's `start` message to the child's N-th persisted completion (CLOCK_MONOTONIC on
 * both sides, so no polling and no poll-interval error; see worker-child.ts for why the completion
 * events are a fair end mark for all three libraries).
 * `e2e-live`: the worker is started and idle, then a producer adds N jobs (bulk, or awaited singles)
 * while it runs; timed from the first add to the N-th completion.
 */
import { monoMs, sleep } from '../clock.js';
import type { RunContext, Sample, Scenario } from './context.js';
import { addSerial, confirmDrained, fillBulk, perSecond, withProducer, withWorker } from './helpers.js';

export const E2E_CONCURRENCY = [1, 10, 50] as const;
export const LIVE_CONCURRENCY = 50;

async function drainOnce(
  ctx: RunContext,
  concurrency: number,
  n = ctx.sizes.n,
  batchSize?: number,
): Promise<Sample> {
  await ctx.flush();
  const queue = ctx.queueName(`e2e-c${concurrency}-${n}${batchSize ? `-b${batchSize}` : ''}`);
  const batch = batchSize === undefined ? {} : { batchSize };
  return withProducer(ctx, queue, async (producer) => {
    await fillBulk(producer, n);
    const spec = { queue, concurrency, mode: 'noop' as const, expect: n, ...batch };
    const jobsPerSec = await withWorker(ctx, spec, async (w) => {
      const t0 = monoMs();
      await w.start();
      const done = await w.done();
      return perSecond(n, done.at - t0);
    });
    await confirmDrained(producer, `e2e c=${concurrency}`);
    return { variant: `c=${concurrency}`, concurrency, metrics: { jobsPerSec } };
  });
}

/** The large drain: this many times N jobs, at the highest concurrency (issue 32's 100 000-job row). */
export const LARGE_FACTOR = 5;

export const e2eLarge: Scenario = {
  name: 'e2e-large',
  describe: (s) =>
    `${LARGE_FACTOR * s.n} pre-filled jobs, one worker process at concurrency ${E2E_CONCURRENCY.at(-1)}, no-op processor`,
  async run(ctx) {
    const c = E2E_CONCURRENCY.at(-1)!;
    const sample = await drainOnce(ctx, c, LARGE_FACTOR * ctx.sizes.n);
    return [{ ...sample, variant: `c=${c}, ${LARGE_FACTOR * ctx.sizes.n} jobs` }];
  },
};

/** Batch sizes of `e2e-batch`, one batch at a time (concurrency 1), beside single jobs at the top concurrency. */
export const BATCH_SIZES = [50, 200] as const;

export const e2eBatch: Scenario = {
  name: 'e2e-batch',
  describe: (s) =>
    `${s.n} pre-filled jobs drained by one Surety batch worker (batch sizes ${BATCH_SIZES.join('/')}, one batch at a time) beside single jobs at concurrency ${E2E_CONCURRENCY.at(-1)}; BullMQ and Bee-Queue have no free batch worker and are not run`,
  async run(ctx) {
    if (ctx.adapter.lib !== 'surety') return [];
    const c = E2E_CONCURRENCY.at(-1)!;
    const out: Sample[] = [{ ...(await drainOnce(ctx, c)), variant: `single c=${c}` }];
    for (const size of BATCH_SIZES) {
      const sample = await drainOnce(ctx, 1, ctx.sizes.n, size);
      out.push({ ...sample, variant: `batch ${size} c=1` });
    }
    return out;
  },
};

export const e2e: Scenario = {
  name: 'e2e',
  describe: (s) =>
    `${s.n} pre-filled jobs, one worker process at concurrency ${E2E_CONCURRENCY.join('/')}, no-op processor`,
  async run(ctx) {
    const out: Sample[] = [];
    for (const c of E2E_CONCURRENCY) out.push(await drainOnce(ctx, c));
    return out;
  },
};

async function liveOnce(ctx: RunContext, mode: 'bulk' | 'serial'): Promise<Sample> {
  await ctx.flush();
  const n = ctx.sizes.n;
  const concurrency = LIVE_CONCURRENCY;
  const queue = ctx.queueName(`live-${mode}`);
  return withProducer(ctx, queue, async (producer) => {
    const jobsPerSec = await withWorker(ctx, { queue, concurrency, mode: 'noop', expect: n }, async (w) => {
      await w.start();
      await sleep(200); // let the worker settle into its idle wait
      const t0 = monoMs();
      if (mode === 'bulk') await fillBulk(producer, n);
      else await addSerial(producer, n);
      const done = await w.done();
      return perSecond(n, done.at - t0);
    });
    await confirmDrained(producer, `e2e-live ${mode}`);
    return { variant: `${mode} c=${concurrency}`, concurrency, metrics: { jobsPerSec } };
  });
}

export const e2eLive: Scenario = {
  name: 'e2e-live',
  describe: (s) =>
    `${s.n} jobs added (bulk, or awaited singles) while one worker process (concurrency ${LIVE_CONCURRENCY}) runs`,
  async run(ctx) {
    return [await liveOnce(ctx, 'bulk'), await liveOnce(ctx, 'serial')];
  },
};
