/**
 * The verdicts on signals (docs/workflows.md, "Signals"): kind a jobs wait with job.waitForSignal
 * (behaviour.ts), the signaller sends (chaos/signaller.ts). Like features-verdict.ts, each is a pure
 * function of small inputs (the jobs as Redis left them, the sends and their answers, the workers'
 * 'k' lines), so test/unit/chaos-signals-verdict.test.ts shows each one failing on a violating log.
 *
 * What a wait ended with is known three ways: the wait's durable step in Redis (`~signal:<n>`: the
 * truth, while the job's record exists), the completed job's result (`sig`), and every run's 'k' line
 * (a run after the take replays it). Sends to one job go one at a time: one answered delivered was
 * applied before the next was sent, so their order is known; one that rejected may have been applied
 * at any time after it was sent, or never.
 */
import type { SignalResult } from '../src/index.js';
import type { SignalWait, WaitOutcome } from './behaviour.js';
import type { LogLine } from './exec-log.js';

/** A kind a job as Redis left it (absent when retention deleted it). */
export interface SignalJobView {
  id: string;
  s: number;
  state: string;
  finishedAt?: number;
  steps?: Record<string, unknown>;
  result?: { sig?: readonly unknown[] } | null;
  waitingForSignal?: { name: string; deadline?: number };
  pendingSignals?: readonly { name: string; payload: unknown }[];
}

/** A kind a job's add: its waits and the id it was given (every one, accepted or not). */
export interface SignalAddView {
  seq: number;
  id: string;
  waits: readonly SignalWait[];
  /** The add was answered (the job exists, unless retention deleted it). */
  accepted: boolean;
  /** When the add was answered. */
  repliedAt?: number;
}

/** A 'k' line: wait `n` of a run ended (exec-log.ts). */
export type WaitLine = Omit<Extract<LogLine, { t: 'k' }>, 't'>;

/** A send as the verdicts read it (signaller.ts SendRecord). */
export interface SendView {
  sid: number;
  id: string;
  name: string;
  why: string;
  sentAt: number;
  repliedAt?: number;
  answer?: SignalResult;
  error?: string;
}

const t = (ms: number, t0: number) => `+${((ms - t0) / 1_000).toFixed(3)}s`;
const show = (o: WaitOutcome | undefined) =>
  o === undefined ? 'nothing' : o === null ? 'a timeout' : `send #${o}`;

/** What wait `n` stored as its durable step: a sid, -1 (a payload without one), null (timed out), or undefined. */
export function storedOutcome(
  steps: Record<string, unknown> | undefined,
  n: number,
): WaitOutcome | undefined {
  const v = steps?.[`~signal:${n}`] as { timedOut?: boolean; payload?: { sid?: unknown } } | undefined;
  if (v === undefined) return undefined;
  if (v.timedOut) return null;
  return typeof v.payload?.sid === 'number' ? v.payload.sid : -1;
}

/** The deadline wait `n` stored when it was first reached (epoch ms), 0 for none, undefined if unknown. */
export function storedDeadline(steps: Record<string, unknown> | undefined, n: number): number | undefined {
  const v = steps?.[`~wait:${n}`];
  return typeof v === 'number' ? v : undefined;
}

/** Lines per job (`id#s`), each job's in log order. */
function linesPerJob(lines: readonly WaitLine[]): Map<string, WaitLine[]> {
  const out = new Map<string, WaitLine[]>();
  for (const l of lines) {
    const k = `${l.id}#${l.s}`;
    out.set(k, [...(out.get(k) ?? []), l]);
  }
  return out;
}

/**
 * What each wait of a job ended with, by the best evidence: its stored step, else the completed
 * job's result, else the earliest run that logged it (undefined where no wait ended).
 */
export function waitOutcomes(
  add: SignalAddView,
  job: SignalJobView | undefined,
  lines: readonly WaitLine[],
): (WaitOutcome | undefined)[] {
  return add.waits.map((_, n) => {
    const stored = job && job.s === add.seq ? storedOutcome(job.steps, n) : undefined;
    if (stored !== undefined) return stored;
    const r = job?.s === add.seq ? job.result?.sig?.[n] : undefined;
    if (typeof r === 'number' || r === null) return r;
    const first = lines
      .filter((l) => l.n === n && (l.o === 'taken' || l.o === 'timeout'))
      .sort((x, y) => x.at - y.at)[0];
    return first === undefined ? undefined : first.o === 'timeout' ? null : first.sid!;
  });
}

/**
 * Every signal job ends: none is left parked (or anywhere unfinished) after the drain. A job parked
 * for a name with a delivered send of that name it never took is a lost wake-up; one parked without
 * a deadline and no such send was never signalled (the plan always signals it: a harness fault).
 */
export function signalWakeViolations(
  jobs: readonly SignalJobView[],
  sends: readonly SendView[],
  t0: number,
): string[] {
  const out: string[] = [];
  for (const j of jobs) {
    if (j.state === 'completed' || j.state === 'dead') continue;
    const w = j.waitingForSignal;
    const delivered = sends.filter((x) => x.id === j.id && x.answer?.delivered && x.name === w?.name);
    const pending = (j.pendingSignals ?? []).map((p) => `${p.name} ${JSON.stringify(p.payload)}`);
    const why = !w
      ? `${j.state}, not parked`
      : `parked for ${w.name} ${w.deadline === undefined ? 'without deadline' : `until ${t(w.deadline, t0)}`}`;
    out.push(
      `${j.id}: ${why} after the drain; ${delivered.length} sends of ${w?.name ?? 'its signal'} delivered (${delivered.map((x) => `#${x.sid} ${x.answer!.woke ? 'woke' : 'kept'} at ${t(x.repliedAt!, t0)}`).join(', ') || 'none'}); pending: ${pending.join(', ') || 'none'}`,
    );
  }
  return out;
}

/**
 * Each signal is consumed at most once: a send's payload is what one wait of one job took (never two
 * waits, never two jobs), every run that ended a wait saw what the wait stored (a later run replays
 * it; never a second take), the completed job's result carries the same, and a taken payload was
 * sent to that job under that name.
 */
export function signalConsumeViolations(
  adds: readonly SignalAddView[],
  jobs: ReadonlyMap<string, SignalJobView>,
  lines: readonly WaitLine[],
  sends: ReadonlyMap<number, SendView>,
): string[] {
  const out: string[] = [];
  const per = linesPerJob(lines);
  const takers = new Map<number, string>();
  const take = (sid: number, by: string, id: string, name: string) => {
    const prev = takers.get(sid);
    if (prev !== undefined && prev !== by) out.push(`send #${sid} taken by ${prev} and by ${by}`);
    takers.set(sid, by);
    const sent = sends.get(sid);
    if (sent && (sent.id !== id || sent.name !== name))
      out.push(`${by} (signal ${name}) took send #${sid}, which was sent to ${sent.id} as ${sent.name}`);
  };
  for (const add of adds) {
    const job = jobs.get(add.id);
    const own = per.get(`${add.id}#${add.seq}`) ?? [];
    const outcomes = waitOutcomes(add, job, own);
    add.waits.forEach((w, n) => {
      const want = outcomes[n];
      const by = `${add.id} wait ${n}`;
      if (typeof want === 'number' && want >= 0) take(want, by, add.id, w.n);
      for (const l of own) {
        if (l.n !== n || (l.o !== 'taken' && l.o !== 'timeout')) continue;
        const saw: WaitOutcome = l.o === 'timeout' ? null : l.sid!;
        if (saw !== want)
          out.push(
            `${by} (${w.n}) ended with ${show(want)}, but attempt ${l.a} in pid ${l.pid} saw ${show(saw)}`,
          );
      }
      const r = job?.s === add.seq && job.state === 'completed' ? job.result?.sig : undefined;
      if (r && r[n] !== want)
        out.push(
          `${by} (${w.n}) ended with ${show(want)}, but the job's result carries ${JSON.stringify(r[n])}`,
        );
    });
  }
  return out;
}

/** No wait took a payload the signaller never sent (or one without its send number). */
export function signalPayloadViolations(
  adds: readonly SignalAddView[],
  jobs: ReadonlyMap<string, SignalJobView>,
  lines: readonly WaitLine[],
  sends: ReadonlyMap<number, SendView>,
): string[] {
  const out: string[] = [];
  const per = linesPerJob(lines);
  for (const add of adds) {
    const job = jobs.get(add.id);
    const own = per.get(`${add.id}#${add.seq}`) ?? [];
    const seen = new Set<number>(
      own.filter((l) => l.o === 'taken' && l.sid !== undefined).map((l) => l.sid!),
    );
    for (const o of waitOutcomes(add, job, own)) if (typeof o === 'number') seen.add(o);
    for (const sid of seen) {
      if (sid < 0) out.push(`${add.id}: a wait took a payload that carries no send number`);
      else if (!sends.has(sid)) out.push(`${add.id}: a wait took the payload of send #${sid}, never sent`);
    }
  }
  return out;
}

/**
 * Per job and name, waits take signals first in, first out: the payloads the waits of a name took,
 * in wait order, are the sends answered delivered, in send order (a send that rejected may have
 * landed anywhere after it was sent: it may be taken anywhere, or never). So a wait never takes a
 * delivered send while an older delivered one of its name is pending, never takes one answered not
 * delivered, and never times out while a delivered send of its name, answered before its deadline
 * (`toleranceMs`: two clocks of one machine), is pending.
 */
export function signalOrderViolations(
  adds: readonly SignalAddView[],
  jobs: ReadonlyMap<string, SignalJobView>,
  lines: readonly WaitLine[],
  sends: readonly SendView[],
  toleranceMs: number,
  t0: number,
): string[] {
  const out: string[] = [];
  const per = linesPerJob(lines);
  const toJob = new Map<string, SendView[]>();
  for (const x of sends) toJob.set(x.id, [...(toJob.get(x.id) ?? []), x]);
  for (const add of adds) {
    const job = jobs.get(add.id);
    const outcomes = waitOutcomes(add, job, per.get(`${add.id}#${add.seq}`) ?? []);
    const mine = (toJob.get(add.id) ?? []).slice().sort((x, y) => x.sentAt - y.sentAt || x.sid - y.sid);
    for (const name of new Set(add.waits.map((w) => w.n))) {
      const delivered = mine.filter((x) => x.name === name && x.answer?.delivered);
      const byName = new Map(mine.filter((x) => x.name === name).map((x) => [x.sid, x]));
      let next = 0; // the oldest delivered send of this name no wait has taken
      add.waits.forEach((w, n) => {
        if (w.n !== name) return;
        const o = outcomes[n];
        if (o === undefined || o === -1) return;
        if (o === null) {
          const deadline = job?.s === add.seq ? storedDeadline(job.steps, n) : undefined;
          const pending = delivered
            .slice(next)
            .find((x) => deadline && x.repliedAt! < deadline - toleranceMs);
          if (pending)
            out.push(
              `${add.id} wait ${n} (${name}) timed out at its deadline ${t(deadline!, t0)} though send #${pending.sid}, delivered at ${t(pending.repliedAt!, t0)}, was pending`,
            );
          return;
        }
        const sent = byName.get(o);
        if (!sent) return; // another job's or never sent: judged by the other checks
        if (sent.answer && !sent.answer.delivered) {
          out.push(
            `${add.id} wait ${n} (${name}) took send #${o}, answered not delivered (${sent.answer.reason})`,
          );
          return;
        }
        if (!sent.answer) return; // rejected: it may have landed anywhere after it was sent
        const at = delivered.indexOf(sent);
        if (at > next)
          out.push(
            `${add.id} wait ${n} (${name}) took send #${o} (sent at ${t(sent.sentAt, t0)}) while older delivered send #${delivered[next]!.sid} (answered at ${t(delivered[next]!.repliedAt!, t0)}) was pending`,
          );
        else if (at < next)
          out.push(
            `${add.id} wait ${n} (${name}) took send #${o}, which an earlier wait of the job had taken`,
          );
        next = Math.max(next, at + 1);
      });
    }
  }
  return out;
}

/**
 * A wait times out only after its deadline: the first run that logged the timeout ended its call at
 * or after the deadline the wait stored (`~wait:<n>`; for a job retention deleted, at least its
 * timeoutMs after the job's first begin), beyond `toleranceMs`. A wait without timeout never times out.
 */
export function signalTimeoutViolations(
  adds: readonly SignalAddView[],
  jobs: ReadonlyMap<string, SignalJobView>,
  lines: readonly WaitLine[],
  firstBegin: ReadonlyMap<string, number>,
  toleranceMs: number,
  t0: number,
): string[] {
  const out: string[] = [];
  const per = linesPerJob(lines);
  for (const add of adds) {
    const job = jobs.get(add.id);
    const own = per.get(`${add.id}#${add.seq}`) ?? [];
    add.waits.forEach((w, n) => {
      const first = own.filter((l) => l.n === n && l.o === 'timeout').sort((x, y) => x.at - y.at)[0];
      const stored = job?.s === add.seq ? storedOutcome(job.steps, n) : undefined;
      if (!first && stored !== null) return;
      if (w.t === undefined) {
        out.push(`${add.id} wait ${n} (${w.n}) has no timeout, but timed out`);
        return;
      }
      if (!first) return;
      const exact = job?.s === add.seq ? storedDeadline(job.steps, n) : undefined;
      const began = firstBegin.get(`${add.id}#${add.seq}`);
      const deadline = exact ?? (began === undefined ? undefined : began + w.t);
      if (deadline !== undefined && first.at < deadline - toleranceMs)
        out.push(
          `${add.id} wait ${n} (${w.n}, timeout ${w.t} ms) timed out in attempt ${first.a} at ${t(first.at, t0)}, ${deadline - first.at} ms before its deadline ${t(deadline, t0)}${exact === undefined ? ' (at the earliest)' : ''}`,
        );
    });
  }
  return out;
}

/**
 * A signal to a job that has ended answers delivered: false (reason `ended`; `missing` once retention
 * deleted it), and only then: no send answered delivered was sent after the job finished, none
 * answered `ended` before it finished, none answered `missing` while the job existed, and none `full`
 * (no job keeps 1 000 signals). Every send after the drain (`why: 'ended'`) is refused.
 * `deleted`: ids retention deleted as completed.
 */
export function signalEndedViolations(
  sends: readonly SendView[],
  jobs: ReadonlyMap<string, SignalJobView & { createdAt?: number }>,
  adds: ReadonlyMap<string, SignalAddView>,
  deleted: ReadonlySet<string> | null,
  toleranceMs: number,
  t0: number,
): string[] {
  const out: string[] = [];
  for (const x of sends) {
    const a = x.answer;
    if (!a) continue;
    const job = jobs.get(x.id);
    const end = job?.finishedAt;
    const at = `send #${x.sid} (${x.why}) to ${x.id}, sent at ${t(x.sentAt, t0)}`;
    if (a.reason === 'full') out.push(`${at}: refused as full`);
    if (a.delivered && end !== undefined && x.sentAt > end + toleranceMs)
      out.push(`${at}: delivered (${a.state}), but the job had ${job!.state} at ${t(end, t0)}`);
    if (a.reason === 'ended') {
      if (!job && !deleted?.has(x.id)) out.push(`${at}: answered ended, and no such job exists`);
      else if (job && job.state !== 'completed' && job.state !== 'dead')
        out.push(`${at}: answered ended, but the job is ${job.state}`);
      else if (end !== undefined && x.repliedAt! < end - toleranceMs)
        out.push(`${at}: answered ended at ${t(x.repliedAt!, t0)}, before the job ended at ${t(end, t0)}`);
      if (a.state !== 'completed' && a.state !== 'dead')
        out.push(`${at}: answered ended in state ${a.state}`);
    }
    if (a.reason === 'missing') {
      const add = adds.get(x.id);
      const existed = add?.accepted && add.repliedAt !== undefined && add.repliedAt < x.sentAt;
      if (job && (job.createdAt ?? Number.POSITIVE_INFINITY) < x.sentAt - toleranceMs)
        out.push(`${at}: answered missing, but the job exists (${job.state})`);
      else if (!job && existed && !deleted?.has(x.id))
        out.push(`${at}: answered missing for an accepted job retention did not delete`);
    }
    if (x.why === 'ended' && a.delivered) out.push(`${at}: after the drain, answered delivered (${a.state})`);
  }
  return out;
}

/**
 * How many times each signal job parked, at least and at most: every wait that logged a park parked
 * (once: a wait parks at most once under chaos, as nothing wakes a parked job but its signal or its
 * deadline, and both end the wait), and at most every wait did (a park whose reply was lost is not
 * logged). Keyed `id#s`.
 */
export function parkBounds(
  adds: readonly SignalAddView[],
  lines: readonly WaitLine[],
): Map<string, { lo: number; hi: number }> {
  const parked = new Map<string, Set<number>>();
  for (const l of lines) {
    if (l.o !== 'parked') continue;
    const k = `${l.id}#${l.s}`;
    parked.set(k, (parked.get(k) ?? new Set()).add(l.n));
  }
  return new Map(
    adds.map((a) => [
      `${a.id}#${a.seq}`,
      { lo: parked.get(`${a.id}#${a.seq}`)?.size ?? 0, hi: a.waits.length },
    ]),
  );
}
