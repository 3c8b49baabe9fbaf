/**
 * surety/testing: run your own tests against Surety's real scripts on a virtual clock (docs/testing.md).
 *
 *   const env = await createTestEnv();
 *   const queue = env.queue('emails');
 *   env.worker('emails', async (job) => send(job.data));
 *   await queue.add(data, { delayMs: 3_600_000 });
 *   await env.advance('1h'); // the job ran
 *   await env.close();
 */
export type { Clock } from '../clock.js';
export { NotSettledError } from '../errors.js';
export { MAX_ADVANCE_MS, parseDuration } from './duration.js';
export {
  createTestEnv,
  type EnvQueueOptions,
  type EnvWorkerOptions,
  TestEnv,
  type TestEnvOptions,
} from './env.js';
export { VirtualClock } from './virtual-clock.js';
