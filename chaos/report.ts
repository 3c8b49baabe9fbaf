/**
 * The run's report: printed for a human, and written to chaos/results/latest.json (small, commit-worthy:
 * figures and at most a few examples per check, never the raw logs); a --ci run writes
 * chaos/results/ci/latest.json instead (untracked: `npm test` never modifies tracked files).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { LogEvidence, RedisSnapshot } from './collect.js';
import type { ChaosConfig } from './config.js';
import type { DuplicateReport } from './duplicates.js';
import { FAULT_KINDS, type FaultRecord } from './fault-plan.js';
import type { Producer } from './producer.js';
import type { Check, Judgement } from './verdict.js';
import type { WorkerDiag } from './worker-child.js';

export interface ChaosReport {
  when: string;
  passed: boolean;
  seed: number;
  command: string;
  config: Pick<
    ChaosConfig,
    | 'jobs'
    | 'workers'
    | 'concurrency'
    | 'prefetch'
    | 'durationMs'
    | 'leaseMs'
    | 'recoverIntervalMs'
    | 'pollIntervalMs'
    | 'keepCompleted'
    | 'initialBurst'
    | 'backoffMs'
    | 'ci'
    | 'fixedOptions'
    | 'faultKinds'
    | 'workload'
  >;
  timing: { startupMs: number; chaosMs: number; drainMs: number; totalMs: number; drained: boolean };
  adds: {
    made: number;
    accepted: number;
    /** Accepted adds that handed their job to an idle worker (add-one.lua): they must end like any other. */
    handedOff: number;
    /** Accepted adds sent with lifo: true. */
    lifo: number;
    /**
     * Accepted keepLastIfActive adds answered with a job blocked behind its key's running one: new
     * successors, and rewrites of a pending one.
     */
    successors: number;
    successorRewrites: number;
    /** Accepted adds naming parents of the parents queue, and the parent adds accepted there. */
    crossChildren: number;
    parents: number;
    distinctJobs: number;
    unknown: number;
    neverSettled: number;
    /** Refused adds per error code ('none': an error without a code). */
    unknownByCode: Record<string, number>;
  };
  outcome: Record<string, number>;
  deadByLeaseLoss: string[];
  throughput: {
    completedPerSecDuringChaos: number;
    executionsPerSecDuringChaos: number;
    maxWaitingDuringChaos: number;
  };
  /**
   * The commit tested, uncommitted changes under src/ at the end, and whether src/ changed while the
   * run went on (the tree is shared): worker processes started at different times may then have run
   * different code, and a violation may come from that skew rather than from Surety.
   */
  tree: { commit: string; srcChanges: string[]; changedDuringRun: boolean };
  faults: {
    counts: Record<string, number>;
    /** Per fault kind: wasted executions attributed to it, and their bound. */
    perKind: Record<string, { applied: number; wasted: number; cap: number }>;
    timeline: string[];
  };
  executions: Omit<DuplicateReport, 'unexplained' | 'perFault' | 'overCap' | 'leaseLossesWithoutFault'> & {
    unexplained: number;
    leaseLossesWithoutFaultCount: number;
    /** Up to 8 examples. */
    leaseLossesWithoutFault: string[];
    staleRefusals: number;
    leaseLost: number;
    errorCodes: Record<string, number>;
    /** Worker event-loop stalls of a quarter lease or more, and the longest (ms). */
    loopStalls: number;
    longestStallMs: number;
  };
  workers: { spawned: number; crashed: number };
  checks: Check[];
  diagnosis?: WorkerDiag[];
  /** queue.explain of a few unfinished jobs, when the run did not drain. */
  stuckExplained?: string[];
}

export interface ReportInput {
  c: ChaosConfig;
  command: string;
  startedAt: number;
  startupMs: number;
  /** Start and end of the chaos phase (epoch ms). */
  t0: number;
  chaosEnd: number;
  drainMs: number;
  drained: boolean;
  maxBacklog: number;
  producer: Producer;
  snapshot: RedisSnapshot;
  logs: LogEvidence;
  dup: DuplicateReport;
  verdict: Judgement;
  faults: readonly FaultRecord[];
  workersSpawned: number;
  crashes: readonly string[];
  diagnosis: WorkerDiag[] | undefined;
  stuckExplained: string[] | undefined;
  /** srcFingerprint() when the run started. */
  srcAtStart: string;
}

export function buildReport(i: ReportInput): ChaosReport {
  const { c, t0, chaosEnd, producer, snapshot, logs, dup, verdict } = i;
  const chaosSec = (chaosEnd - t0) / 1_000;
  let completedInChaos = 0;
  for (const j of snapshot.jobs.values()) {
    const at = j.finishedAt ?? 0;
    if (j.state === 'completed' && at >= t0 && at <= chaosEnd) completedInChaos++;
  }
  const execsInChaos = logs.executions.filter((e) => e.end >= t0 && e.end <= chaosEnd).length;
  const { unexplained, perFault: _perFault, overCap: _overCap, ...dupFigures } = dup;
  return {
    when: new Date(i.startedAt).toISOString(),
    passed: verdict.checks.every((ch) => ch.ok),
    seed: c.seed,
    command: i.command,
    config: {
      jobs: c.jobs,
      workers: c.workers,
      concurrency: c.concurrency,
      prefetch: c.prefetch,
      durationMs: c.durationMs,
      leaseMs: c.leaseMs,
      recoverIntervalMs: c.recoverIntervalMs,
      pollIntervalMs: c.pollIntervalMs,
      keepCompleted: c.keepCompleted,
      initialBurst: c.initialBurst,
      backoffMs: c.backoffMs,
      ci: c.ci,
      fixedOptions: c.fixedOptions,
      faultKinds: c.faultKinds,
      workload: c.workload,
    },
    timing: {
      startupMs: i.startupMs,
      chaosMs: chaosEnd - t0,
      drainMs: i.drainMs,
      totalMs: Date.now() - i.startedAt,
      drained: i.drained,
    },
    adds: {
      made: producer.added,
      accepted: producer.accepted.length,
      distinctJobs: new Set(producer.accepted.map((a) => a.id)).size,
      handedOff: producer.accepted.filter((a) => a.handedOff).length,
      lifo: producer.accepted.filter((a) => a.lifo).length,
      successors: producer.accepted.filter((a) => a.dedupe && a.state === 'blocked' && a.isNew).length,
      successorRewrites: producer.accepted.filter((a) => a.dedupe && a.state === 'blocked' && !a.isNew)
        .length,
      crossChildren: producer.accepted.filter((a) => a.xdeps).length,
      parents: producer.parents.length,
      unknown: producer.unknown.length,
      neverSettled: producer.neverSettled,
      unknownByCode: countBy(producer.unknown.map((u) => u.code ?? 'none')),
    },
    outcome: {
      ...snapshot.byState,
      deadByLeaseLoss: verdict.deadByLeaseLoss,
      fromUnknownAdds: verdict.fromUnknownAdds,
    },
    deadByLeaseLoss: verdict.deadByLeaseLossExamples,
    throughput: {
      completedPerSecDuringChaos: Math.round(completedInChaos / chaosSec),
      executionsPerSecDuringChaos: Math.round(execsInChaos / chaosSec),
      maxWaitingDuringChaos: i.maxBacklog,
    },
    tree: { ...treeState(), changedDuringRun: srcFingerprint() !== i.srcAtStart },
    faults: {
      counts: faultCounts(i.faults),
      perKind: perKind(dup),
      timeline: faultTimeline(i.faults, dup, t0),
    },
    executions: {
      ...dupFigures,
      unexplained: unexplained.length,
      leaseLossesWithoutFaultCount: dup.leaseLossesWithoutFault.length,
      leaseLossesWithoutFault: dup.leaseLossesWithoutFault.slice(0, 8),
      staleRefusals: logs.staleRefusals,
      leaseLost: logs.leaseLostEvents,
      errorCodes: logs.errorCodes,
      loopStalls: logs.stalls.length,
      longestStallMs: Math.max(0, ...logs.stalls.map((g) => g.to - g.from)),
    },
    workers: { spawned: i.workersSpawned, crashed: i.crashes.length },
    checks: verdict.checks,
    ...(i.diagnosis ? { diagnosis: i.diagnosis } : {}),
    ...(i.stuckExplained ? { stuckExplained: i.stuckExplained } : {}),
  };
}

const SRC = new URL('../src/', import.meta.url).pathname;

/** A hash of every file under src/, to notice edits landing while a run goes on. */
export function srcFingerprint(dir = SRC): string {
  const hash = createHash('sha1');
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const path = join(d, e.name);
      if (e.isDirectory()) walk(path);
      else hash.update(path).update(readFileSync(path));
    }
  };
  walk(dir);
  return hash.digest('hex');
}

/** Which tree was tested (read-only git calls; the tree is shared and may have uncommitted changes). */
function treeState(): { commit: string; srcChanges: string[] } {
  const git = (...args: string[]) => {
    try {
      return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trimEnd();
    } catch {
      return '';
    }
  };
  const changes = git('status', '--porcelain', '--', 'src');
  return {
    commit: git('rev-parse', '--short', 'HEAD'),
    srcChanges: changes ? changes.split('\n').map((l) => l.slice(3)) : [],
  };
}

export function faultCounts(records: readonly { kind: string }[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const k of FAULT_KINDS) counts[k] = 0;
  for (const r of records) counts[r.kind] = (counts[r.kind] ?? 0) + 1;
  return counts;
}

function countBy(keys: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of keys) out[k] = (out[k] ?? 0) + 1;
  return out;
}

function perKind(dup: DuplicateReport): Record<string, { applied: number; wasted: number; cap: number }> {
  const out: Record<string, { applied: number; wasted: number; cap: number }> = {};
  for (const f of dup.perFault) {
    const k = out[f.kind] ?? { applied: 0, wasted: 0, cap: 0 };
    out[f.kind] = k;
    k.applied++;
    k.wasted += f.wasted;
    k.cap += f.cap;
  }
  return out;
}

function faultTimeline(records: readonly FaultRecord[], dup: DuplicateReport, t0: number): string[] {
  return records.map((r, i) => {
    const w = dup.perFault[i];
    const s = ((r.at - t0) / 1_000).toFixed(1);
    return `+${s}s ${r.kind} ${r.detail}${w ? `: ${w.wasted} wasted executions (bound ${w.cap})` : ''}`;
  });
}

export function writeReport(path: string, report: ChaosReport): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(report, null, 2)}\n`);
}

export function printReport(r: ChaosReport): void {
  const out: string[] = [];
  const sec = (ms: number) => `${(ms / 1_000).toFixed(1)} s`;
  out.push('', `=== Surety chaos run, seed ${r.seed}${r.config.ci ? ' (ci)' : ''} ===`);
  out.push(
    `tree       ${r.tree.commit}${r.tree.srcChanges.length ? ` + ${r.tree.srcChanges.length} uncommitted files under src/ (${r.tree.srcChanges.slice(0, 4).join(', ')}${r.tree.srcChanges.length > 4 ? ', ...' : ''})` : ''}`,
  );
  out.push(
    `setup      ${r.config.jobs} jobs, ${r.config.workers} workers x concurrency ${r.config.concurrency} ` +
      `(prefetch ${r.config.prefetch}), lease ${r.config.leaseMs} ms, recover every ${r.config.recoverIntervalMs} ms, ` +
      `poll every ${r.config.pollIntervalMs} ms, backoff ${r.config.backoffMs} ms, completed kept: ${r.config.keepCompleted}` +
      `${r.config.initialBurst ? `, initial burst ${r.config.initialBurst} jobs` : ''}` +
      `${r.config.fixedOptions ? ' (fixed options)' : ' (options drawn from the seed)'}`,
  );
  out.push(
    `kinds      faults: ${r.config.faultKinds.length ? r.config.faultKinds.join(', ') : 'none'}; ` +
      `workload: ${r.config.workload === 'all' ? 'all job kinds' : 'plain (no misbehaving processors)'}`,
  );
  out.push(
    `timing     startup ${sec(r.timing.startupMs)}, chaos ${sec(r.timing.chaosMs)}, drain ${sec(r.timing.drainMs)}` +
      `${r.timing.drained ? '' : ' (NOT DRAINED)'}, total ${sec(r.timing.totalMs)}`,
  );
  out.push(
    `adds       ${r.adds.made} made, ${r.adds.accepted} accepted (${r.adds.distinctJobs} distinct jobs, ` +
      `${r.adds.handedOff} handed off, ${r.adds.lifo} lifo, ${r.adds.successors} keep-last successors ` +
      `rewritten ${r.adds.successorRewrites} times), ` +
      `${r.adds.unknown} unknown (${r.adds.neverSettled} never settled; by code ${JSON.stringify(r.adds.unknownByCode)})`,
  );
  out.push(
    `outcome    ${Object.entries(r.outcome)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  );
  for (const line of r.deadByLeaseLoss) out.push(`             dead by lease loss: ${line}`);
  out.push(
    `throughput ${r.throughput.completedPerSecDuringChaos} completed/s and ` +
      `${r.throughput.executionsPerSecDuringChaos} executions/s during chaos; waiting backlog up to ${r.throughput.maxWaitingDuringChaos}`,
  );
  out.push(
    `faults     ${Object.entries(r.faults.counts)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  );
  out.push(
    `per kind   ${Object.entries(r.faults.perKind)
      .map(([k, v]) => `${k}: ${v.wasted} wasted (bound ${v.cap})`)
      .join(', ')}`,
  );
  for (const line of r.faults.timeline) out.push(`             ${line}`);
  const e = r.executions;
  out.push(
    `executions ${e.executions} logged; ${e.wasted} wasted (outcome not recorded, job ran again) on ${e.jobsAffected} jobs, ` +
      `${e.okDuplicates} duplicate successes; ${e.explained} explained by a fault, ${e.unexplained} unexplained, bound ${e.bound}`,
  );
  out.push(
    `leases     ${e.leaseLosses} attempts lost their lease (${e.leaseLossesNeverRan} never logged as run: ` +
      `killed mid-run, prefetched or claimed when the fault hit; ${e.leaseLossesNeverBegun} never begun at all); ` +
      `${e.leaseLossesWithoutFaultCount} with no fault in the lease + 3 s before`,
  );
  for (const l of e.leaseLossesWithoutFault) out.push(`             no fault near: ${l}`);
  out.push(
    `events     ${e.staleRefusals} stale outcomes refused, ${e.leaseLost} leases found lost, errors ${JSON.stringify(e.errorCodes)}`,
  );
  out.push(
    `stalls     ${e.loopStalls} worker event-loop stalls of a quarter lease or more (longest ${e.longestStallMs} ms; ` +
      'wasted executions near one count as explained, as a blocked loop past the lease is a documented limit)',
  );
  out.push(`workers    ${r.workers.spawned} processes started, ${r.workers.crashed} crashed`);
  out.push('', 'invariants:');
  for (const c of r.checks) {
    out.push(`  ${c.open ? 'open' : c.ok ? 'ok  ' : 'FAIL'} ${c.name}: ${c.count}   (${c.rule})`);
    for (const ex of c.ok && !c.open ? [] : c.examples) out.push(`         - ${ex}`);
  }
  if (r.diagnosis?.length) {
    out.push('', 'worker state at the drain deadline (internal, for diagnosis):');
    for (const d of r.diagnosis) out.push(`  ${JSON.stringify(d)}`);
  }
  if (r.stuckExplained?.length) {
    out.push('', 'why some unfinished jobs are where they are (queue.explain):');
    for (const line of r.stuckExplained) out.push(`  ${line}`);
  }
  if (r.tree.changedDuringRun)
    out.push(
      '',
      'WARNING: files under src/ changed during this run. Worker processes started at different times may',
      'have run different code; a violation may come from that skew. Re-run on a quiet tree to confirm.',
    );
  out.push('', r.passed ? 'PASS: every invariant holds' : 'FAIL: see above');
  // The plain closing line CI reads: one check per invariant.
  const failed = r.checks.filter((c) => !c.ok).length;
  out.push(`chaos: ${r.checks.length - failed} passed, ${failed} failed`, '');
  console.log(out.join('\n'));
}
