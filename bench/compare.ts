/**
 * A/B of two commits on this machine, interleaved:
 *   npx tsx bench/compare.ts <base> [<head>] [--rounds R] [--runner <file>] [-- <runner options>]
 * e.g. `npx tsx bench/compare.ts 66577f1~1 66577f1 --rounds 2 -- --only e2e,cost --libs surety --runs 3`.
 * `head` defaults to HEAD; the bench options default to `--only e2e,cost --libs surety --runs 1`.
 * `--runner bench/redis-instructions.ts` (or another file printing the same JSON rows) measures with
 * that file instead of each side's own bench/run.ts: it is copied from this checkout into both
 * worktrees, so both sides are measured by the same instrument, and its options follow `--`.
 *
 * Each commit is checked out in a temporary git worktree (this checkout's node_modules linked in, its
 * own files untouched) and `bench/run.ts --json` runs there R times, alternating base/head and
 * swapping who goes first each round, so both sides share the machine's slow and fast minutes. Printed:
 * every metric's median over the rounds (min-max) for each side, and head/base. On this 2-core machine
 * a single full run moves by 10-15 % between hours; a change smaller than the two sides' ranges is not
 * shown by this either. Both commits must have `bench/run.ts --json` (since 2026-11-22).
 */
import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve as resolvePath } from 'node:path';
import { metricInfo } from './metrics.js';
import { alignColumns, cell, ratio } from './report.js';

interface Side {
  label: string;
  sha: string;
  dir: string;
  /** `<scenario | variant | lib>\0<metric>` -> one value (that run's median) per round */
  values: Map<string, number[]>;
}

const DEFAULT_BENCH_ARGS = ['--only', 'e2e,cost', '--libs', 'surety', '--runs', '1'];

interface Args {
  revs: string[];
  rounds: number;
  /** A file of this checkout to run in both worktrees instead of their bench/run.ts (null: theirs). */
  runner: string | null;
  benchArgs: string[];
}

function parse(argv: string[]): Args {
  const dash = argv.indexOf('--');
  const own = dash >= 0 ? argv.slice(0, dash) : argv;
  let rounds = 3;
  let runner: string | null = null;
  const revs: string[] = [];
  for (let i = 0; i < own.length; i++) {
    if (own[i] === '--rounds') rounds = Number(own[++i]);
    else if (own[i] === '--runner') runner = own[++i] ?? '';
    else revs.push(own[i]!);
  }
  const benchArgs = dash >= 0 ? argv.slice(dash + 1) : runner ? [] : DEFAULT_BENCH_ARGS;
  if (revs.length < 1 || revs.length > 2 || !Number.isInteger(rounds) || rounds < 1 || runner === '') {
    throw new Error(
      'usage: npx tsx bench/compare.ts <base> [<head>] [--rounds R] [--runner <file>] [-- <runner options>]',
    );
  }
  if (revs.length === 1) revs.push('HEAD');
  return { revs, rounds, runner, benchArgs };
}

function git(args: string[], cwd = process.cwd()): string {
  return execFileSync('git', args, { cwd, encoding: 'utf8' }).trim();
}

/** One row of `bench/run.ts --json`: its numeric fields (except concurrency) are metrics. */
function metricsOf(line: Record<string, unknown>): [string, number][] {
  const name = [line.scenario, line.variant, line.lib].filter(Boolean).join(' | ');
  return Object.entries(line)
    .filter(([k, v]) => typeof v === 'number' && k !== 'concurrency')
    .map(([k, v]) => [`${name}\u0000${k}`, v as number]);
}

function runBench(side: Side, runner: string, benchArgs: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('npx', ['tsx', runner, '--json', ...benchArgs], {
      cwd: side.dir,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`${runner} at ${side.label} exited with ${code}`));
      for (const text of out.split('\n')) {
        if (!text.startsWith('{')) continue;
        for (const [key, value] of metricsOf(JSON.parse(text) as Record<string, unknown>)) {
          const list = side.values.get(key) ?? [];
          list.push(value);
          side.values.set(key, list);
        }
      }
      resolve();
    });
  });
}

function report(base: Side, head: Side, rounds: number): string {
  const keys = [...new Set([...base.values.keys(), ...head.values.keys()])];
  const rows = keys.map((k) => {
    const [name, metric] = k.split('\u0000') as [string, string];
    const info = metricInfo(metric);
    return [
      name,
      `${info.label} ${info.better === 'higher' ? '↑' : '↓'}`,
      cell(base.values.get(k), info.format),
      cell(head.values.get(k), info.format),
      ratio(head.values.get(k), base.values.get(k)),
    ];
  });
  const header = [
    'scenario | variant | library',
    'metric',
    `${base.label} (${base.sha.slice(0, 7)})`,
    `${head.label} (${head.sha.slice(0, 7)})`,
    'head/base',
  ];
  return [
    `medians over ${rounds} alternating round(s), (min–max)`,
    ...alignColumns([header, ...rows], 2),
  ].join('\n');
}

const { revs, rounds, runner, benchArgs } = parse(process.argv.slice(2));
const top = git(['rev-parse', '--show-toplevel']);
const runnerPath = runner ? relative(top, resolvePath(runner)) : 'bench/run.ts';
const root = mkdtempSync(join(tmpdir(), 'surety-compare-'));
const sides: Side[] = revs.map((rev, i) => ({
  // A full sha as label would widen every row: its first 7 characters name it.
  label: /^[0-9a-f]{12,40}$/.test(rev) ? rev.slice(0, 7) : rev,
  sha: git(['rev-parse', '--verify', `${rev}^{commit}`], top),
  dir: join(root, i === 0 ? 'base' : 'head'),
  values: new Map(),
}));
const cleanUp = () => {
  for (const s of sides) {
    if (existsSync(s.dir)) git(['worktree', 'remove', '--force', s.dir], top);
  }
  rmSync(root, { recursive: true, force: true });
};
process.on('SIGINT', () => {
  cleanUp();
  process.exit(130);
});
try {
  for (const s of sides) {
    git(['worktree', 'add', '--detach', s.dir, s.sha], top);
    symlinkSync(join(top, 'node_modules'), join(s.dir, 'node_modules'));
    if (runner) copyFileSync(join(top, runnerPath), join(s.dir, runnerPath));
  }
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? sides : [...sides].reverse();
    for (const s of order) {
      process.stderr.write(`\n[compare] round ${r + 1}/${rounds}: ${s.label} (${s.sha.slice(0, 7)})\n`);
      await runBench(s, runnerPath, benchArgs);
    }
  }
  process.stdout.write(`${report(sides[0]!, sides[1]!, rounds)}\n`);
} finally {
  cleanUp();
}
