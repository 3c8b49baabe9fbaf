/**
 * Gathers the evidence for the verdict: every job Redis holds, read through Surety's admin API
 * (getJobs per state, counts, getJob), and every line of the workers' execution logs.
 */
import type { JobInfo, JobState, Queue } from '../src/index.js';
import type { ChaosResult, JobData } from './behaviour.js';
import { type Execution, type LogLine, readExecLog } from './exec-log.js';
import type { Begin, StepLine } from './features-verdict.js';
import type { FlowLine } from './flows-verdict.js';
import type { WaitLine } from './signals-verdict.js';

export type Info = JobInfo<JobData, ChaosResult>;

export interface RedisSnapshot {
  jobs: Map<string, Info>;
  /** Jobs listed per state; the states are whatever queue.counts() reports (Surety's own list). */
  byState: Record<string, number>;
  /**
   * Integrity problems: a job listed under a state its record does not have, or under two states, or
   * counts() disagreeing with the listing. Only checked on an idle queue (jobs move while we page).
   */
  integrity: string[];
}

/** A cross-queue outbox (`xnotify`) or links (`xlinks`) key left non-empty: its size and first members. */
export interface CrossLeft {
  key: string;
  count: number;
  members: string[];
}

/** Every state but these is unfinished work. */
export const FINISHED: readonly string[] = ['completed', 'dead'];
const PAGE = 10_000;

/** Jobs not finished yet, from counts() (every state Surety has other than completed and dead). */
export function unfinished(counts: object): number {
  let n = 0;
  for (const [state, count] of Object.entries(counts)) if (!FINISHED.includes(state)) n += count as number;
  return n;
}

export async function snapshotRedis(
  queue: Queue<JobData, ChaosResult>,
  idle: boolean,
): Promise<RedisSnapshot> {
  const jobs = new Map<string, Info>();
  const counts = (await queue.counts()) as unknown as Record<string, number>;
  const states = Object.keys(counts) as JobState[];
  const byState: Record<string, number> = {};
  const integrity: string[] = [];
  for (const state of states) {
    byState[state] = 0;
    for (let offset = 0; ; offset += PAGE) {
      const page = await queue.getJobs(state, { offset, limit: PAGE });
      for (const info of page) {
        byState[state]++;
        if (idle && info.state !== state)
          integrity.push(`job ${info.id} is listed as ${state} but its record says ${info.state}`);
        const prev = jobs.get(info.id);
        if (prev && idle)
          integrity.push(`job ${info.id} is listed under two states: ${prev.state} and ${state}`);
        if (!prev) jobs.set(info.id, info);
      }
      if (page.length < PAGE) break;
    }
  }
  for (const state of states) {
    if (idle && counts[state] !== byState[state])
      integrity.push(`counts().${state} = ${counts[state]} but getJobs listed ${byState[state]}`);
  }
  if (idle && unfinished(counts) === 0) {
    // Nothing waiting or active: every group's bookkeeping must be back to nothing. A slot count left
    // behind by some path would hold that group back forever.
    for (const g of (await queue.groups({ limit: 100 })).groups)
      integrity.push(
        `group ${g.group} still counts ${g.waiting} waiting and ${g.active} active with no job left`,
      );
  }
  return { jobs, byState, integrity };
}

/** A job the accepted adds name but no state lists: is its record there at all? */
export async function lookupUnlisted(
  queue: Queue<JobData, ChaosResult>,
  ids: readonly string[],
): Promise<Map<string, Info | null>> {
  const out = new Map<string, Info | null>();
  for (const id of ids.slice(0, 1_000)) out.set(id, await queue.getJob(id));
  return out;
}

/** Why a few unfinished jobs are where they are (queue.explain), for a run that did not drain. */
export async function explainStuck(
  queue: Queue<JobData, ChaosResult>,
  snapshot: RedisSnapshot,
  max = 6,
): Promise<string[]> {
  // Active ones first: a job held active is what most often holds the others back (a group slot).
  const stuck = [...snapshot.jobs.values()]
    .filter((j) => !FINISHED.includes(j.state))
    .sort((a, b) => Number(b.state === 'active') - Number(a.state === 'active'))
    .slice(0, max);
  const out: string[] = [];
  for (const job of stuck) {
    const why = await queue.explain(job.id).catch((err: Error) => ({ error: err.message }));
    out.push(`${job.id} (data ${JSON.stringify(job.data)}): ${JSON.stringify(why)}`);
  }
  return out;
}

export interface LogEvidence {
  executions: Execution[];
  /** Every begun attempt ('b' lines). */
  begins: Begin[];
  /** Durable step bodies run ('p') and stores confirmed ('q'). */
  stepRuns: StepLine[];
  stepStores: StepLine[];
  /** Kind a's job.waitForSignal calls that ended ('k'). */
  signalWaits: WaitLine[];
  /** Kind p's job.addChildren and job.waitForChildren calls that ended ('y'). */
  flowCalls: FlowLine[];
  /** Outcomes Redis acknowledged to a worker ('c' completed, 'd' dead), with when they arrived. */
  acks: { id: string; a: number; at: number; o: 'c' | 'd' }[];
  /** `${id}#${seq}` of jobs with an attempt begun on a processor ('b' lines), `${id}#${seq}#${attempt}` begun. */
  begunJobs: Set<string>;
  begunAttempts: Set<string>;
  /** `${id}#${attempt}` of completions/dead failures Redis acknowledged to a worker. */
  ackedComplete: Map<string, number>;
  ackedDead: Map<string, number>;
  /** Worker `active` events ('v' lines). */
  activeEvents: number;
  /**
   * Outcomes a worker reported ('c', 'd') with no `active` event of its own before them for that
   * attempt (`id#attempt in log file`): each must have one, sandboxed or not.
   */
  outcomesWithoutActive: string[];
  /** When each acknowledged outcome arrived (epoch ms, worker clock), to see progress during a fault. */
  ackTimes: number[];
  staleRefusals: number;
  leaseLostEvents: number;
  errorCodes: Record<string, number>;
  /** Event-loop stalls the workers measured ('g' lines). */
  stalls: { pid: number; from: number; to: number }[];
  /** Worker `error` events that were Redis refusing a call at maxmemory (OOM), a few kept. */
  oomRefusals: number;
  oomExamples: string[];
  tornLines: number;
}

export function readLogs(paths: readonly string[]): LogEvidence {
  const ev: LogEvidence = {
    executions: [],
    begins: [],
    stepRuns: [],
    stepStores: [],
    signalWaits: [],
    flowCalls: [],
    acks: [],
    begunJobs: new Set(),
    begunAttempts: new Set(),
    ackedComplete: new Map(),
    ackedDead: new Map(),
    activeEvents: 0,
    outcomesWithoutActive: [],
    ackTimes: [],
    staleRefusals: 0,
    leaseLostEvents: 0,
    errorCodes: {},
    stalls: [],
    oomRefusals: 0,
    oomExamples: [],
    tornLines: 0,
  };
  for (const path of paths) {
    const { lines, torn } = readExecLog(path);
    ev.tornLines += torn;
    const active = new Set<string>();
    for (const line of lines) {
      if (line.t === 'v') active.add(`${line.id}#${line.a}`);
      else if ((line.t === 'c' || line.t === 'd') && !active.has(`${line.id}#${line.a}`))
        ev.outcomesWithoutActive.push(`${line.id}#${line.a} in ${path}`);
      absorb(ev, line);
    }
  }
  return ev;
}

function absorb(ev: LogEvidence, line: LogLine): void {
  switch (line.t) {
    case 'b':
      ev.begunJobs.add(`${line.id}#${line.s}`);
      ev.begunAttempts.add(`${line.id}#${line.s}#${line.a}`);
      ev.begins.push({
        id: line.id,
        s: line.s,
        a: line.a,
        pid: line.pid,
        at: line.at,
        ...(line.z === undefined ? {} : { z: line.z }),
      });
      break;
    case 'v':
      ev.activeEvents++;
      break;
    case 'p':
      ev.stepRuns.push(line);
      break;
    case 'q':
      ev.stepStores.push(line);
      break;
    case 'k':
      ev.signalWaits.push(line);
      break;
    case 'y':
      ev.flowCalls.push(line);
      break;
    case 'x':
      ev.executions.push(line);
      break;
    case 'c':
      ev.ackedComplete.set(line.id, Math.max(line.a, ev.ackedComplete.get(line.id) ?? 0));
      ev.ackTimes.push(line.at);
      ev.acks.push({ id: line.id, a: line.a, at: line.at, o: 'c' });
      break;
    case 'd':
      ev.ackedDead.set(line.id, Math.max(line.a, ev.ackedDead.get(line.id) ?? 0));
      ev.ackTimes.push(line.at);
      ev.acks.push({ id: line.id, a: line.a, at: line.at, o: 'd' });
      break;
    case 's':
      ev.staleRefusals++;
      break;
    case 'l':
      ev.leaseLostEvents += line.ids.length;
      break;
    case 'g':
      ev.stalls.push({ pid: line.pid, from: line.from, to: line.to });
      break;
    case 'e':
      ev.errorCodes[line.code] = (ev.errorCodes[line.code] ?? 0) + 1;
      if (line.msg.includes('OOM')) {
        ev.oomRefusals++;
        if (ev.oomExamples.length < 8) ev.oomExamples.push(`${line.code}: ${line.msg}`);
      }
      break;
  }
}

/**
 * Every job the queue's events stream says completed, with the result each `completed` event carried
 * (undefined where none; an id completes more than once when retention 0 lets an add reuse it): with
 * retention 0 the completed record is deleted in the same script that writes this event, so the event
 * is Redis's own record of the outcome and of the result. (Read page by page with XRANGE on the key
 * keys.ts derives: the public events() reader blocks for new entries and has no "up to now". The entry
 * format: docs/events.md.)
 */
export async function completedFromEvents(
  queue: Queue<JobData, ChaosResult>,
): Promise<Map<string, (ChaosResult | undefined)[]>> {
  const done = new Map<string, (ChaosResult | undefined)[]>();
  const stream = queue.keys.events;
  let from = '-';
  for (;;) {
    const page = (await queue.client.xrange(stream, from, '+', 'COUNT', 5_000)) as [string, string[]][];
    for (const [, fields] of page) {
      const f = new Map<string, string>();
      for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i]!, fields[i + 1]!);
      if (f.get('event') !== 'completed') continue;
      const ids = (f.get('ids') ?? '').split('\n');
      const results = f.get('results')?.split('\n');
      ids.forEach((id, i) => {
        const result = results?.[i] ? (JSON.parse(results[i]!) as ChaosResult) : undefined;
        done.set(id, [...(done.get(id) ?? []), result]);
      });
    }
    if (page.length < 5_000) return done;
    from = `(${page[page.length - 1]![0]}`;
  }
}
