/**
 * Command line of `npm run chaos`:
 *
 *   npm run chaos                      50 000 jobs, 6 workers, 75 s of chaos (about 85 s in all)
 *   npm run chaos -- --ci              15 000 jobs, 40 s of chaos: the run the tests use (about 45-50 s)
 *   npm run chaos -- --jobs 20000 --workers 4 --duration 40 --seed 1234 --keep-logs
 */
import { parseArgs } from 'node:util';
import { freshSeed } from './rng.js';

export interface ChaosConfig {
  jobs: number;
  workers: number;
  concurrency: number;
  /** Length of the chaos phase (adds and faults), ms. */
  durationMs: number;
  seed: number;
  ci: boolean;
  leaseMs: number;
  recoverIntervalMs: number;
  heartbeatMs: number;
  pollIntervalMs: number;
  backoffMs: number;
  /** Kills of redis-server planned over the phase (more may happen at random). */
  redisKills: number;
  /** Mean time between faults, ms. */
  meanFaultGapMs: number;
  /** How long to wait for the queue to drain after the phase, ms. */
  drainMs: number;
  /** The whole run, startup to verdict, must end within this; otherwise it fails. */
  deadlineMs: number;
  keepLogs: boolean;
}

const USAGE = `usage: npm run chaos -- [--ci] [--jobs N] [--workers N] [--concurrency N] [--duration SECONDS]
                        [--seed N] [--redis-kills N] [--keep-logs]`;

export function parseConfig(argv: readonly string[]): ChaosConfig {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      ci: { type: 'boolean', default: false },
      jobs: { type: 'string' },
      workers: { type: 'string' },
      concurrency: { type: 'string' },
      duration: { type: 'string' },
      seed: { type: 'string' },
      'redis-kills': { type: 'string' },
      'keep-logs': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const ci = values.ci === true;
  const int = (name: string, raw: string | undefined, dflt: number, min: number, max: number): number => {
    if (raw === undefined) return dflt;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new Error(`--${name} must be an integer in [${min}, ${max}], got ${raw}\n${USAGE}`);
    return n;
  };
  const durationMs = int('duration', values.duration, ci ? 40 : 75, 20, 3_600) * 1_000;
  const jobs = int('jobs', values.jobs, ci ? 15_000 : 50_000, 100, 5_000_000);
  const drainMs = 20_000;
  return {
    jobs,
    workers: int('workers', values.workers, 6, 1, 64),
    concurrency: int('concurrency', values.concurrency, 10, 1, 1_000),
    durationMs,
    seed: int('seed', values.seed, freshSeed(), 0, 2 ** 31 - 1),
    ci,
    leaseMs: 1_500,
    recoverIntervalMs: 300,
    heartbeatMs: 1_000,
    pollIntervalMs: 2_000,
    backoffMs: 50,
    redisKills: int('redis-kills', values['redis-kills'], 2, 0, 100),
    meanFaultGapMs: ci ? 2_200 : 2_500,
    drainMs,
    // startup (workers compile through tsx) + phase + drain + verdict, with room to spare.
    deadlineMs: 45_000 + durationMs + drainMs + Math.ceil(jobs / 1_000) * 1_000,
    keepLogs: values['keep-logs'] === true,
  };
}
