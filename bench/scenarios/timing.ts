/**
 * Timing of single jobs. `latency`: an idle worker (concurrency 10), jobs added one by one 2 ms apart;
 * enqueue (monoMs() just before add, carried in the job data) -> processor start.
 * `delayed`: jobs due uniformly over a window that opens 200 ms after the (bulk) adds begin, so the adds
 * themselves cannot make a job late; lateness = processor start - due (epoch ms), and how many
 * started before their due time (Date.now() < due).
 */
import { monoMs, sleep, sleepUntil } from '../clock.js';
import { summary } from '../stats.js';
import type { Scenario } from './context.js';
import { confirmDrained, fillBulk, payload, withProducer, withWorker } from './helpers.js';

const CONCURRENCY = 10;
const GAP_MS = 2;
const DELAY_LEAD_MS = 200;

export const latency: Scenario = {
  name: 'latency',
  describe: (s) =>
    `idle worker (concurrency ${CONCURRENCY}), ${s.latencyJobs} single adds ${GAP_MS} ms apart: enqueue -> processor start`,
  async run(ctx) {
    await ctx.flush();
    const m = ctx.sizes.latencyJobs;
    const queue = ctx.queueName('latency');
    return withProducer(ctx, queue, async (producer) => {
      const done = await withWorker(
        ctx,
        { queue, concurrency: CONCURRENCY, mode: 'latency', expect: m },
        async (w) => {
          await w.start();
          await sleep(200);
          const t0 = monoMs();
          for (let i = 0; i < m; i++) {
            await sleepUntil(t0 + i * GAP_MS);
            await producer.add({ ...payload(i), t: monoMs() });
          }
          return w.done();
        },
      );
      await confirmDrained(producer, 'latency');
      const s = summary(done.samples);
      return [
        {
          variant: `c=${CONCURRENCY}`,
          concurrency: CONCURRENCY,
          metrics: { p50Ms: s.p50, p99Ms: s.p99, maxMs: s.max },
        },
      ];
    });
  },
};

export const delayed: Scenario = {
  name: 'delayed',
  describe: (s) =>
    `${s.delayedJobs} delayed jobs due uniformly over ${s.delayedWindowMs / 1000} s, worker concurrency ${CONCURRENCY}: lateness = start - due`,
  async run(ctx) {
    await ctx.flush();
    const { delayedJobs: m, delayedWindowMs: window } = ctx.sizes;
    const queue = ctx.queueName('delayed');
    return withProducer(ctx, queue, async (producer) => {
      const done = await withWorker(
        ctx,
        { queue, concurrency: CONCURRENCY, mode: 'delayed', expect: m },
        async (w) => {
          await w.start();
          await sleep(200);
          const first = Date.now() + DELAY_LEAD_MS;
          await fillBulk(producer, m, (i) => {
            const due = first + Math.round((i * window) / m);
            return { data: { ...payload(i), due }, runAt: due };
          });
          return w.done();
        },
      );
      await confirmDrained(producer, 'delayed');
      const s = summary(done.samples);
      return [
        {
          variant: `c=${CONCURRENCY}`,
          concurrency: CONCURRENCY,
          metrics: { p50Ms: s.p50, p99Ms: s.p99, maxMs: s.max, early: done.early },
        },
      ];
    });
  },
};
