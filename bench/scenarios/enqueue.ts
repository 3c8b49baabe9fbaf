/** Producer throughput alone: awaited single adds, and bulk adds of 1 000 (no worker running). */
import { monoMs } from '../clock.js';
import type { Scenario } from './context.js';
import { addSerial, BULK_CHUNK, fillBulk, perSecond, withProducer } from './helpers.js';

export const enqueueSerial: Scenario = {
  name: 'enqueue-serial',
  describe: (s) => `${s.n} awaited single adds, one at a time`,
  async run(ctx) {
    const n = ctx.sizes.n;
    return withProducer(ctx, ctx.queueName('serial'), async (producer) => {
      const t0 = monoMs();
      await addSerial(producer, n);
      return [{ variant: '', metrics: { jobsPerSec: perSecond(n, monoMs() - t0) } }];
    });
  },
};

export const enqueueBulk: Scenario = {
  name: 'enqueue-bulk',
  describe: (s) => `${s.n} jobs in awaited bulk calls of ${BULK_CHUNK} (addBulk / Bee-Queue saveAll)`,
  async run(ctx) {
    const n = ctx.sizes.n;
    return withProducer(ctx, ctx.queueName('bulk'), async (producer) => {
      const t0 = monoMs();
      await fillBulk(producer, n);
      return [{ variant: '', metrics: { jobsPerSec: perSecond(n, monoMs() - t0) } }];
    });
  },
};
