/** Command-line options of `npm run bench`. */
import { LIB_NAMES, type LibName } from './adapters/types.js';
import type { Sizes } from './scenarios/context.js';
import { SCENARIOS } from './scenarios/index.js';

export interface BenchOptions {
  quick: boolean;
  json: boolean;
  aof: boolean;
  cpuProf: boolean;
  only: string[];
  libs: LibName[];
  runs: number;
  sizes: Sizes;
  /** True when the run is not the standard full one (its results file gets a suffix). */
  partial: boolean;
  scale: ScaleOptions;
}

export interface ScaleOptions {
  /** Backlog sizes of the scale stage, ascending. */
  sizes: number[];
  /** Fills per library and size: 1 unless --runs is given (a 1 000 000-job fill takes a while). */
  runs: number;
  /** The held set is min(maxHeld, B/2) jobs (default 10 000). */
  maxHeld: number;
  /** --scale-sizes, --scale-held, --libs, --runs, --n or --aof given: the stage's files get a -partial suffix. */
  partial: boolean;
}

/** Stages run after the scenarios, each with a table of its own (see run.ts). */
const STAGES = ['cluster', 'groups', 'sandbox', 'telemetry', 'workflows', 'outbox', 'scale'] as const;
/** Stages a plain `npm run bench` leaves out (they take minutes): run them with --only. */
const OPT_IN_STAGES: readonly string[] = ['scale'];

const SCALE_SIZES = [20_000, 100_000, 1_000_000];
const SCALE_SIZES_QUICK = [20_000, 100_000, 200_000];

export const USAGE = `Usage: npm run bench -- [options]
  --quick              one pass, N=5 000 (latency/delayed: 500 jobs), for a fast check
  --json               print one JSON object per line on stdout (the table goes to stderr)
  --only a,b           scenarios: ${[...SCENARIOS.map((s) => s.name), ...STAGES].join(', ')}
                       (cluster: Surety alone, partitions 1 vs 3 on a private 3-master cluster;
                        groups: Surety against GroupMQ, 1, 100 and 10 000/100 000 groups;
                        sandbox: function vs thread vs process processors, Surety and BullMQ;
                        telemetry: Surety alone, OpenTelemetry off / API without SDK / SDK;
                        workflows: Surety alone, a signal park/resume and a parent with 1 / 10
                        children (same queue, other queue) beside a plain job: cost and latency;
                        outbox: Surety alone, the Postgres outbox on a private PostgreSQL: relay
                        against addBulk, commit -> Redis latency, outbox.add's cost in a transaction;
                        scale: enqueue, drain, Redis CPU and memory per job at growing backlogs,
                        only with --only: it takes minutes)
                       default: all but ${OPT_IN_STAGES.join(', ')}
  --libs a,b           libraries: ${LIB_NAMES.join(', ')} (default: all)
  --runs k             runs per scenario (default 3, --quick 1)
  --n N                jobs per throughput/memory/cost measurement (default 20 000)
  --scale-sizes a,b    backlogs of the scale stage (default ${SCALE_SIZES.join(',')};
                       --quick ${SCALE_SIZES_QUICK.join(',')}); per library and size one fill
                       (--runs k: k) and 3 rounds of 2 000 single adds, N bulk adds and a
                       drain of min(N, smallest size) jobs
  --scale-held k       the scale stage's held set: min(k, B/2) active jobs (default 10 000; 0: none)
  --aof                redis-server with appendonly yes, appendfsync always
  --cpu-prof           V8 CPU profile of each worker child, start -> last completion, in
                       bench/results/profiles/<queue>.cpuprofile (summary: tsx bench/profile-top.ts)
  --help`;

function list(value: string | undefined, flag: string): string[] {
  if (!value) throw new Error(`${flag} needs a comma-separated list`);
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

function positiveInt(value: string | undefined, flag: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${flag} must be an integer >= 1, got ${value}`);
  return n;
}

export function parseArgs(argv: readonly string[]): BenchOptions | 'help' {
  let quick = false;
  let json = false;
  let aof = false;
  let cpuProf = false;
  let only: string[] = [...SCENARIOS.map((s) => s.name), ...STAGES].filter((s) => !OPT_IN_STAGES.includes(s));
  let libs: LibName[] = [...LIB_NAMES];
  let runs: number | undefined;
  let n: number | undefined;
  let partial = false;
  let scaleSizes: number[] | undefined;
  let maxHeld = 10_000;
  let scalePartial = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') return 'help';
    else if (arg === '--quick') quick = true;
    else if (arg === '--json') json = true;
    else if (arg === '--aof') {
      aof = true;
      scalePartial = true;
    } else if (arg === '--cpu-prof') cpuProf = true;
    else if (arg === '--only') {
      only = list(argv[++i], arg);
      const unknown = only.filter(
        (s) => !(STAGES as readonly string[]).includes(s) && !SCENARIOS.some((x) => x.name === s),
      );
      if (unknown.length) throw new Error(`--only: unknown scenario ${unknown.join(', ')}`);
      partial = true;
    } else if (arg === '--libs') {
      const names = list(argv[++i], arg);
      const unknown = names.filter((l) => !(LIB_NAMES as readonly string[]).includes(l));
      if (unknown.length) throw new Error(`--libs: unknown library ${unknown.join(', ')}`);
      libs = LIB_NAMES.filter((l) => names.includes(l));
      partial = true;
      scalePartial = true;
    } else if (arg === '--runs') {
      runs = positiveInt(argv[++i], arg);
      partial = true;
      scalePartial = true;
    } else if (arg === '--n') {
      n = positiveInt(argv[++i], arg);
      partial = true;
      scalePartial = true;
    } else if (arg === '--scale-sizes') {
      const values = list(argv[++i], arg).map((v) => positiveInt(v, arg));
      // Below 1 000 the held set (B/2) and the delayed jobs (B/10) are too few to mean anything.
      if (values.some((v) => v < 1_000)) throw new Error(`${arg}: backlogs must be at least 1 000`);
      scaleSizes = [...new Set(values)].sort((a, b) => a - b);
      scalePartial = true;
    } else if (arg === '--scale-held') {
      const value = argv[++i];
      maxHeld = value === '0' ? 0 : positiveInt(value, arg);
      scalePartial = true;
    } else throw new Error(`unknown option ${arg}\n${USAGE}`);
  }
  const sizes: Sizes = quick
    ? { n: 5_000, latencyJobs: 500, delayedJobs: 500, delayedWindowMs: 2_000 }
    : { n: 20_000, latencyJobs: 2_000, delayedJobs: 2_000, delayedWindowMs: 5_000 };
  if (n !== undefined) sizes.n = n;
  const scale: ScaleOptions = {
    sizes: scaleSizes ?? (quick ? SCALE_SIZES_QUICK : SCALE_SIZES),
    runs: runs ?? 1,
    maxHeld,
    partial: scalePartial,
  };
  return { quick, json, aof, cpuProf, only, libs, runs: runs ?? (quick ? 1 : 3), sizes, partial, scale };
}
