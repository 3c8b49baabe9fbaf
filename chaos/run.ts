/**
 * `npm run chaos`: a real workload against a private redis-server (appendonly yes, appendfsync always)
 * while faults are injected, then a verdict on every invariant. Exit code 0 only when all hold;
 * 1 when one is violated; 2 when the run itself failed (startup error, global deadline, interrupt).
 *
 * Workers reach Redis through loopback TCP proxies (one per worker slot, chaos/network.ts), so network
 * partitions can be injected; the producer and the harness connect directly.
 *
 * Phases: startup (Redis, proxies, worker processes) -> chaos (producer + fault schedule for --duration) ->
 * drain (wait until nothing is waiting, delayed or active, up to a deadline) -> verdict (Redis through
 * the admin API + the workers' execution logs) -> report. Every child process and the redis-server are
 * killed on any exit path; a global deadline turns any hang into a failure with a clear message.
 */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Queue, type QueueKeys, ValidationError, Worker } from '../src/index.js';
import { type RedisServer, startRedis } from '../test/helpers/redis-server.js';
import { type ChaosResult, type JobData, workloadWeights } from './behaviour.js';
import {
  type CrossLeft,
  completedFromEvents,
  explainStuck,
  type Info,
  lookupUnlisted,
  readLogs,
  snapshotRedis,
  unfinished,
} from './collect.js';
import { type ChaosConfig, MAX_CONCURRENCY, parseConfig, roleOf } from './config.js';
import { DrainDeadline, type DrainLimits } from './drain.js';
import { analyseDuplicates } from './duplicates.js';
import { readExecLog } from './exec-log.js';
import { type FaultRecord, planFaults } from './fault-plan.js';
import { FaultRunner } from './faults.js';
import type { FlowLine } from './flows-verdict.js';
import { GroupWatch } from './group-watch.js';
import { Network } from './network.js';
import { WorkerPool } from './pool.js';
import { type ParentData, Producer } from './producer.js';
import { buildReport, faultCounts, printReport, srcFingerprint, writeReport } from './report.js';
import { Rng } from './rng.js';
import { Signaller } from './signaller.js';
import { within } from './time.js';
import { throwingTracerProvider } from './tracer.js';
import { judge } from './verdict.js';

const RESULTS = new URL('./results/', import.meta.url).pathname;

const cfg = parseConfig(process.argv.slice(2));
const startedAt = Date.now();
const runDir = join(
  RESULTS,
  'runs',
  `${new Date(startedAt).toISOString().replace(/[:.]/g, '-')}-seed${cfg.seed}`,
);
let phase = 'startup';
let redis: RedisServer | null = null;
let pool: WorkerPool | null = null;
let faults: FaultRunner | null = null;
let network: Network | null = null;

const say = (line: string) =>
  console.log(`[chaos +${((Date.now() - startedAt) / 1_000).toFixed(1)}s] ${line}`);

/** Synchronous, idempotent: safe from signal and exit handlers. */
function killEverything(): void {
  void faults?.releaseAll();
  pool?.killAll();
  void network?.close();
  const pid = redis?.pid;
  if (pid !== undefined) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  if (redis) rmSync(redis.dir, { recursive: true, force: true });
}

function abort(message: string): never {
  const doing = phase === 'chaos' && faults?.current ? `, fault in progress: ${faults.current}` : '';
  console.error(`\nchaos: ${message} (phase: ${phase}${doing}, seed ${cfg.seed}); logs kept in ${runDir}`);
  killEverything();
  process.exit(2);
}

process.on('exit', killEverything);
process.on('SIGINT', () => abort('interrupted (SIGINT)'));
process.on('SIGTERM', () => abort('terminated (SIGTERM)'));
process.on('uncaughtException', (err) => abort(`harness error: ${err.stack ?? err}`));
process.on('unhandledRejection', (err) => abort(`harness error: ${(err as Error)?.stack ?? err}`));
const deadline = setTimeout(
  () => abort(`global deadline of ${cfg.deadlineMs / 1_000} s exceeded: the run hung`),
  cfg.deadlineMs,
);

/** Polls counts() of every queue until nothing is unfinished three times in a row, up to `limits` (drain.ts). */
async function waitDrained(
  queues: readonly Queue<JobData, ChaosResult>[],
  limits: DrainLimits,
): Promise<{ drained: boolean; last: (object | null)[]; extendedMs: number }> {
  const deadline = new DrainDeadline(Date.now(), limits);
  let quiet = 0;
  const last: (object | null)[] = queues.map(() => null);
  while (Date.now() < deadline.until) {
    const counts = await Promise.all(
      queues.map((q) => within(q.counts(), 5_000, 'counts()').catch(() => null)),
    );
    counts.forEach((c, i) => {
      if (c) last[i] = c;
    });
    const left = counts.every((c) => c !== null) ? counts.reduce((n, c) => n + unfinished(c!), 0) : null;
    deadline.seen(left, Date.now());
    quiet = left === 0 ? quiet + 1 : 0;
    if (quiet >= 3) return { drained: true, last, extendedMs: deadline.extendedMs(Date.now()) };
    await new Promise((r) => setTimeout(r, 200));
  }
  return { drained: false, last, extendedMs: deadline.extendedMs(Date.now()) };
}

/** About one parent job per this many ms through the chaos phase (producer.ts runParents). */
const PARENT_GAP_MS = 150;

/**
 * Waits (up to a few recovery intervals, at least 5 s) until no queue has an entry left in its
 * cross-queue outbox (`xnotify`) or links (`xlinks`); returns what is left (none when all emptied).
 */
async function waitCrossEmpty(
  keys: readonly QueueKeys[],
  admin: Redis,
  recoverIntervalMs: number,
): Promise<CrossLeft[]> {
  const until = Date.now() + Math.max(5_000, 5 * recoverIntervalMs);
  for (;;) {
    const left: CrossLeft[] = [];
    for (const k of keys)
      for (const key of [k.xnotify, k.xlinks]) {
        const members = await admin.zrange(key, 0, 4);
        if (members.length > 0) left.push({ key, count: await admin.zcard(key), members });
      }
    if (left.length === 0 || Date.now() >= until) return left;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** One line on the cross-queue share of the workload, for the log. */
function crossSummary(
  producer: Producer,
  parents: ReadonlyMap<string, { state: string }>,
  jobs: ReadonlyMap<string, Info>,
  completedDeleted: ReadonlySet<string> | null,
  left: readonly CrossLeft[],
): string {
  const children = producer.accepted.filter((a) => a.xdeps);
  const depFailed = children.filter(
    (a) => jobs.get(a.id!)?.errors.at(-1)?.name === 'DependencyFailedError',
  ).length;
  const completed = children.filter(
    (a) => jobs.get(a.id!)?.state === 'completed' || (!jobs.has(a.id!) && completedDeleted?.has(a.id!)),
  ).length;
  const dead = [...parents.values()].filter((p) => p.state === 'dead').length;
  return (
    `cross-queue: ${producer.parents.length} parents accepted (${dead} of ${parents.size} listed ended dead, ` +
    `${producer.parentsUnknown} adds unknown); ${children.length} children ` +
    `(${children.filter((a) => a.xdeps!.length > 1).length} with two parents, ` +
    `${children.filter((a) => a.ignoreDep).length} ignoring failure, ` +
    `${children.filter((a) => a.state === 'blocked').length} added blocked): ${completed} completed, ` +
    `${depFailed} dead by DependencyFailedError; outbox/link entries left: ${left.reduce((n, l) => n + l.count, 0)}`
  );
}

/** One line on the signal share of the workload, for the log. */
function signalSummary(
  signaller: Signaller,
  waits: readonly { o: string; id: string; s: number; n: number }[],
  jobs: ReadonlyMap<string, Info>,
): string {
  const sends = signaller.sends;
  const n = (f: (x: (typeof sends)[number]) => boolean) => sends.filter(f).length;
  const distinct = (o: string) =>
    new Set(waits.filter((w) => w.o === o).map((w) => `${w.id}#${w.s}#${w.n}`)).size;
  const sig = [...jobs.values()].filter((j) => j.data.k === 'a');
  return (
    `signals: ${sends.length} sends (${n((x) => x.answer?.delivered === true)} delivered, ` +
    `${n((x) => x.answer?.woke === true)} woke a parked job, ${n((x) => x.answer?.reason === 'ended')} to ended jobs, ` +
    `${n((x) => x.answer?.reason === 'missing')} missing, ${n((x) => x.answer === undefined)} unknown; ` +
    `${n((x) => x.why === 'dup')} duplicates); waits: ${distinct('taken')} took a signal, ${distinct('timeout')} timed out, ` +
    `${distinct('parked')} parked, ${waits.filter((w) => w.o === 'fail').length} calls failed; ` +
    `${sig.filter((j) => j.state === 'completed').length} signal jobs listed completed, ${sig.filter((j) => j.state === 'dead').length} dead`
  );
}

/** One line on the flow share of the workload (kind p), for the log. */
function flowSummary(
  producer: Producer,
  calls: readonly FlowLine[],
  jobs: ReadonlyMap<string, Info>,
  second: ReadonlyMap<string, Info>,
): string {
  const flows = producer.accepted.filter((a) => a.kind === 'p' && a.flow);
  const parents = [...jobs.values()].filter((j) => j.data.k === 'p');
  const kids = [...jobs.values(), ...second.values()].filter((j) => j.data.fp !== undefined);
  const planned = flows.reduce((n, a) => n + a.flow!.length, 0);
  const waits = calls.filter((l) => l.call === 'wait');
  const parked = new Set(waits.filter((l) => l.o === 'parked').map((l) => `${l.id}#${l.s}`));
  const resumed = new Set(
    waits
      .filter((l) => l.o !== 'parked' && l.o !== 'fail' && parked.has(`${l.id}#${l.s}`))
      .map((l) => `${l.id}#${l.s}`),
  );
  const depDead = parents.filter(
    (j) => j.state === 'dead' && j.errors.at(-1)?.name === 'DependencyFailedError',
  );
  return (
    `flows: ${flows.length} parents accepted (${parents.filter((j) => j.state === 'completed').length} completed, ` +
    `${depDead.length} dead by DependencyFailedError, ${parents.filter((j) => j.state === 'dead').length - depDead.length} dead otherwise); ` +
    `${planned} children planned, ${kids.length} listed (${kids.filter((j) => second.has(j.id)).length} in the second queue; ` +
    `${kids.filter((j) => j.state === 'completed').length} completed, ${kids.filter((j) => j.state === 'dead').length} dead); ` +
    `addChildren answered ${calls.filter((l) => l.call === 'add' && l.o === 'added').length}, failed ${calls.filter((l) => l.call === 'add' && l.o === 'fail').length}; ` +
    `waits: ${waits.filter((l) => l.o === 'resolved').length} resolved, ${parked.size} parents parked, ${resumed.size} resumed after a park, ` +
    `${waits.filter((l) => l.o === 'depfail').length} DependencyFailedError, ${waits.filter((l) => l.o === 'fail').length} failed`
  );
}

/**
 * The drawn options must be valid by the library's own bounds: the maximum concurrency the harness
 * draws is accepted, one more is refused (else the exported MAX_CONCURRENCY is not the bound the
 * options enforce). Neither Worker starts (autostart: false).
 */
async function checkBounds(url: string): Promise<void> {
  const make = (concurrency: number) =>
    new Worker('chaos-bounds', async () => {}, { connection: url, concurrency, autostart: false });
  const atMax = make(MAX_CONCURRENCY);
  await atMax.close();
  let refused = false;
  try {
    await make(MAX_CONCURRENCY + 1).close();
  } catch (err) {
    refused = err instanceof ValidationError;
  }
  if (!refused)
    throw new Error(
      `Worker accepts concurrency ${MAX_CONCURRENCY + 1}, above the exported MAX_CONCURRENCY: the bound and its export disagree`,
    );
}

async function main(c: ChaosConfig): Promise<number> {
  mkdirSync(runDir, { recursive: true });
  const srcAtStart = srcFingerprint();
  say(
    `seed ${c.seed}: ${c.jobs} jobs, ${c.workers} workers x concurrency ${c.concurrency} (prefetch ${c.prefetch}), ` +
      `lease ${c.leaseMs} ms, completed kept: ${c.keepCompleted}, ${c.durationMs / 1_000} s of chaos; logs in ${runDir}`,
  );
  redis = await startRedis({ aof: true });
  await checkBounds(redis.url);
  network = await Network.start(c.workers, redis.port);
  const admin = new Redis(redis.url, { maxRetriesPerRequest: null });
  admin.on('error', () => {});
  const queueName = `chaos-${c.seed}`;
  const queue = new Queue<JobData, ChaosResult>(queueName, {
    connection: redis.url,
    defaults: { leaseMs: c.leaseMs, backoff: { type: 'fixed', delayMs: c.backoffMs } },
    // Retention 0: the events stream is the evidence of completions; every writer must keep all of it.
    ...(c.keepCompleted === 0 ? { events: { maxLen: 10_000_000 } } : {}),
  });
  queue.client.on('error', () => {}); // connection drops are part of the test; adds report them
  // The same queue through a Queue whose tracer throws at random: a share of the adds go through it.
  const traced = new Queue<JobData, ChaosResult>(queueName, {
    connection: redis.url,
    defaults: { leaseMs: c.leaseMs, backoff: { type: 'fixed', delayMs: c.backoffMs } },
    telemetry: { tracerProvider: throwingTracerProvider(c.seed * 31 + 5) },
    // Every writer keeps the whole stream (see above): an add's XADD trims to its own cap.
    ...(c.keepCompleted === 0 ? { events: { maxLen: 10_000_000 } } : {}),
  });
  traced.client.on('error', () => {});
  // The parents queue: another queue of the same prefix; a share of the adds depend on its jobs.
  const parentsQueue = new Queue<ParentData>(`${queueName}-p`, { connection: redis.url });
  parentsQueue.client.on('error', () => {});
  const net = network;
  pool = new WorkerPool(
    c.workers,
    runDir,
    {
      queue: queueName,
      parentsQueue: parentsQueue.name,
      seed: c.seed,
      concurrency: c.concurrency,
      prefetch: c.prefetch,
      keepCompleted: c.keepCompleted,
      leaseMs: c.leaseMs,
      recoverIntervalMs: c.recoverIntervalMs,
      heartbeatMs: c.heartbeatMs,
      pollIntervalMs: c.pollIntervalMs,
    },
    (slot) => net.port(slot),
    (slot, n) => roleOf(c, slot, n),
  );
  // Group limits (producer.ts puts a third of the non-dedupe jobs in groups g1..g20): every group at
  // most 4 active; g1 strictly FIFO (concurrency 1, its retries hold its place), g2 rate-limited; g3,
  // g4 and the defaults change while the run goes on (group-watch.ts).
  const rng = new Rng(c.seed);
  const producer = new Producer(
    queue,
    rng.fork(2),
    c.leaseMs,
    workloadWeights(c.workload),
    traced,
    parentsQueue,
    { leaseMs: c.leaseMs, backoffMs: c.backoffMs },
  );
  // The signals kind a jobs wait for, sent as planned at their adds (signaller.ts).
  const signaller = new Signaller(queue, producer);
  // Group limits changed while the run goes on, and queue.groups() sampled (group-watch.ts).
  const watch = new GroupWatch(queue, rng.fork(4));
  await watch.setUp();
  await pool.start();
  if (c.initialBurst > 0) {
    // Added while the queue is paused and every worker is up (not while five of them still compile on
    // the shared cores, starving the first one past its leases), then released at once: the first
    // claims meet the whole backlog.
    await within(queue.pause(), 10_000, 'pause()');
    await producer.preload(c.initialBurst, c.durationMs, 30_000);
    await within(queue.resume(), 10_000, 'resume()');
    say(`${producer.accepted.length} jobs released at once to idle workers (initial burst)`);
  }
  const startupMs = Date.now() - startedAt;
  say(`redis on port ${redis.port} (pid ${redis.pid}), ${c.workers} workers ready`);

  phase = 'chaos';
  const plan = planFaults(rng.fork(1), {
    durationMs: c.durationMs,
    workers: c.workers,
    leaseMs: c.leaseMs,
    redisKills: c.redisKills,
    meanGapMs: c.meanFaultGapMs,
    kinds: c.faultKinds,
  });
  const backlog = () =>
    within(queue.counts(), 2_000, 'counts()').then(
      (n) => n.waiting + n.active,
      () => null,
    );
  faults = new FaultRunner(pool, redis, admin, network, say, backlog);
  const t0 = Date.now();
  watch.start();
  let maxBacklog = 0;
  let sampling = false;
  const sampler = setInterval(() => {
    if (sampling) return; // a call caught by a fault: skip samples until it settles
    sampling = true;
    within(queue.counts(), 2_000, 'counts()')
      .then(
        (n) => {
          maxBacklog = Math.max(maxBacklog, n.waiting);
        },
        () => {},
      )
      .finally(() => {
        sampling = false;
      });
  }, 1_000);
  const progress = setInterval(
    () => say(`progress: ${producer.added} adds made, backlog up to ${maxBacklog}`),
    10_000,
  );
  const signalling = signaller.run();
  await Promise.all([
    producer.run(c.jobs, t0, c.durationMs, 5_000).then(() => signaller.followUnknown()),
    producer.runParents(t0 + c.durationMs - 1_000, PARENT_GAP_MS, 5_000),
    faults.run(plan, t0, () => Date.now() > t0 + c.durationMs),
  ]);
  clearInterval(progress);
  clearInterval(sampler);
  await within(faults.releaseAll(), 60_000, 'ending the faults in force');
  const chaosEnd = Date.now();

  phase = 'drain';
  say(`chaos over: ${producer.accepted.length} adds accepted, ${producer.unknown.length} unknown; draining`);
  await watch.lift();
  const drain = await waitDrained([queue, parentsQueue as unknown as Queue<JobData, ChaosResult>], {
    minMs: c.drainMs,
    capMs: c.drainCapMs,
    stallMs: c.drainStallMs,
  });
  const drained = drain.drained;
  // Every signal job has ended once drained: each gets one more send, which must be refused.
  await signaller.stop(5_000);
  await signalling;
  if (drained) await within(signaller.sendToEnded(), 30_000, 'signals to ended jobs');
  const drainCounts = { main: drain.last[0], parents: drain.last[1] };
  // Cross-queue bookkeeping left after the drain: the workers' recovery passes forward any outbox
  // entry and make any link a crash left behind; a few of their intervals are given to them.
  const xLeft = await waitCrossEmpty([queue.keys, parentsQueue.keys], admin, c.recoverIntervalMs);
  const drainMs = Date.now() - chaosEnd;
  const diagnosis = drained ? undefined : await pool.diagnose();
  // Not drained: stop every worker first, so the state read next is final. (Workers still running
  // while the jobs are paged move them under the reader: an outcome acknowledged after its job was
  // read as waiting looked like an acknowledged outcome lost.)
  if (!drained) pool.killAll();

  await watch.stop();
  phase = 'verdict';
  const extended = drain.extendedMs > 0 ? ` (past ${c.drainMs} ms: jobs were still ending)` : '';
  say(
    drained
      ? `drained in ${drainMs} ms${extended}; checking`
      : `NOT drained after ${drainMs} ms${extended}; checking`,
  );
  const snapshot = await within(snapshotRedis(queue, drained), 60_000, 'reading the final state');
  const parentsSnapshot = await within(
    snapshotRedis(parentsQueue as unknown as Queue<JobData, ChaosResult>, drained),
    60_000,
    'reading the parents queue',
  );
  // Retention 0: a completed job's record is gone; the events stream and the workers' acks say it completed.
  const completedEvents =
    c.keepCompleted === 0
      ? await within(completedFromEvents(queue), 60_000, 'reading the events stream')
      : new Map<string, (ChaosResult | undefined)[]>();
  const missing = [...new Set(producer.accepted.map((a) => a.id!))].filter(
    (id) => !snapshot.jobs.has(id) && !completedEvents.has(id),
  );
  const unlisted = await within(lookupUnlisted(queue, missing), 30_000, 'looking up unlisted jobs');
  const stuckExplained = drained
    ? undefined
    : await within(explainStuck(queue, snapshot), 30_000, 'explaining unfinished jobs');
  await pool.close(5_000);
  await network.close();
  const logs = readLogs(pool.all.map((w) => w.logPath));
  const completedDeleted =
    c.keepCompleted === 0 ? new Set([...completedEvents.keys(), ...logs.ackedComplete.keys()]) : null;
  // Measured event-loop stalls count as causes after the injected faults (same order as the timeline).
  const causes: FaultRecord[] = [
    ...faults.records,
    ...logs.stalls.map((g) => ({
      kind: 'loopStall' as const,
      at: g.from,
      until: g.to,
      pid: g.pid,
      detail: `event loop of pid ${g.pid} blocked ${g.to - g.from} ms`,
    })),
  ];
  const dup = analyseDuplicates(logs.executions, snapshot.jobs, causes, c, logs.begunAttempts);
  const crashes = pool.all
    .filter((w) => w.crash)
    .map((w) => {
      const why = readExecLog(w.logPath).lines.find((l) => l.t === 'e' && l.code === 'CRASH');
      const text = why?.t === 'e' ? why.msg : w.crash!.stderrTail.trim().split('\n').slice(-3).join(' | ');
      return `pid ${w.pid} exited (${w.crash!.code ?? w.crash!.signal}) ${((w.exitedAt! - t0) / 1_000).toFixed(1)} s into chaos: ${text}`;
    });
  const verdict = judge({
    seed: c.seed,
    t0,
    accepted: producer.accepted,
    unknown: producer.unknown,
    snapshot,
    unlisted,
    logs,
    duplicates: dup,
    crashes,
    notDrained: drained ? null : JSON.stringify(drainCounts),
    faultsPlanned: faultCounts(plan),
    faultsApplied: faultCounts(faults.records),
    minRedisKills: c.redisKills,
    faults: causes,
    completedDeleted,
    completedEventResults: c.keepCompleted === 0 ? completedEvents : null,
    fifoGroups: GroupWatch.FIFO_GROUPS,
    groupSamples: watch.samples,
    backoffMs: c.backoffMs,
    pollIntervalMs: c.pollIntervalMs,
    sends: signaller.sends,
    queueName,
    cross: {
      parents: producer.parents,
      parentsSnapshot: parentsSnapshot.jobs,
      parentsIntegrity: parentsSnapshot.integrity,
      parentsQueue: parentsQueue.name,
      parentsJobs: parentsSnapshot.jobs,
      left: xLeft,
    },
  });
  say(crossSummary(producer, parentsSnapshot.jobs, snapshot.jobs, completedDeleted, xLeft));
  say(signalSummary(signaller, logs.signalWaits, snapshot.jobs));
  say(flowSummary(producer, logs.flowCalls, snapshot.jobs, parentsSnapshot.jobs));
  const report = buildReport({
    c,
    command: `npm run chaos -- ${process.argv.slice(2).join(' ')}`.trim(),
    startedAt,
    startupMs,
    t0,
    chaosEnd,
    drainMs,
    drained,
    maxBacklog,
    producer,
    snapshot,
    logs,
    dup,
    verdict,
    faults: faults.records,
    workersSpawned: pool.all.length,
    crashes,
    diagnosis,
    stuckExplained,
    srcAtStart,
  });
  const passed = report.passed;
  printReport(report);
  // --ci (npm test) writes an untracked file, so the tests never modify the tree.
  writeReport(join(RESULTS, c.ci ? 'ci/latest.json' : 'latest.json'), report);
  await Promise.allSettled([queue.close(), traced.close(), parentsQueue.close(), admin.quit()]);
  await redis.stop();
  redis = null;
  if (passed && !c.keepLogs) rmSync(runDir, { recursive: true, force: true });
  else say(`execution logs kept in ${runDir}`);
  return passed ? 0 : 1;
}

main(cfg).then(
  (code) => {
    clearTimeout(deadline);
    process.exit(code);
  },
  (err: unknown) => abort(`run failed: ${(err as Error)?.stack ?? err}`),
);
