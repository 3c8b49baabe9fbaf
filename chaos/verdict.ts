/**
 * The invariants. Each check counts violations and keeps a few examples; the run passes only when every
 * check holds. Redis's final state is compared with what the producer was told (accepted adds) and with
 * what the workers logged (executions, acknowledged outcomes), never with Redis alone.
 */
import type { JobAttemptError } from '../src/index.js';
import {
  type ChaosResult,
  expectedErrorName,
  GIVE_UP_AT,
  KIND_NAMES,
  PLANNED_FAILURE_MESSAGE,
  planAttempt,
  STEP_KINDS,
} from './behaviour.js';
import { FINISHED, type Info, type LogEvidence, type RedisSnapshot } from './collect.js';
import type { DuplicateReport } from './duplicates.js';
import type { Execution } from './exec-log.js';
import type { FaultRecord } from './fault-plan.js';
import {
  accountingViolations,
  crossLeftoverViolations,
  crossOrderViolations,
  crossOutcomeViolations,
  crossParentViolations,
  dedupeViolations,
  eventResultViolations,
  expiryViolations,
  fifoViolations,
  type GroupSample,
  keepLastViolations,
  lateCallViolations,
  okRunKey,
  type ParentView,
  parkedViolations,
  stepViolations,
} from './features-verdict.js';
import {
  type DeletedChild,
  type FlowAddView,
  type FlowJobView,
  flowChildOnceViolations,
  flowEndViolations,
  flowParkBounds,
  flowResultViolations,
  flowResumeViolations,
  plannedChildren,
} from './flows-verdict.js';
import { type AddRecord, MAYBE_APPLIED_CODES, type ParentRecord } from './producer.js';
import { flowTargets, type SendRecord } from './signaller.js';
import {
  parkBounds,
  type SignalAddView,
  type SignalJobView,
  signalConsumeViolations,
  signalEndedViolations,
  signalOrderViolations,
  signalPayloadViolations,
  signalTimeoutViolations,
  signalWakeViolations,
} from './signals-verdict.js';

export interface Check {
  name: string;
  rule: string;
  count: number;
  ok: boolean;
  examples: string[];
  /** A known open defect, counted and shown with its examples but not failing the run (docs/guarantees.md). */
  open?: boolean;
}

export interface VerdictInput {
  seed: number;
  /** Start of the chaos phase (epoch ms): times in examples are given relative to it. */
  t0: number;
  accepted: readonly AddRecord[];
  unknown: readonly AddRecord[];
  snapshot: RedisSnapshot;
  /** getJob() of accepted ids that no state lists (null: no record at all). */
  unlisted: ReadonlyMap<string, Info | null>;
  logs: LogEvidence;
  duplicates: DuplicateReport;
  crashes: readonly string[];
  /** When the drain deadline passed with work left: the last counts() seen (else null). */
  notDrained: string | null;
  /** Faults planned and applied, per kind, and the Redis kills the run must include. */
  faultsPlanned: Readonly<Record<string, number>>;
  faultsApplied: Readonly<Record<string, number>>;
  minRedisKills: number;
  /** The faults as applied, to name the ones near a violation in its example. */
  faults: readonly FaultRecord[];
  /**
   * Retention 0 of completed jobs: ids the events stream (or a worker's acknowledged completion) says
   * completed, whose records retention deleted. null when completed jobs are kept.
   */
  completedDeleted: ReadonlySet<string> | null;
  /** Retention 0: the result each `completed` event carried, per job id (null when completed jobs are kept). */
  completedEventResults: ReadonlyMap<string, readonly unknown[]> | null;
  /** Groups held at concurrency 1 for the whole run (their order is judged). */
  fifoGroups: readonly string[];
  /** queue.groups() read every second or so through the chaos and drain phases. */
  groupSamples: readonly GroupSample[];
  backoffMs: number;
  pollIntervalMs: number;
  /** The parents queue (cross-queue dependencies): its accepted adds, its jobs, and what was left. */
  cross: {
    parents: readonly ParentRecord[];
    parentsSnapshot: ReadonlyMap<string, ParentView>;
    parentsIntegrity: readonly string[];
    /** The parents queue's name and its jobs as read (kind p's children in it: chaos/flow-plan.ts). */
    parentsQueue?: string;
    parentsJobs?: ReadonlyMap<string, Info>;
    /** Outbox and link keys still non-empty after the drain (collect.ts CrossLeft). */
    left: readonly { key: string; count: number; members: readonly string[] }[];
  };
  /** Every queue.signal call the signaller made (kind a), with its answer. */
  sends: readonly SendRecord[];
  /** The main queue's name (kind p's children of it name it; the others live in the parents queue). */
  queueName?: string;
}

/** Redis's TIME and Date.now() read the same clock, each floored to the ms. */
export const EARLY_TOLERANCE_MS = 1;
const MAX_EXAMPLES = 8;
const DEPENDENCY_FAILED = 'DependencyFailedError';

class Tally {
  count = 0;
  readonly examples: string[] = [];
  constructor(
    readonly name: string,
    readonly rule: string,
  ) {}
  add(example: string): void {
    this.count++;
    if (this.examples.length < MAX_EXAMPLES) this.examples.push(example);
  }
  check(): Check {
    return {
      name: this.name,
      rule: this.rule,
      count: this.count,
      ok: this.count === 0,
      examples: this.examples,
    };
  }
}

export interface Judgement {
  checks: Check[];
  /** Jobs that should succeed but ended dead because lost leases spent their attempts (allowed). */
  deadByLeaseLoss: number;
  /** A few of them, with their attempt history, so a reader can judge whether each loss was fair. */
  deadByLeaseLossExamples: string[];
  fromUnknownAdds: number;
}

export function judge(v: VerdictInput): Judgement {
  const lost = new Tally('lost', 'accepted jobs that are neither completed nor dead: 0');
  const stuck = new Tally(
    'stuck',
    'jobs still unfinished (waiting, delayed, active...) after the drain deadline: 0',
  );
  const wrong = new Tally(
    'wrong outcome',
    'final state, result and error history as the job kind and log demand: 0',
  );
  const fencing = new Tally(
    'double execution of one attempt',
    'an attempt (its fencing token, one per lease) runs at most once: 0',
  );
  const early = new Tally(
    'early',
    `no attempt starts before its due time (tolerance ${EARLY_TOLERANCE_MS} ms): 0`,
  );
  const acked = new Tally(
    'acknowledged outcome lost',
    'an outcome Redis acknowledged to a worker is final: 0',
  );
  const idents = new Tally('identity', 'every job in Redis comes from an add; an id is created once: 0');
  const integrity = new Tally('integrity', 'each job listed under exactly the state its record has: 0');
  const crashed = new Tally('worker liveness', 'no worker process dies or gives up on its own: 0');
  const coverage = new Tally(
    'fault coverage',
    'every planned fault kind was injected, Redis killed often enough',
  );
  const dups = new Tally(
    'duplicates',
    'every wasted execution explained by a fault, within its bound: 0 unexplained',
  );
  // Also a kill -9 between a claim and its processor's start, a claim reply lost to the network for
  // longer than the lease, or one read too late by a loaded worker, however many times: recovery returns
  // every lease lost unmarked free (recover.lua).
  const unrun = new Tally(
    'killed unrun',
    'no job ends dead without a processor ever having begun one of its attempts: 0',
  );
  const staleApplied = new Tally(
    'stale acks applied',
    'no outcome of an attempt whose lease was lost is applied (result, error or ack of a recovered attempt): 0',
  );
  const untyped = new Tally(
    'untyped refusals',
    'every add that rejects does so with a typed SuretyError (a stable `code`): 0',
  );
  const stalled = new Tally(
    'stalled at maxmemory',
    'work goes on at maxmemory: every oom fault of 1 s or more, begun with jobs waiting or active, sees outcomes recorded: 0',
  );
  const oomRefused = new Tally(
    'worker calls refused at maxmemory',
    'at maxmemory a worker still claims, completes, fails, renews and recovers (no OOM error event): 0',
  );
  const fifo = new Tally(
    'group FIFO',
    `at group concurrency 1 (${v.fifoGroups.join(', ')}) jobs start by due time, and a retry or snooze keeps its place: 0`,
  );
  const parked = new Tally(
    'group parked',
    'no group parked beyond what its limits allow, nor left parked past its time with jobs waiting: 0',
  );
  const stepTwice = new Tally(
    'step run twice',
    "a durable step's body runs again only when the run that ran it never stored its result: 0",
  );
  const expiry = new Tally(
    'expiry',
    'no expiring job starts after its expiry; only a job that never started expires: 0',
  );
  const dedupe = new Tally(
    'dedupe',
    'throttle: one job per key and window; debounce: a started job is never rewritten: 0',
  );
  const keepLast = new Tally(
    'dedupe keep last',
    'keepLastIfActive: a job of a key begins only after the one before it finished; the last add answered before a job began is the data it runs: 0',
  );
  const accounting = new Tally(
    'attempt accounting',
    'every counted start began a processor; budget = starts less snoozes; one error per charged attempt: 0',
  );
  const lateCalls = new Tally(
    'late sandbox calls',
    "a sandboxed job's calls after it returned never land on another job: 0",
  );
  const activeEvents = new Tally(
    'active events',
    "every outcome a worker reported followed that worker's own `active` event for the attempt: 0",
  );
  const eventResults = new Tally(
    'completed event results',
    'retention 0: every `completed` event carries the result a logged run returned: 0',
  );
  const refusedWrote = new Tally(
    'refused adds wrote',
    `an add refused with a typed error (other than ${MAYBE_APPLIED_CODES.join(', ')}) wrote nothing: 0`,
  );

  const sigWake = new Tally(
    'signal wake',
    'every signal job ends: none left parked (or unfinished) after the drain, none with a delivered signal of its name untaken: 0',
  );
  const sigOnce = new Tally(
    'signal consumed once',
    'a send is taken by one wait of the job it was sent to; every run replays what the wait took; the result carries it: 0',
  );
  const sigPayloads = new Tally('signal payloads', 'no wait takes a payload that was never sent: 0');
  const sigOrder = new Tally(
    'signal order',
    "a job's waits take the delivered sends of a name first in, first out, and none times out with one pending: 0",
  );
  const sigTimeout = new Tally(
    'signal timeout',
    `a wait times out only past its deadline (tolerance ${EARLY_TOLERANCE_MS} ms), and only a wait with a timeoutMs: 0`,
  );
  const sigEnded = new Tally(
    'signal to ended job',
    'a send to a job that has ended answers delivered: false (ended, or missing once deleted), and only then: 0',
  );

  const xParents = new Tally(
    'cross-queue parents',
    'every job of the parents queue ends completed or dead (none lost, none stuck): 0',
  );
  const xOrder = new Tally(
    'cross-queue order',
    'a child never begins before every parent of the other queue it names has ended: 0',
  );
  const xOutcome = new Tally(
    'cross-queue outcome',
    'a dead parent ends its child dead by DependencyFailedError (unless ignoreDependencyFailure), and only then: 0',
  );
  const xLeft = new Tally(
    'cross-queue leftovers',
    'no outbox (xnotify) or link (xlinks) entry left in either queue after the drain: 0',
  );

  const flowEnds = new Tally(
    'flow ends',
    "every flow parent completes, or ends dead by a DependencyFailedError naming a child it does not ignore that ended dead (or by its kind's rules); every child ends: 0",
  );
  const flowOnce = new Tally(
    'flow children once',
    'each planned child is created once, with its parent; no job names a parent that did not plan it; every record and answer lists the planned children: 0',
  );
  const flowResume = new Tally(
    'flow resume',
    `no parent run gets past waitForChildren before every child ended, nor begins after its park before then (tolerance ${EARLY_TOLERANCE_MS} ms): 0`,
  );
  const flowResults = new Tally(
    'flow results',
    "the results a parent gets are what its children's completed runs returned (null or absent for a dead child it ignores): 0",
  );

  const { jobs } = v.snapshot;
  const bySeq = new Map<number, AddRecord>();
  for (const a of [...v.accepted, ...v.unknown]) bySeq.set(a.seq, a);

  // lost: every accepted id must be finished.
  for (const id of new Set(v.accepted.map((a) => a.id!))) {
    const job = jobs.get(id) ?? v.unlisted.get(id) ?? null;
    if (!job && v.completedDeleted?.has(id)) continue; // completed, then deleted by retention 0
    if (!job) lost.add(`${id}: ${v.unlisted.has(id) ? 'no record in Redis' : 'listed under no state'}`);
    else if (job.state !== 'completed' && job.state !== 'dead')
      lost.add(
        `${id}: ${job.state} (attempts ${job.attempts})${jobs.has(id) ? '' : ', listed under no state'}`,
      );
  }
  for (const job of jobs.values()) {
    if (!FINISHED.includes(job.state))
      stuck.add(
        `${job.id} (${KIND_NAMES[job.data.k]}): ${job.state}, attempts ${job.attempts}, errors ${job.errors.length}`,
      );
  }

  if (v.notDrained !== null)
    stuck.add(
      `the queue never drained: counts() at the deadline ${v.notDrained} (listed unfinished: ${stuck.count})`,
    );

  const untypedCount = v.unknown.filter(
    (u) => u.code === undefined && u.reason && !u.reason.startsWith('never settled'),
  );
  for (const u of untypedCount)
    untyped.add(`add #${u.seq} (${KIND_NAMES[u.kind]}) rejected without a code: ${u.reason}`);
  const cutOff = cutOffFaults(v.faults);
  for (const f of v.faults) {
    if (f.kind !== 'oom' || !f.backlog || reachableMs(f.at + 200, f.until, cutOff) < 1_000) continue;
    const acks = v.logs.ackTimes.filter((t) => t >= f.at + 200 && t <= f.until).length;
    if (acks === 0)
      stalled.add(
        `oom at +${((f.at - v.t0) / 1_000).toFixed(1)}s for ${f.until - f.at} ms with ${f.backlog} jobs waiting or active: no outcome recorded meanwhile`,
      );
  }

  for (let i = 0; i < v.logs.oomRefusals; i++) oomRefused.add(v.logs.oomExamples[i] ?? '(more of the same)');

  // identity: which add wrote each job, and duplicate-id semantics.
  let fromUnknownAdds = 0;
  for (const job of jobs.values()) {
    if (job.data.fp !== undefined) continue; // a flow child (kind p's): judged by 'flow children once'
    const origin = bySeq.get(job.data.s);
    if (!origin) idents.add(`${job.id}: data seq ${job.data.s} matches no add`);
    else if (origin.isNew === undefined) {
      fromUnknownAdds++;
      if (origin.code !== undefined && !MAYBE_APPLIED_CODES.includes(origin.code))
        refusedWrote.add(
          `${job.id}: written by add #${origin.seq}, which was refused with ${origin.code}: ${origin.reason}`,
        );
    } else if (origin.id !== job.id || (!origin.isNew && origin.dedupe?.mode !== 'debounce'))
      idents.add(
        `${job.id}: written by add #${origin.seq}, which reported id ${origin.id} isNew ${origin.isNew}`,
      );
  }
  const creators = new Map<string, number>();
  for (const a of v.accepted) if (a.isNew) creators.set(a.id!, (creators.get(a.id!) ?? 0) + 1);
  // With retention 0 a completed job is deleted at once, and its id can be created again (documented).
  for (const [id, n] of creators)
    if (n > 1 && !v.completedDeleted) idents.add(`${id}: ${n} adds reported isNew: true`);

  // outcome, result and error history of every finished job.
  let deadByLeaseLoss = 0;
  const deadByLeaseLossExamples: string[] = [];
  // Attempts whose sandbox exited on purpose just after they returned (SandboxError is theirs to have).
  const selfExits = new Set(
    v.logs.executions.filter((e) => e.m === 'exit').map((e) => `${e.id}#${e.s}#${e.a}`),
  );
  // Attempts run in a batch: a sibling that hangs may time them out (their timeout covers the batch).
  const batchRuns = new Set(v.logs.executions.filter((e) => e.bt).map((e) => `${e.id}#${e.s}#${e.a}`));
  // Cross-queue children a dead parent failed never ran: the cross-queue outcome check judges them.
  // An add whose answer was lost may have written its child too (its id is then unknown: its seq names it).
  const crossChildren = new Set(v.accepted.filter((a) => a.xdeps).map((a) => `${a.id}#${a.seq}`));
  const crossSeqs = new Set(v.unknown.filter((a) => a.xdeps).map((a) => a.seq));
  for (const job of jobs.values()) {
    if (job.state !== 'completed' && job.state !== 'dead') continue;
    if (
      job.state === 'dead' &&
      job.errors.at(-1)?.name === DEPENDENCY_FAILED &&
      (crossChildren.has(`${job.id}#${job.data.s}`) || crossSeqs.has(job.data.s))
    )
      continue;
    // A flow parent a dead child failed: judged by 'flow ends' (the child it names must be dead).
    if (job.state === 'dead' && job.data.k === 'p' && job.errors.at(-1)?.name === DEPENDENCY_FAILED) continue;
    const problem = outcomeProblem(v.seed, job, selfExits, batchRuns);
    if (job.state === 'dead' && job.errors[job.errors.length - 1]?.name === EXPIRED) {
      if (job.data.k !== 'e') wrong.add(`${job.id} (${KIND_NAMES[job.data.k]}): expired, but had no expiry`);
      continue; // expiring jobs: judged by the expiry check
    }
    if (job.state === 'dead' && !v.logs.begunJobs.has(`${job.id}#${job.data.s}`)) {
      unrun.add(`${history(job, v.logs.executions, v.t0)}${nearFaults(v.faults, job, v.t0)}`);
      continue;
    }
    if (problem.startsWith('stale:')) {
      staleApplied.add(`${job.id} (${KIND_NAMES[job.data.k]}): ${problem.slice('stale: '.length)}`);
      continue;
    }
    if (problem === 'dead-by-lease-loss') {
      if (deadByLeaseLoss++ < MAX_EXAMPLES)
        deadByLeaseLossExamples.push(history(job, v.logs.executions, v.t0));
    } else if (problem) wrong.add(`${job.id} (${KIND_NAMES[job.data.k]}): ${problem}`);
  }
  const okExecs = new Set<string>();
  const okRuns = new Set<string>();
  const perToken = new Map<string, Execution>();
  for (const e of v.logs.executions) {
    // One attempt is one lease: its fencing token, unique in the queue's history. (The attempt number
    // alone may run twice: a lease lost before its start mark reached Redis returns the job free, and
    // the next run has the same number.) Logs without tokens: (id, seq, attempt, snoozes).
    const key = e.k ? `${e.id}#${e.k}` : `${e.id}#${e.s}#${e.a}#${e.z ?? 0}`;
    const prev = perToken.get(key);
    if (prev)
      fencing.add(
        `${e.id} attempt ${e.a}: ran in pid ${prev.pid} at ${prev.start} and pid ${e.pid} at ${e.start}`,
      );
    perToken.set(key, e);
    // A result names its attempt, snoozes and pid (not its token): the completed jobs' check below.
    if (e.o === 'ok') {
      okExecs.add(`${e.id}#${e.s}#${e.a}#${e.z ?? 0}@${e.pid}`);
      okRuns.add(okRunKey(e.id, e.a, e.z, e.pid));
    }
    if (e.start < e.runAt - EARLY_TOLERANCE_MS)
      early.add(`${e.id} attempt ${e.a}: started ${e.runAt - e.start} ms before its runAt ${e.runAt}`);
    const origin = bySeq.get(e.s);
    if (origin && origin.notBefore > 0 && e.start < origin.notBefore - EARLY_TOLERANCE_MS)
      early.add(
        `${e.id} attempt ${e.a}: started ${origin.notBefore - e.start} ms before it was due (${origin.notBefore})`,
      );
  }
  for (const job of jobs.values()) {
    if (job.state !== 'completed' || !job.result) continue;
    if (!okExecs.has(`${job.id}#${job.data.s}#${job.result.a}#${job.result.z ?? 0}@${job.result.p}`))
      wrong.add(
        `${job.id}: its result (attempt ${job.result.a}, pid ${job.result.p}) matches no logged execution`,
      );
  }

  const recoveredAttempt = (id: string, a: number) =>
    jobs.get(id)?.errors.some((e) => e.attempt === a && e.name === LEASE_EXPIRED) === true;
  for (const [id, a] of v.logs.ackedComplete) {
    const job = jobs.get(id);
    if (!job && v.completedDeleted) continue; // deleted by retention 0 (the id may even be reused)
    if (recoveredAttempt(id, a))
      staleApplied.add(
        `${id}: completion of attempt ${a} acknowledged, but that attempt's lease was recovered`,
      );
    else if (job?.state !== 'completed' || job.attempts !== a)
      acked.add(
        `${id}: completion of attempt ${a} acknowledged, now ${job ? `${job.state} at attempt ${job.attempts}` : 'missing'}`,
      );
  }
  for (const [id, a] of v.logs.ackedDead) {
    const job = jobs.get(id);
    if (recoveredAttempt(id, a))
      staleApplied.add(`${id}: dead at attempt ${a} acknowledged, but that attempt's lease was recovered`);
    else if (job?.state !== 'dead' || job.attempts !== a)
      acked.add(
        `${id}: dead at attempt ${a} acknowledged, now ${job ? `${job.state} at attempt ${job.attempts}` : 'missing'}`,
      );
  }
  for (const p of v.snapshot.integrity) integrity.add(p);
  for (const c of v.crashes) crashed.add(c);
  for (const e of v.duplicates.unexplained)
    dups.add(
      `${e.id} attempt ${e.a} (${e.o}) in pid ${e.pid} at ${e.start}: no fault explains its lost outcome`,
    );
  for (const f of v.duplicates.overCap)
    dups.add(`${f.kind} at ${f.at}: ${f.wasted} wasted executions > bound ${f.cap}`);

  for (const [kind, n] of Object.entries(v.faultsPlanned)) {
    if (n > 0 && !v.faultsApplied[kind]) coverage.add(`${kind}: planned ${n}, none applied`);
  }
  if ((v.faultsApplied.redisKill ?? 0) < v.minRedisKills)
    coverage.add(
      `redisKill: ${v.faultsApplied.redisKill ?? 0} applied, at least ${v.minRedisKills} required`,
    );

  // The features' verdicts (chaos/features-verdict.ts).
  const jobList = [...jobs.values()];
  const snoozeEnds = v.logs.executions
    .filter((e) => e.o === 'snooze' && (jobs.get(e.id)?.snoozes ?? 0) > (e.z ?? 0))
    .map((e) => ({ id: e.id, s: e.s, at: e.end }));
  const parkEnds = v.logs.executions
    .filter((e) => e.o === 'park')
    .map((e) => ({ id: e.id, s: e.s, at: e.end }));
  for (const g of v.fifoGroups)
    for (const x of fifoViolations(g, jobList, bySeq, v.logs.begins, snoozeEnds, v.t0, parkEnds)) fifo.add(x);
  const pastDueMs = v.pollIntervalMs + 2_000;
  for (const x of parkedViolations(v.groupSamples, Math.max(v.backoffMs, 20), pastDueMs, cutOff, v.t0))
    parked.add(x);
  const debounceAdd = (s: number) => bySeq.get(s)?.kind === 'w';
  for (const x of stepViolations(v.logs.stepRuns, v.logs.stepStores, v.t0, v.logs.begins, debounceAdd))
    stepTwice.add(x);
  // A start given in time may reach the processor late when a fault or a stall hits that process.
  const excused = (pid: number, from: number, to: number) =>
    v.faults.some((f) => (f.pid === undefined || f.pid === pid) && f.at <= to && f.until >= from - 1_000);
  for (const x of expiryViolations(jobList, v.logs.begins, EXPIRY_SLACK_MS, excused, v.t0)) expiry.add(x);
  // The unknown adds too: one that wrote (a rejected add may have) holds a key with its own window.
  const allAdds = [...v.accepted, ...v.unknown];
  for (const x of dedupeViolations(jobList, allAdds, v.logs.begins, v.completedDeleted, v.t0)) dedupe.add(x);
  for (const x of keepLastViolations(jobList, v.accepted, v.logs.begins, EARLY_TOLERANCE_MS, v.t0))
    keepLast.add(x);
  for (const x of lateCallViolations(jobList)) lateCalls.add(x);
  for (const x of v.logs.outcomesWithoutActive)
    activeEvents.add(`${x}: reported with no active event before it`);
  // Signals (signals-verdict.ts): kind a's adds, accepted or not (each has its own explicit id).
  const sigAdds: SignalAddView[] = [
    ...v.accepted,
    ...v.unknown,
    ...[...v.accepted, ...v.unknown].flatMap(flowTargets),
  ]
    .filter((a) => a.kind === 'a' && a.id !== undefined && a.waits)
    .map((a) => ({
      seq: a.seq,
      id: a.id!,
      waits: a.waits!,
      accepted: a.isNew !== undefined,
      ...(a.repliedAt === undefined ? {} : { repliedAt: a.repliedAt }),
    }));
  // Flows (flows-verdict.ts): kind p's adds, each with the children it plans.
  const mainName = v.queueName ?? '';
  const flowAdds: FlowAddView[] = [...v.accepted, ...v.unknown]
    .filter((a) => a.kind === 'p' && a.id !== undefined && a.flow)
    .map((a) => ({ seq: a.seq, id: a.id!, queue: mainName, children: a.flow! }));
  const parks = new Map([
    ...parkBounds(sigAdds, v.logs.signalWaits),
    ...flowParkBounds(flowAdds, v.logs.flowCalls),
  ]);
  for (const x of accountingViolations(jobList, v.logs.begins, parks)) accounting.add(x);
  const sigJobs = new Map<string, SignalJobView & { createdAt: number }>();
  for (const j of jobList)
    if (j.data.k === 'a')
      sigJobs.set(j.id, {
        ...j,
        s: j.data.s,
        result: j.result as SignalJobView['result'],
      });
  const sendsBySid = new Map(v.sends.map((x) => [x.sid, x]));
  const firstBegin = new Map<string, number>();
  for (const b of v.logs.begins) {
    const k = `${b.id}#${b.s}`;
    if (!(firstBegin.get(k)! <= b.at)) firstBegin.set(k, b.at);
  }
  for (const x of signalWakeViolations([...sigJobs.values()], v.sends, v.t0)) sigWake.add(x);
  for (const x of signalConsumeViolations(sigAdds, sigJobs, v.logs.signalWaits, sendsBySid)) sigOnce.add(x);
  for (const x of signalPayloadViolations(sigAdds, sigJobs, v.logs.signalWaits, sendsBySid))
    sigPayloads.add(x);
  for (const x of signalOrderViolations(
    sigAdds,
    sigJobs,
    v.logs.signalWaits,
    v.sends,
    EARLY_TOLERANCE_MS,
    v.t0,
  ))
    sigOrder.add(x);
  for (const x of signalTimeoutViolations(
    sigAdds,
    sigJobs,
    v.logs.signalWaits,
    firstBegin,
    EARLY_TOLERANCE_MS,
    v.t0,
  ))
    sigTimeout.add(x);
  const addsById = new Map(sigAdds.map((a) => [a.id, a]));
  for (const x of signalEndedViolations(
    v.sends,
    sigJobs,
    addsById,
    v.completedDeleted,
    EARLY_TOLERANCE_MS,
    v.t0,
  ))
    sigEnded.add(x);
  for (const x of eventResultViolations(v.completedEventResults ?? new Map(), okRuns)) eventResults.add(x);

  // Cross-queue dependencies (features-verdict.ts).
  const children = v.accepted.filter((a) => a.xdeps);
  const parents = v.cross.parentsSnapshot;
  for (const x of crossParentViolations(
    v.cross.parents.map((p) => p.id),
    parents,
  ))
    xParents.add(x);
  for (const p of v.cross.parentsIntegrity) xParents.add(`parents queue: ${p}`);
  for (const x of crossOrderViolations(children, parents, v.logs.begins, EARLY_TOLERANCE_MS, v.t0))
    xOrder.add(x);
  for (const x of crossOutcomeViolations(children, parents, jobs, v.completedDeleted)) xOutcome.add(x);
  for (const x of crossLeftoverViolations(v.cross.left)) xLeft.add(x);

  // Flows (flows-verdict.ts): the jobs of both queues, and the completed children retention deleted.
  const flowJobs = new Map<string, FlowJobView>();
  const view = (queue: string, j: Info): FlowJobView => ({
    id: j.id,
    queue,
    state: j.state,
    createdAt: j.createdAt,
    ...(j.finishedAt === undefined ? {} : { finishedAt: j.finishedAt }),
    result: j.result,
    errors: j.errors,
    data: j.data as FlowJobView['data'],
    ...(j.children ? { children: j.children } : {}),
    ...(j.parent ? { parent: j.parent } : {}),
  });
  for (const j of jobs.values()) flowJobs.set(`${mainName}\t${j.id}`, view(mainName, j));
  const secondName = v.cross.parentsQueue ?? '';
  for (const j of (v.cross.parentsJobs ?? new Map<string, Info>()).values())
    flowJobs.set(`${secondName}\t${j.id}`, view(secondName, j));
  const deletedChildren = new Map<string, DeletedChild>();
  for (const add of flowAdds)
    for (const c of plannedChildren(add)) {
      if (c.queue !== mainName || jobs.has(c.id) || !v.completedDeleted?.has(c.id)) continue;
      const results = v.completedEventResults?.get(c.id) ?? [];
      // The run whose result was recorded returned before the completion: a lower bound of its end.
      const run = v.logs.executions.find(
        (e) =>
          e.id === c.id &&
          e.o === 'ok' &&
          results.some((r) => (r as ChaosResult | undefined)?.a === e.a && (r as ChaosResult).p === e.pid),
      );
      deletedChildren.set(`${c.queue}\t${c.id}`, { results, ...(run ? { endedAfter: run.end } : {}) });
    }
  for (const x of flowEndViolations(flowAdds, flowJobs, deletedChildren)) flowEnds.add(x);
  for (const x of flowChildOnceViolations(
    flowAdds,
    flowJobs,
    v.logs.flowCalls,
    v.logs.begins,
    v.logs.acks,
    EARLY_TOLERANCE_MS,
    v.t0,
  ))
    flowOnce.add(x);
  for (const x of flowResumeViolations(
    flowAdds,
    flowJobs,
    deletedChildren,
    v.logs.flowCalls,
    v.logs.begins,
    EARLY_TOLERANCE_MS,
    v.t0,
  ))
    flowResume.add(x);
  for (const x of flowResultViolations(flowAdds, flowJobs, deletedChildren, v.logs.flowCalls))
    flowResults.add(x);

  const all = [
    lost,
    stuck,
    unrun,
    staleApplied,
    wrong,
    fencing,
    dups,
    early,
    acked,
    idents,
    refusedWrote,
    untyped,
    stalled,
    oomRefused,
    integrity,
    crashed,
    coverage,
    fifo,
    parked,
    stepTwice,
    expiry,
    dedupe,
    keepLast,
    lateCalls,
    accounting,
    activeEvents,
    eventResults,
    sigWake,
    sigOnce,
    sigPayloads,
    sigOrder,
    sigTimeout,
    sigEnded,
    xParents,
    xOrder,
    xOutcome,
    xLeft,
    flowEnds,
    flowOnce,
    flowResume,
    flowResults,
  ];
  const checks = all.map((t) => t.check());
  return { checks, deadByLeaseLoss, deadByLeaseLossExamples, fromUnknownAdds };
}

/** ` (faults near: netBlackhole at +12.3s, ...)`: faults in force within 5 s before the job's last error. */
function nearFaults(faults: readonly FaultRecord[], job: Info, t0: number): string {
  const at = job.errors[job.errors.length - 1]?.at ?? job.finishedAt ?? 0;
  const near = faults
    .filter((f) => f.at <= at && f.until >= at - 5_000 - job.leaseMs)
    .map((f) => `${f.kind} at +${((f.at - t0) / 1_000).toFixed(1)}s${f.pid ? ` (pid ${f.pid})` : ''}`);
  return near.length ? ` (faults near: ${near.join(', ')})` : ' (no fault near)';
}

/** `id (kind): 1 Error ran in pid 123 at +4.1s, 2 LeaseExpiredError never ran, recovered at +9.0s, ...` */
function history(job: Info, executions: readonly Execution[], t0: number): string {
  const ran = new Map<number, Execution>();
  for (const e of executions) if (e.id === job.id && e.s === job.data.s) ran.set(e.a, e);
  const t = (ms: number) => `+${((ms - t0) / 1_000).toFixed(1)}s`;
  const steps = job.errors.map((err) => {
    const e = ran.get(err.attempt);
    const where = e ? `ran in pid ${e.pid} at ${t(e.start)}` : 'never ran';
    return `${err.attempt} ${err.name} ${where}, recorded at ${t(err.at)}`;
  });
  return `${job.id} (${KIND_NAMES[job.data.k]}): ${steps.join('; ')}`;
}

const LEASE_EXPIRED = 'LeaseExpiredError';
const EXPIRED = 'ExpiredError';
/** How late after its expiry an expiring job's first attempt may reach its processor, with no fault near. */
export const EXPIRY_SLACK_MS = 250;

/** What is wrong with a finished job, '' if nothing, or 'dead-by-lease-loss' when lost leases spent its attempts. */
function outcomeProblem(
  seed: number,
  job: Info,
  selfExits: ReadonlySet<string>,
  batchRuns: ReadonlySet<string>,
): string {
  const { attempts, maxAttempts, errors } = job;
  const attemptsSeen = errors.map((e) => e.attempt);
  if (new Set(attemptsSeen).size !== attemptsSeen.length)
    return `stale: two outcomes recorded for one attempt: ${errors.map((e) => `${e.attempt} ${e.name}`).join(', ')}`;
  // attempts counts starts; a snooze, rate limit or park gave its start's budget back and left no error
  // line, so every other start but a completing one left one (docs/guarantees.md "How attempts are
  // counted"). Parks are counted nowhere in the record: read back here, judged by 'attempt accounting'.
  const charged = attempts - job.snoozes - parksOf(job);
  const want = job.state === 'dead' ? charged : charged - 1;
  if (attemptsSeen.length !== want || attemptsSeen.some((a) => a < 1 || a > attempts))
    return `${job.state} at attempt ${attempts} (${job.snoozes} snoozed) with errors for attempts [${attemptsSeen.join(',')}], expected ${want} of 1..${attempts}`;
  for (const e of errors) {
    const bad = errorProblem(seed, job, e, selfExits, batchRuns);
    if (bad) return bad;
  }
  const last = errors[errors.length - 1];
  const kind = job.data.k;
  if (job.state === 'completed') {
    if (kind === 'f' || kind === 'u' || kind === 'g')
      return 'completed, but every attempt of this kind fails';
    if (!job.result || job.result.a !== attempts)
      return `stale: completed at attempt ${attempts} with the result of attempt ${job.result?.a}`;
    if (kind === 'z' || kind === 'w') return stepProblem(job, kind === 'z' ? 'first' : 'charge');
    if (kind === 'a' || kind === 'p') return stepProblem(job, 'before');
    return '';
  }
  // attemptsLeft, not attempts: early lease losses are refunded (recover.lua), so a job may start more
  // attempts than maxAttempts; it ends dead only once its charged attempts reach maxAttempts.
  if (kind === 'f')
    return job.attemptsLeft === 0
      ? ''
      : `dead after ${attempts} of ${maxAttempts} attempts (${job.attemptsLeft} left)`;
  if (kind === 'u' && last?.name === 'UnrecoverableError') return '';
  if (kind === 'g') {
    // Its strategy gave up at the first planned failure from attempt GIVE_UP_AT on: no retry after it.
    const gaveUp = errors.filter((e) => e.name !== LEASE_EXPIRED && e.attempt >= GIVE_UP_AT);
    if (gaveUp.length === 1 && gaveUp[0] === last) return '';
    if (gaveUp.length === 0 && last?.name === LEASE_EXPIRED && job.attemptsLeft === 0)
      return 'dead-by-lease-loss';
    return `custom backoff: dead at attempt ${attempts}/${maxAttempts} with failures at [${gaveUp.map((e) => e.attempt).join(',')}] from attempt ${GIVE_UP_AT} on; the strategy gives up at the first`;
  }
  if (last?.name === LEASE_EXPIRED && job.attemptsLeft === 0) return 'dead-by-lease-loss';
  // A flow parent whose job.addChildren met a fault on its every attempt: its children's adds are
  // refused at maxmemory like any add (RedisFullError), or cut by a lost connection; each error was
  // accepted above as a fault's.
  if (kind === 'p' && job.attemptsLeft === 0 && STEP_FAULT_CODES.includes(last?.code)) return '';
  // Its last attempt ran in a batch that a hanging sibling held past that attempt's timeout.
  if (
    last?.name === 'TimeoutError' &&
    job.attemptsLeft === 0 &&
    batchRuns.has(`${job.id}#${job.data.s}#${last.attempt}`)
  )
    return '';
  return `dead at attempt ${attempts}/${maxAttempts} (${job.attemptsLeft} left) with last error ${last?.name}: ${last?.message}`;
}

/**
 * Kinds a and p: the starts its parks gave back (job.waitForSignal, job.waitForChildren), read back from its budget while some is
 * left, else from its error lines (0 for other kinds).
 */
function parksOf(job: Info): number {
  // A flow parent's DependencyFailedError is its attempt's error (it threw it), charged like any.
  if (job.data.k !== 'a' && job.data.k !== 'p') return 0;
  if (job.attemptsLeft > 0) return job.attempts - job.snoozes - (job.maxAttempts - job.attemptsLeft);
  return Math.max(0, job.attempts - job.snoozes - job.errors.length - (job.state === 'completed' ? 1 : 0));
}

/**
 * Kinds z, w and a: z snoozed once, and the result carries the value of the durable step, which must be
 * the one stored with the job (a stale attempt can never overwrite step state, and a later attempt
 * replays it). (A w job may complete without a recorded sleep: a run that stored its wake time and died
 * before snoozing leaves the next run a sleep already over.)
 */
function stepProblem(job: Info, name: string): string {
  if (job.data.k === 'z' && job.snoozes < 1) return 'completed without its snooze';
  const stored = job.steps?.[name];
  if (stored === undefined) return 'completed with no stored step';
  if (JSON.stringify(stored) !== JSON.stringify(job.result?.step))
    return `stale: its result carries step ${JSON.stringify(job.result?.step)}, the job stored ${JSON.stringify(stored)}`;
  return '';
}

/** Errors job.step may fail an attempt with under faults (kind z): the step's own Redis calls. */
const STEP_FAULT_CODES: readonly (string | undefined)[] = [
  'ERR_CONNECTION',
  'ERR_REDIS_OOM',
  'ERR_LEASE_EXPIRED',
];

/** An error line must be a lost lease, or the failure the plan prescribes for that attempt. */
function errorProblem(
  seed: number,
  job: Info,
  e: JobAttemptError,
  selfExits: ReadonlySet<string>,
  batchRuns: ReadonlySet<string>,
): string {
  if (e.name === LEASE_EXPIRED) return '';
  if (STEP_KINDS.includes(job.data.k) && STEP_FAULT_CODES.includes(e.code)) return '';
  // A sandbox that exits just after its job returned may lose the result on its way: that attempt fails.
  if (e.name === 'SandboxError' && selfExits.has(`${job.id}#${job.data.s}#${e.attempt}`)) return '';
  if (e.name === 'TimeoutError' && batchRuns.has(`${job.id}#${job.data.s}#${e.attempt}`)) return '';
  const planned = planAttempt(seed, job.data, e.attempt, job.maxAttempts).outcome;
  const want = expectedErrorName(planned);
  // An odd throw may be recorded under any name: what matters is that the attempt failed and says so.
  if (want === null) return '';
  const planMessage = planned === 'fail' || planned === 'unrec';
  if (want === e.name && (!planMessage || e.message.startsWith(PLANNED_FAILURE_MESSAGE))) return '';
  return `attempt ${e.attempt} recorded ${e.name}: ${e.message}, but its planned outcome was ${planned}`;
}

/** Milliseconds of [from, to] outside every interval of `faults` (their at .. until). */
/**
 * Faults that cut every worker off Redis (Redis down, resets or a black hole of all workers, in either
 * direction): no outcome can be recorded while one is in force, whatever maxmemory allows.
 */
export function cutOffFaults<F extends Pick<FaultRecord, 'kind' | 'everyWorker'>>(faults: readonly F[]): F[] {
  return faults.filter((g) => g.kind === 'redisKill' || g.everyWorker === true);
}

export function reachableMs(
  from: number,
  to: number,
  faults: readonly { at: number; until: number }[],
): number {
  let covered = 0;
  let end = from;
  for (const g of [...faults].sort((a, b) => a.at - b.at)) {
    const start = Math.max(g.at, end);
    const stop = Math.min(g.until, to);
    if (stop > start) {
      covered += stop - start;
      end = stop;
    }
  }
  return Math.max(0, to - from - covered);
}
