/**
 * Command line of `npm run chaos`:
 *
 *   npm run chaos                      50 000 jobs, 6 workers, 75 s of chaos (about 90 s in all)
 *   npm run chaos -- --ci              15 000 jobs, 40 s of chaos: the run the tests use (about 60 s)
 *   npm run chaos -- --jobs 20000 --workers 4 --duration 40 --seed 1234 --keep-logs
 *   npm run chaos -- --ci --faults netBlackhole,oom --redis-kills 0    only these fault kinds
 *   npm run chaos -- --ci --faults none                                 no faults: processor misbehaviour only
 *   npm run chaos -- --ci --workload plain                             no misbehaving processors
 *
 * The worker and queue options (concurrency, prefetch, lease, recovery and poll periods, retention of
 * completed jobs) are drawn from the seed, within what the library documents as valid, unless
 * --fixed-options asks for the historical fixed set (concurrency 10, prefetch auto, lease 1.5 s).
 */
import { parseArgs } from 'node:util';
// The documented bounds of a worker's concurrency and prefetch (chaos/run.ts also checks, through the
// public API, that the maximum is accepted and one more refused).
import { MAX_CONCURRENCY, MAX_PREFETCH } from '../src/worker/options.js';
import { FAULT_KINDS, type FaultKind } from './fault-plan.js';
import { freshSeed, hash32, Rng } from './rng.js';
import type { ChildConfig } from './worker-child.js';

export { MAX_CONCURRENCY };

/** Options drawn per run from the seed (or fixed with --fixed-options). */
export interface RunOptions {
  concurrency: number;
  /** 'auto' or an explicit count of jobs claimed ahead of free slots. */
  prefetch: number | 'auto';
  leaseMs: number;
  recoverIntervalMs: number;
  pollIntervalMs: number;
  /** Completed jobs kept by retention: 'all', or 0 (deleted as they complete). Dead jobs are always kept. */
  keepCompleted: 'all' | 0;
  /** Jobs added to the paused queue before the chaos phase, then released at once, so the first claims are as large as the options allow (0 = none). */
  initialBurst: number;
}

export interface ChaosConfig extends RunOptions {
  jobs: number;
  workers: number;
  /** Length of the chaos phase (adds and faults), ms. */
  durationMs: number;
  seed: number;
  ci: boolean;
  /** True when --fixed-options was given (else the RunOptions were drawn from the seed). */
  fixedOptions: boolean;
  /** Fault kinds the plan may use (all by default). */
  faultKinds: readonly FaultKind[];
  /** 'all' job kinds, or 'plain': without the misbehaving processors (odd throws, hangs, huge results). */
  workload: 'all' | 'plain';
  heartbeatMs: number;
  backoffMs: number;
  /** Kills of redis-server planned over the phase (more may happen at random). */
  redisKills: number;
  /** Mean time between faults, ms. */
  meanFaultGapMs: number;
  /** How long to wait at least for the queue to drain after the phase, ms. */
  drainMs: number;
  /** Past drainMs the drain goes on while jobs still end: up to this, ms (drain.ts). */
  drainCapMs: number;
  /** ... and fails once no job has ended for this long, ms. */
  drainStallMs: number;
  /** The whole run, startup to verdict, must end within this; otherwise it fails. */
  deadlineMs: number;
  keepLogs: boolean;
}

const USAGE = `usage: npm run chaos -- [--ci] [--jobs N] [--workers N] [--concurrency N] [--duration SECONDS]
                        [--seed N] [--redis-kills N] [--faults KIND,...|none] [--workload all|plain]
                        [--fixed-options] [--keep-logs] [--drain SECONDS]
fault kinds: ${FAULT_KINDS.join(', ')}`;

/**
 * Worker and queue options for one run, from the seed. Every value is valid by the library's documented
 * bounds; the spread favours the everyday settings but reaches the extremes (concurrency at its maximum,
 * prefetch 0, retention 0) often enough that a few runs cover each.
 */
export function drawRunOptions(seed: number, jobs: number): RunOptions {
  const rng = new Rng(seed).fork(3);
  const c = rng.weighted({ everyday: 45, wide: 35, max: 20 });
  const concurrency =
    c === 'everyday'
      ? 10
      : c === 'max'
        ? MAX_CONCURRENCY
        : Math.max(1, Math.round(Math.exp(rng.next() * Math.log(2_000))));
  const p = rng.weighted({ auto: 50, zero: 20, some: 30 });
  const prefetch =
    p === 'auto' ? 'auto' : p === 'zero' ? 0 : rng.int(1, Math.min(MAX_PREFETCH, Math.max(1, concurrency)));
  return {
    concurrency,
    prefetch,
    // At least 1 s: on 2 shared cores a renewal can be late by a few hundred ms without any fault, and
    // a lease lost that way would be an unexplained duplicate (a false alarm, not a finding).
    leaseMs: rng.pick([1_000, 1_500, 2_500, 4_000]),
    recoverIntervalMs: rng.pick([100, 300, 1_000]),
    pollIntervalMs: rng.pick([500, 2_000, 5_000]),
    keepCompleted: rng.chance(0.25) ? 0 : 'all',
    // Large claims need a backlog: a high-concurrency run starts with one (up to 2 x concurrency) that
    // the first claims meet whole.
    initialBurst: concurrency >= 1_000 ? Math.min(Math.floor(jobs / 3), 2 * concurrency) : 0,
  };
}

const FIXED: RunOptions = {
  concurrency: 10,
  prefetch: 'auto',
  leaseMs: 1_500,
  recoverIntervalMs: 300,
  pollIntervalMs: 2_000,
  keepCompleted: 'all',
  initialBurst: 0,
};

function parseFaults(raw: string | undefined): FaultKind[] {
  if (raw === undefined || raw === 'all') return [...FAULT_KINDS];
  if (raw === 'none') return [];
  const kinds = raw.split(',').map((s) => s.trim());
  for (const k of kinds)
    if (!(FAULT_KINDS as readonly string[]).includes(k))
      throw new Error(`--faults: unknown fault kind ${k}\n${USAGE}`);
  return kinds as FaultKind[];
}

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
      faults: { type: 'string' },
      workload: { type: 'string' },
      'fixed-options': { type: 'boolean', default: false },
      'keep-logs': { type: 'boolean', default: false },
      drain: { type: 'string' },
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
  const seed = int('seed', values.seed, freshSeed(), 0, 2 ** 31 - 1);
  const faultKinds = parseFaults(values.faults);
  const fixedOptions = values['fixed-options'] === true;
  const workload = values.workload ?? 'all';
  if (workload !== 'all' && workload !== 'plain')
    throw new Error(`--workload must be all or plain, got ${workload}\n${USAGE}`);
  const drawn = fixedOptions ? FIXED : drawRunOptions(seed, jobs);
  const concurrency = int('concurrency', values.concurrency, drawn.concurrency, 1, MAX_CONCURRENCY);
  // Below concurrency 10 the workers cannot keep up with the default job count (slow jobs and hangs
  // hold slots for seconds): fewer jobs, in proportion, unless --jobs says otherwise.
  const feasibleJobs =
    values.jobs === undefined && concurrency < 10
      ? Math.max(100, Math.ceil((jobs * concurrency) / 10))
      : jobs;
  // A job run in a batch holds its group's slot until its batch returns (its slowest sibling): with
  // the batch worker taking g1 jobs, g1's line drains several times slower (seed 22: 16.9 s against
  // 6.0 s without the batch worker). Past 30 s the drain goes on while jobs still end (a hang's three
  // attempts and their backoff take under 15 s), up to 90 s.
  const drainMs = int('drain', values.drain, 30, 5, 3_600) * 1_000;
  const drainCapMs = Math.max(drainMs, 90_000);
  return {
    ...drawn,
    concurrency,
    initialBurst: values.concurrency === undefined ? drawn.initialBurst : 0,
    jobs: feasibleJobs,
    workers: int('workers', values.workers, 6, 1, 64),
    durationMs,
    seed,
    ci,
    fixedOptions,
    faultKinds,
    workload,
    heartbeatMs: 1_000,
    backoffMs: 50,
    redisKills: faultKinds.includes('redisKill') ? int('redis-kills', values['redis-kills'], 2, 0, 100) : 0,
    meanFaultGapMs: ci ? 2_200 : 2_500,
    drainMs,
    drainCapMs,
    drainStallMs: 15_000,
    // startup (workers compile through tsx) + phase + drain + verdict, with room to spare.
    deadlineMs: 45_000 + durationMs + drainCapMs + Math.ceil(jobs / 1_000) * 1_000,
    keepLogs: values['keep-logs'] === true,
  };
}

/** The most sandboxes a sandboxed chaos worker runs at once (each is a thread or a process running tsx). */
export const SANDBOX_CONCURRENCY = 3;

/**
 * What sets a worker slot apart, for spawn number `n` of the run: with 3 workers or more, the last slot
 * runs its processor in process sandboxes and the one before it in thread sandboxes (at most
 * SANDBOX_CONCURRENCY at once: each sandbox is a tsx-loaded thread or process on 2 shared cores), and
 * the first slot and the thread-sandbox slot carry a tracer that throws at random (seeded per spawn).
 * Slot 1 is a batch worker (Worker option `batch`): a size of 1-16 drawn per spawn, concurrency
 * counting batches (so it holds about the run's concurrency in jobs), some spawns with a minSize and a
 * wait of 5-44 ms (a job waiting for its batch to fill holds its group's slot: at group concurrency 1
 * a long wait per job would stretch the run's drain by the number of g1 jobs it takes).
 */
export function roleOf(
  c: Pick<ChaosConfig, 'seed' | 'workers' | 'concurrency' | 'prefetch'>,
  slot: number,
  n: number,
): Partial<ChildConfig> {
  if (c.workers < 3) return {};
  const role: Partial<ChildConfig> = {};
  if (slot === c.workers - 1) role.sandbox = 'process';
  if (slot === c.workers - 2) role.sandbox = 'thread';
  if (role.sandbox) {
    role.concurrency = Math.min(c.concurrency, SANDBOX_CONCURRENCY);
    if (typeof c.prefetch === 'number') role.prefetch = Math.min(c.prefetch, role.concurrency);
  }
  if (slot === 0 || slot === c.workers - 2) role.tracerSeed = hash32(c.seed, 77, n);
  if (slot === 1 && !role.sandbox) {
    const size = 1 + (hash32(c.seed, 78, n) % 16);
    const minSize = hash32(c.seed, 79, n) % 2 === 0 ? 1 : 1 + (hash32(c.seed, 80, n) % size);
    role.batch = { size, minSize, waitMs: minSize > 1 ? 5 + (hash32(c.seed, 81, n) % 40) : 0 };
    role.concurrency = Math.max(1, Math.floor(c.concurrency / size));
  }
  return role;
}
