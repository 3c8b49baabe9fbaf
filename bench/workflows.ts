/**
 * The workflows stage of `npm run bench` (`--only workflows`, Surety alone): what a park and a resume
 * cost (docs/workflows.md) beside a plain job, on the harness's private redis-server. Shapes:
 *
 * - `plain`: add, process, complete (the baseline of every ratio);
 * - `signal after park`: the processor calls `job.waitForSignal('go')` and parks; on the worker's
 *   `parked` event the producer sends `queue.signal(id, 'go')`; the job runs again from the top, the
 *   wait resolves and it completes: one park, one resume, one rerun per job;
 * - `signal before`: the signal is sent after the add, before the worker starts: the wait takes it at
 *   once, no park (the other order);
 * - `children k=1|10, same queue|other queue`: the parent calls `job.addChildren` (k no-op children,
 *   in its own queue or in a second queue with a worker of its own) and `job.waitForChildren()`,
 *   parks, and runs again when its last child has ended. Each child returns only once its parent
 *   has parked (Rig.holdChild), so that every parent parks and resumes exactly once.
 *
 * Throughput and cost, per shape: about N jobs in all (N roots for plain and signals, N/(k+1) parents
 * with their k children each), added in bulk calls of 1 000 (signals `before`: then signalled, 50 in
 * flight), then the worker(s) started, at concurrency 50 in this process, default retention; from
 * the first add to the last root's completion: roots/s, Redis CPU µs per root (INFO used_cpu_* delta)
 * and Redis commands per root (INFO commandstats delta after CONFIG RESETSTAT: commands run inside
 * scripts count, as in the `cost` scenario). Each also as a ratio to a plain job, and as the extra
 * over its jobs run plain ((k+1) x plain for a parent, 1 x plain for a signalled job): the park, the
 * resume and the rerun themselves.
 *
 * Latency, per shape, L flows one at a time on an idle worker (no backlog in front of a resumed job):
 * for plain, add sent -> processor running; for signals, signal sent -> processor running again; for
 * children, the last child's `completed` event (its completion written) -> parent running again.
 * CLOCK_MONOTONIC, all in this process, so the figures include this process's event loop.
 *
 * Shapes are interleaved (the starting shape rotates each run), after one warm-up round of every
 * shape; Redis is flushed before each measurement. Rows are medians over the runs.
 */
import type { Redis } from 'ioredis';
import { type Job, Queue, Worker } from '../src/index.js';
import { monoMs, withTimeout } from './clock.js';
import { flushAll, resetCommandStats, snapshot } from './redis-stats.js';
import { median, summary } from './stats.js';

const CONCURRENCY = 50;
const PAYLOAD = 'x'.repeat(100);
const WAIT_MS = 300_000;

type Kind = 'plain' | 'signal-after' | 'signal-before' | 'children';

interface Shape {
  name: string;
  kind: Kind;
  /** Children per parent (0: none). */
  k: number;
  otherQueue: boolean;
}

const SHAPES: Shape[] = [
  { name: 'plain job', kind: 'plain', k: 0, otherQueue: false },
  { name: 'signal, sent after park', kind: 'signal-after', k: 0, otherQueue: false },
  { name: 'signal, sent before', kind: 'signal-before', k: 0, otherQueue: false },
  { name: 'children k=1, same queue', kind: 'children', k: 1, otherQueue: false },
  { name: 'children k=10, same queue', kind: 'children', k: 10, otherQueue: false },
  { name: 'children k=1, other queue', kind: 'children', k: 1, otherQueue: true },
  { name: 'children k=10, other queue', kind: 'children', k: 10, otherQueue: true },
];

interface Data {
  i: number;
  s: string;
  /** Set on a child: its parent's id. */
  p?: string;
}

/** One shape's queues, workers and counters (see the file header). */
class Rig {
  readonly producer: Queue<Data>;
  private readonly workers: Worker<Data>[] = [];
  private readonly childQueue: string;
  roots = 0;
  parks = 0;
  reruns = 0;
  /** Latency mode (one flow at a time): plain, when the add was sent, ms. */
  private addSent = Number.NaN;
  private readonly plainStarts: number[] = [];
  /** Signals: when the signal was sent; children: when the parent's last child completed (max), ms. */
  private readonly woken = new Map<string, number>();
  /** When a root's processor ran again (its second start), ms. */
  private readonly rerunAt = new Map<string, number>();
  /** Parents that parked, and the children held until their parent parks (see holdChild). */
  private readonly parkedIds = new Set<string>();
  private readonly held = new Map<string, (() => void)[]>();
  private onRoot: (() => void) | undefined;
  private failure: Error | undefined;

  constructor(
    private readonly url: string,
    readonly name: string,
    readonly shape: Shape,
    private readonly latencyMode: boolean,
  ) {
    this.producer = new Queue<Data>(name, { connection: url });
    this.childQueue = shape.otherQueue ? `${name}-children` : name;
    const opts = { connection: url, concurrency: CONCURRENCY, autostart: false };
    const main = new Worker<Data>(name, (job) => this.process(job), opts);
    main.on('parked', (job) => this.parked(job));
    main.on('completed', (job) => this.completed(job));
    this.workers.push(main);
    if (shape.otherQueue) {
      const children = new Worker<Data>(this.childQueue, (job) => this.process(job), opts);
      children.on('completed', (job) => this.completed(job));
      this.workers.push(children);
    }
    for (const w of this.workers) w.on('error', (err) => this.fail(err));
  }

  private fail(err: Error): void {
    this.failure ??= err;
    this.onRoot?.();
  }

  /**
   * A child returns only once its parent has parked, so that every parent parks and resumes once (left
   * alone, an idle worker often ends the children before their parent reaches waitForChildren, which
   * then resolves at once). No deadlock: a child exists only once its parent runs, and the parent
   * parks next without needing another slot.
   */
  private holdChild(parent: string): Promise<void> | undefined {
    if (this.parkedIds.has(parent)) return undefined;
    return new Promise((resolve) => this.held.set(parent, [...(this.held.get(parent) ?? []), resolve]));
  }

  private async process(job: Job<Data>): Promise<null> {
    if (job.data.p !== undefined) {
      await this.holdChild(job.data.p);
      return null;
    }
    if (job.attempt > 1) {
      this.reruns++;
      if (this.latencyMode) this.rerunAt.set(job.id, monoMs());
    } else if (this.latencyMode && this.shape.kind === 'plain')
      this.plainStarts.push(monoMs() - this.addSent);
    if (this.shape.kind === 'signal-after' || this.shape.kind === 'signal-before') {
      await job.waitForSignal('go');
    } else if (this.shape.kind === 'children') {
      await job.addChildren(
        Array.from({ length: this.shape.k }, (_, i) => ({
          ...(this.shape.otherQueue ? { queue: this.childQueue } : {}),
          data: { i, s: PAYLOAD, p: job.id },
        })),
      );
      await job.waitForChildren();
    }
    return null;
  }

  private parked(job: Job<Data>): void {
    this.parks++;
    if (this.shape.kind === 'children') {
      this.parkedIds.add(job.id);
      for (const release of this.held.get(job.id) ?? []) release();
      this.held.delete(job.id);
    }
    if (this.shape.kind !== 'signal-after') return;
    if (this.latencyMode) this.woken.set(job.id, monoMs());
    this.producer.signal(job.id, 'go').then(
      (r) => {
        if (!r.woke)
          this.fail(new Error(`signal to parked job ${job.id} did not wake it: ${JSON.stringify(r)}`));
      },
      (err) => this.fail(err),
    );
  }

  private completed(job: Job<Data>): void {
    if (job.data.p !== undefined) {
      if (this.latencyMode) this.woken.set(job.data.p, Math.max(monoMs(), this.woken.get(job.data.p) ?? 0));
      return;
    }
    this.roots++;
    this.onRoot?.();
  }

  /** Resolves once `roots` roots have completed (rejects on a worker error or a refused signal). */
  untilRoots(roots: number): Promise<void> {
    const done = new Promise<void>((resolve, reject) => {
      const check = () => {
        if (this.failure) reject(this.failure);
        else if (this.roots >= roots) resolve();
      };
      this.onRoot = check;
      check();
    });
    return withTimeout(done, WAIT_MS, `workflows ${this.shape.name}: ${roots} roots`);
  }

  async fill(roots: number): Promise<void> {
    for (let i = 0; i < roots; i += 1_000) {
      const added = await this.producer.addBulk(
        Array.from({ length: Math.min(1_000, roots - i) }, (_, j) => ({ data: { i: i + j, s: PAYLOAD } })),
      );
      if (this.shape.kind === 'signal-before') await this.signalAll(added.map((a) => a.id));
    }
  }

  private async signalAll(ids: string[]): Promise<void> {
    let next = 0;
    const lane = async () => {
      while (next < ids.length) {
        const r = await this.producer.signal(ids[next++]!, 'go');
        if (!r.delivered || r.woke) throw new Error(`signal before the run: unexpected ${JSON.stringify(r)}`);
      }
    };
    await Promise.all(Array.from({ length: 50 }, lane));
  }

  async start(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.start()));
  }

  /** One flow at a time: each root added and awaited to completion. */
  async sequential(flows: number): Promise<void> {
    for (let i = 0; i < flows; i++) {
      this.addSent = monoMs();
      await this.producer.add({ i, s: PAYLOAD });
      await this.untilRoots(i + 1);
    }
  }

  /** Latency mode: plain, add -> start; otherwise signal sent or last child completed -> rerun, ms. */
  latencies(): number[] {
    if (this.shape.kind === 'plain') return this.plainStarts;
    return [...this.rerunAt].map(([id, at]) => at - (this.woken.get(id) ?? Number.NaN));
  }

  /** Every queue of the rig empty but for completed jobs: nothing left waiting, parked or running. */
  async checkDrained(): Promise<void> {
    for (const name of new Set([this.name, this.childQueue])) {
      const q = name === this.name ? this.producer : new Queue(name, { connection: this.url });
      const c = await q.counts();
      if (q !== this.producer) await q.close();
      if (c.waiting + c.delayed + c.blocked + c.active + c.dead > 0)
        throw new Error(`workflows ${this.shape.name}: ${name} not drained: ${JSON.stringify(c)}`);
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.close()));
    await this.producer.close();
  }
}

export interface WorkflowRow {
  shape: string;
  /** Children per parent (0: none). */
  k: number;
  otherQueue: boolean;
  /** Roots per throughput run (jobs, or parents), and jobs per root (1 + k). */
  roots: number;
  jobsPerRoot: number;
  /** Roots that parked, per root (median over runs). */
  parksPerRoot: number;
  rootsPerSec: number;
  jobsPerSec: number;
  redisCpuUsPerRoot: number;
  redisCommandsPerRoot: number;
  /** Latency flows measured, and p50/p99 ms (plain: add -> start; others: wake -> rerun). */
  latencyFlows: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
}

interface DrainSample {
  ms: number;
  cpuUs: number;
  commands: number;
  parks: number;
}

const rootsOf = (shape: Shape, n: number) => Math.max(1, Math.round(n / (shape.k + 1)));

/** One throughput run of a shape: fill (and signal), start the workers, until every root completed. */
async function drain(url: string, admin: Redis, name: string, shape: Shape, n: number): Promise<DrainSample> {
  await flushAll(admin);
  const rig = new Rig(url, name, shape, false);
  const roots = rootsOf(shape, n);
  try {
    await rig.producer.counts(); // the producer's connection open before the window
    const before = await snapshot(admin);
    await resetCommandStats(admin);
    const t0 = monoMs();
    await rig.fill(roots);
    await rig.start();
    await rig.untilRoots(roots);
    const ms = monoMs() - t0;
    const end = await snapshot(admin);
    await rig.checkDrained();
    const expected = shape.kind === 'signal-before' || shape.kind === 'plain' ? 0 : roots;
    if (rig.parks !== expected || rig.reruns !== rig.parks)
      throw new Error(`workflows ${shape.name}: ${rig.parks} parks, ${rig.reruns} reruns, ${roots} roots`);
    return { ms, cpuUs: end.cpuUs - before.cpuUs, commands: end.commands, parks: rig.parks };
  } finally {
    await rig.close();
  }
}

/** The latency run of a shape: `flows` flows one at a time on idle workers; ms per resumed flow. */
async function latency(
  url: string,
  admin: Redis,
  name: string,
  shape: Shape,
  flows: number,
): Promise<number[]> {
  if (shape.kind === 'signal-before') return [];
  await flushAll(admin);
  const rig = new Rig(url, name, shape, true);
  try {
    await rig.start();
    await rig.sequential(flows);
    return rig.latencies();
  } finally {
    await rig.close();
  }
}

/**
 * Runs every shape `runs` times, interleaved (the starting shape rotates), after a warm-up round of
 * small runs (not counted), and returns one row per shape: medians over the runs, latency percentiles
 * over every run's flows together.
 */
export async function runWorkflowsBench(
  url: string,
  admin: Redis,
  opts: { n: number; latencyFlows: number; runs: number },
  log: (line: string) => void,
): Promise<WorkflowRow[]> {
  let seq = 0;
  const name = (shape: Shape) =>
    `bench-workflows-${shape.kind}-${shape.k}${shape.otherQueue ? 'x' : ''}-${++seq}`;
  for (const shape of SHAPES) {
    await drain(url, admin, name(shape), shape, 220);
    await latency(url, admin, name(shape), shape, 20);
  }
  const drains = new Map<Shape, DrainSample[]>();
  const lat = new Map<Shape, number[]>();
  for (let run = 0; run < opts.runs; run++) {
    for (let j = 0; j < SHAPES.length; j++) {
      const shape = SHAPES[(run + j) % SHAPES.length]!;
      const d = await drain(url, admin, name(shape), shape, opts.n);
      const l = await latency(url, admin, name(shape), shape, opts.latencyFlows);
      drains.set(shape, [...(drains.get(shape) ?? []), d]);
      lat.set(shape, [...(lat.get(shape) ?? []), ...l]);
      const roots = rootsOf(shape, opts.n);
      const s = summary(l);
      log(
        `  ${shape.name.padEnd(27)} run ${run + 1}: ${roots} roots in ${d.ms.toFixed(0)} ms, ${(d.cpuUs / roots).toFixed(1)} Redis CPU µs/root, ${(d.commands / roots).toFixed(1)} commands/root, ${d.parks} parked${l.length ? `; latency p50 ${s.p50.toFixed(2)} ms, p99 ${s.p99.toFixed(2)} ms over ${l.length}` : ''}`,
      );
    }
  }
  return SHAPES.map((shape) => {
    const d = drains.get(shape)!;
    const roots = rootsOf(shape, opts.n);
    const s = summary(lat.get(shape)!);
    const ms = median(d.map((x) => x.ms));
    return {
      shape: shape.name,
      k: shape.k,
      otherQueue: shape.otherQueue,
      roots,
      jobsPerRoot: shape.k + 1,
      parksPerRoot: median(d.map((x) => x.parks)) / roots,
      rootsPerSec: (roots / ms) * 1000,
      jobsPerSec: ((roots * (shape.k + 1)) / ms) * 1000,
      redisCpuUsPerRoot: median(d.map((x) => x.cpuUs)) / roots,
      redisCommandsPerRoot: median(d.map((x) => x.commands)) / roots,
      latencyFlows: lat.get(shape)!.length,
      latencyP50Ms: s.p50,
      latencyP99Ms: s.p99,
    };
  });
}

const fixed = (v: number, digits: number) => (Number.isFinite(v) ? v.toFixed(digits) : '–');
/** A ratio to the plain job: two decimals, or two significant digits below 0.1x (0.0042x, not 0.00x). */
const times = (v: number, base: number) => {
  if (!Number.isFinite(v) || !(base > 0)) return '';
  const r = v / base;
  return ` (${r < 0.1 ? r.toPrecision(2) : r.toFixed(2)}x)`;
};

/**
 * The table: each figure per root, with its ratio to a plain job; "extra" is what a root costs over
 * its jobs run plain ((k+1) x plain): the park, the resume and the rerun.
 */
export function renderWorkflowsTable(rows: readonly WorkflowRow[]): string {
  const plain = rows.find((r) => r.k === 0 && r.shape.startsWith('plain'));
  const lines = [
    '| workflow (per root) | jobs/root | parked | roots/s | jobs/s | Redis CPU µs/root | extra CPU µs | Redis commands/root | extra commands | latency p50 ms | latency p99 ms |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    const extraCpu = plain ? r.redisCpuUsPerRoot - r.jobsPerRoot * plain.redisCpuUsPerRoot : Number.NaN;
    const extraCmd = plain ? r.redisCommandsPerRoot - r.jobsPerRoot * plain.redisCommandsPerRoot : Number.NaN;
    lines.push(
      `| ${r.shape} | ${r.jobsPerRoot} | ${Math.round(r.parksPerRoot * 100)} % | ${Math.round(r.rootsPerSec)}${times(r.rootsPerSec, plain?.rootsPerSec ?? 0)} | ${Math.round(r.jobsPerSec)} | ${fixed(r.redisCpuUsPerRoot, 1)}${times(r.redisCpuUsPerRoot, plain?.redisCpuUsPerRoot ?? 0)} | ${r === plain ? '' : fixed(extraCpu, 1)} | ${fixed(r.redisCommandsPerRoot, 1)}${times(r.redisCommandsPerRoot, plain?.redisCommandsPerRoot ?? 0)} | ${r === plain ? '' : fixed(extraCmd, 1)} | ${fixed(r.latencyP50Ms, 2)}${times(r.latencyP50Ms, plain?.latencyP50Ms ?? 0)} | ${fixed(r.latencyP99Ms, 2)}${times(r.latencyP99Ms, plain?.latencyP99Ms ?? 0)} |`,
    );
  }
  return lines.join('\n');
}
