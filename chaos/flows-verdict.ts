/**
 * The verdicts on flows (docs/workflows.md, "Children"): a kind p parent (behaviour.ts) adds 2 to 4
 * children (chaos/flow-plan.ts: ids `<parent>-c<i>`, in its own queue and the second one) with
 * job.addChildren, then waits for them with job.waitForChildren. Like signals-verdict.ts, each is a
 * pure function of small inputs (the jobs of both queues as Redis left them, the parents' adds with
 * their plans, the workers' 'y', 'b' and ack lines), so test/unit/chaos-flows-verdict.test.ts shows
 * each one failing on a violating log.
 *
 * Times: the workers' lines read Date.now(), a record's createdAt and finishedAt Redis's TIME; all
 * run on one machine and read the same clock (`toleranceMs`: each is floored to the ms).
 */
import type { FlowChild } from './behaviour.js';
import type { LogLine } from './exec-log.js';
import { childId, childKey } from './flow-plan.js';

/** A kind p add: the parent's id and queue, and the children it plans (every add, accepted or not). */
export interface FlowAddView {
  seq: number;
  id: string;
  queue: string;
  children: readonly FlowChild[];
}

/** A job of either queue as Redis left it (a parent, a child or any other job). */
export interface FlowJobView {
  id: string;
  queue: string;
  state: string;
  createdAt: number;
  finishedAt?: number;
  result?: unknown;
  errors: readonly { attempt: number; name: string; message: string }[];
  /** `s`: the chaos sequence number (a child of the parent's queue carries its parent's); `fp`, `ci`: a flow child's parent and index. */
  data: { s?: number; fp?: string; ci?: number };
  children?: readonly { queue: string; id: string; ended?: string }[];
  parent?: { queue: string; id: string };
}

/** Children retention deleted once completed (retention 0): their results and when they ended at the latest known. */
export interface DeletedChild {
  /** The results the events stream recorded for its completions. */
  results: readonly unknown[];
  /** The end of a run that returned (its 'x' line): the completion was recorded after this. */
  endedAfter?: number;
}

/** A 'y' line: a flow parent's job.addChildren or job.waitForChildren call ended (exec-log.ts). */
export type FlowLine = Omit<Extract<LogLine, { t: 'y' }>, 't'>;

/** A begun attempt ('b' line). */
export interface FlowBegin {
  id: string;
  s: number;
  a: number;
  pid: number;
  at: number;
}

/** An outcome Redis acknowledged to a worker ('c' or 'd' line). */
export interface AckLine {
  id: string;
  a: number;
  at: number;
  o: 'c' | 'd';
}

const DEPENDENCY_FAILED = 'DependencyFailedError';
const t = (ms: number, t0: number) => `+${((ms - t0) / 1_000).toFixed(3)}s`;
const ref = (queue: string, id: string) => `${queue}\t${id}`;

/** One planned child of a parent: where it lives, how its result is named, what it does. */
export interface PlannedChild {
  queue: string;
  id: string;
  key: string;
  plan: FlowChild;
}

export function plannedChildren(add: FlowAddView): PlannedChild[] {
  return add.children.map((c, i) => {
    const queue = c.q ?? add.queue;
    const id = childId(add.id, i);
    return { queue, id, key: childKey(add.queue, { queue, id }), plan: c };
  });
}

/** JSON with object keys sorted: two results equal when their texts are. */
export function canonical(v: unknown): string {
  if (v === undefined) return 'undefined';
  return JSON.stringify(v, (_k, x: unknown) =>
    x && typeof x === 'object' && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : x,
  );
}

/** The dead child a DependencyFailedError of a child names (`child job "<key>" is dead`), if any. */
export function deadChildNamed(message: string): string | undefined {
  const m = /child job (".*") is dead/.exec(message);
  if (!m) return undefined;
  try {
    return JSON.parse(m[1]!) as string;
  } catch {
    return undefined;
  }
}

function parentOf(add: FlowAddView, jobs: ReadonlyMap<string, FlowJobView>): FlowJobView | undefined {
  const p = jobs.get(ref(add.queue, add.id));
  return p && p.data.s === add.seq ? p : undefined;
}

/** When a child ended, by the best evidence: its record's finishedAt, else a run of a deleted one. */
function endOf(
  c: PlannedChild,
  jobs: ReadonlyMap<string, FlowJobView>,
  deleted: ReadonlyMap<string, DeletedChild>,
): { ended: 'completed' | 'dead' | null; at?: number } | undefined {
  const j = jobs.get(ref(c.queue, c.id));
  if (j) {
    if (j.state !== 'completed' && j.state !== 'dead') return { ended: null };
    return { ended: j.state, ...(j.finishedAt === undefined ? {} : { at: j.finishedAt }) };
  }
  const d = deleted.get(ref(c.queue, c.id));
  if (d) return { ended: 'completed', ...(d.endedAfter === undefined ? {} : { at: d.endedAfter }) };
  return undefined;
}

/**
 * Every flow ends: the parent completed, with every child ended and none dead that it does not
 * ignore; or it ended dead by a DependencyFailedError naming a planned child it does not ignore that
 * really ended dead (any other death is its kind's, judged with the other jobs); never unfinished.
 * Every planned child that exists ends too.
 */
export function flowEndViolations(
  adds: readonly FlowAddView[],
  jobs: ReadonlyMap<string, FlowJobView>,
  deleted: ReadonlyMap<string, DeletedChild>,
): string[] {
  const out: string[] = [];
  for (const add of adds) {
    const parent = parentOf(add, jobs);
    const children = plannedChildren(add);
    for (const c of children) {
      const e = endOf(c, jobs, deleted);
      if (e && e.ended === null)
        out.push(`${add.id}: child ${c.key} is ${jobs.get(ref(c.queue, c.id))!.state} after the drain`);
    }
    if (!parent) continue; // never written, or lost: the core verdicts judge accepted jobs
    if (parent.state === 'completed') {
      for (const c of children) {
        const e = endOf(c, jobs, deleted);
        if (!e) out.push(`${add.id}: completed, but its child ${c.key} never existed`);
        else if (e.ended === 'dead' && !c.plan.ig)
          out.push(
            `${add.id}: completed, though its child ${c.key} ended dead without ignoreDependencyFailure`,
          );
      }
    } else if (parent.state === 'dead') {
      const last = parent.errors[parent.errors.length - 1];
      if (last?.name !== DEPENDENCY_FAILED) continue;
      const named = deadChildNamed(last.message);
      const c = children.find((x) => x.key === named);
      if (!c)
        out.push(
          `${add.id}: dead by ${DEPENDENCY_FAILED} naming ${named ?? '(no child)'}, not a child it planned`,
        );
      else if (c.plan.ig)
        out.push(`${add.id}: dead by ${DEPENDENCY_FAILED} naming ${c.key}, a child it ignores`);
      else if (endOf(c, jobs, deleted)?.ended !== 'dead')
        out.push(
          `${add.id}: dead by ${DEPENDENCY_FAILED} naming ${c.key}, which is ${jobs.get(ref(c.queue, c.id))?.state ?? 'missing'}`,
        );
    } else out.push(`${add.id}: ${parent.state} after the drain, its flow unfinished`);
  }
  return out;
}

/**
 * No child is created twice, and none exists that its parent did not plan: every job naming a flow
 * parent is a planned child of it (id, queue, index, data, parent link); the parent's record lists
 * exactly its planned children; every addChildren answer names them; a child's record was created
 * no later than the parent's first answer (a child created again after it ended and was deleted would
 * be younger); no child begins after an end Redis acknowledged for it.
 */
export function flowChildOnceViolations(
  adds: readonly FlowAddView[],
  jobs: ReadonlyMap<string, FlowJobView>,
  lines: readonly FlowLine[],
  begins: readonly FlowBegin[],
  acks: readonly AckLine[],
  toleranceMs: number,
  t0: number,
): string[] {
  const out: string[] = [];
  const byId = new Map(adds.map((a) => [a.id, a]));
  for (const j of jobs.values()) {
    if (j.data.fp === undefined) continue;
    const add = byId.get(j.data.fp);
    const c = add ? plannedChildren(add)[j.data.ci ?? -1] : undefined;
    if (!add || !c || c.queue !== j.queue || c.id !== j.id)
      out.push(
        `${j.queue}/${j.id}: names parent ${j.data.fp} (child ${j.data.ci}), which planned no such child`,
      );
    else if (j.queue === add.queue && j.data.s !== add.seq)
      out.push(`${j.id}: a child of ${add.id} (add #${add.seq}) with the data of add #${j.data.s}`);
    else if (j.parent && (j.parent.queue !== add.queue || j.parent.id !== add.id))
      out.push(
        `${j.queue}/${j.id}: planned by ${add.id}, but its record names parent ${j.parent.queue}/${j.parent.id}`,
      );
  }
  const perParent = new Map<string, FlowLine[]>();
  for (const l of lines) perParent.set(`${l.id}#${l.s}`, [...(perParent.get(`${l.id}#${l.s}`) ?? []), l]);
  const ackedEnd = new Map<string, number>();
  for (const a of acks) ackedEnd.set(a.id, Math.min(ackedEnd.get(a.id) ?? Number.POSITIVE_INFINITY, a.at));
  for (const add of adds) {
    const children = plannedChildren(add);
    const want = children.map((c) => `${c.queue}:${c.id}`);
    const parent = parentOf(add, jobs);
    if (parent?.children) {
      const have = parent.children.map((c) => `${c.queue}:${c.id}`);
      if (have.join(' ') !== want.join(' '))
        out.push(
          `${add.id}: its record lists children [${have.join(', ')}], it planned [${want.join(', ')}]`,
        );
    }
    const answers = (perParent.get(`${add.id}#${add.seq}`) ?? []).filter(
      (l) => l.call === 'add' && l.o === 'added',
    );
    for (const l of answers)
      if ((l.refs ?? []).join(' ') !== want.join(' '))
        out.push(
          `${add.id}: addChildren in attempt ${l.a} answered [${(l.refs ?? []).join(', ')}], it planned [${want.join(', ')}]`,
        );
    const first = Math.min(...answers.map((l) => l.at));
    for (const c of children) {
      const j = jobs.get(ref(c.queue, c.id));
      if (j && j.createdAt > first + toleranceMs)
        out.push(
          `${c.queue}/${c.id}: created at ${t(j.createdAt, t0)}, after ${add.id}'s first addChildren answer at ${t(first, t0)}: created again`,
        );
      const end = ackedEnd.get(c.id);
      if (end === undefined) continue;
      const again = begins.find((b) => b.id === c.id && b.at > end + toleranceMs);
      if (again)
        out.push(
          `${c.id}: attempt ${again.a} began at ${t(again.at, t0)}, after an end acknowledged at ${t(end, t0)}: created again`,
        );
    }
  }
  return out;
}

/**
 * No parent run gets past job.waitForChildren before every child ended: a wait that resolved did so
 * after every planned child's end; one that threw DependencyFailedError after the named child's death;
 * and every run started after the parent parked (a later attempt) began after every child's end (the
 * last end releases it), whatever its wait then did. A child's end is its record's finishedAt (Redis TIME), for one retention deleted the end of a
 * run that returned (earlier than its end: a weaker bound).
 */
export function flowResumeViolations(
  adds: readonly FlowAddView[],
  jobs: ReadonlyMap<string, FlowJobView>,
  deleted: ReadonlyMap<string, DeletedChild>,
  lines: readonly FlowLine[],
  begins: readonly FlowBegin[],
  toleranceMs: number,
  t0: number,
): string[] {
  const out: string[] = [];
  const beginsOf = new Map<string, FlowBegin[]>();
  for (const b of begins) beginsOf.set(`${b.id}#${b.s}`, [...(beginsOf.get(`${b.id}#${b.s}`) ?? []), b]);
  for (const add of adds) {
    const own = lines.filter((l) => l.id === add.id && l.s === add.seq && l.call === 'wait');
    if (own.length === 0) continue;
    const children = plannedChildren(add);
    const ends = new Map(children.map((c) => [c.key, endOf(c, jobs, deleted)]));
    // The parent parked in attempt P: every later start (a larger attempt: starts are counted) came
    // after its release, which only the last child's end brings. (A stale run of an earlier attempt,
    // held past its lease, may begin later in time: its waits are fenced.)
    const parks = own.filter((l) => l.o === 'parked');
    const firstPark = parks.sort((x, y) => x.a - y.a)[0];
    if (firstPark)
      for (const b of beginsOf.get(`${add.id}#${add.seq}`) ?? []) {
        if (b.a <= firstPark.a) continue;
        for (const c of children) {
          const e = ends.get(c.key);
          if (e?.at !== undefined && e.at > b.at + toleranceMs)
            out.push(
              `${add.id}: attempt ${b.a} began at ${t(b.at, t0)} after the parent parked in attempt ${firstPark.a}, before its child ${c.key} ended at ${t(e.at, t0)}`,
            );
        }
      }
    for (const l of own) {
      if (l.o === 'resolved') {
        for (const c of children) {
          const e = ends.get(c.key);
          if (!e || e.ended === null)
            out.push(
              `${add.id}: attempt ${l.a} got past waitForChildren at ${t(l.at, t0)}, but its child ${c.key} ${e ? 'never ended' : 'never existed'}`,
            );
          else if (e.at !== undefined && e.at > l.at + toleranceMs)
            out.push(
              `${add.id}: attempt ${l.a} got past waitForChildren at ${t(l.at, t0)}, before its child ${c.key} ended at ${t(e.at, t0)}`,
            );
        }
      } else if (l.o === 'depfail') {
        const c = children.find((x) => x.key === l.child);
        const e = c ? ends.get(c.key) : undefined;
        if (!c || c.plan.ig || e?.ended !== 'dead')
          out.push(
            `${add.id}: attempt ${l.a} threw ${DEPENDENCY_FAILED} naming ${l.child ?? '(none)'}, ${!c ? 'not a planned child' : c.plan.ig ? 'a child it ignores' : `which is ${e?.ended ?? 'missing'}`}`,
          );
        else if (e.at !== undefined && e.at > l.at + toleranceMs)
          out.push(
            `${add.id}: attempt ${l.a} threw ${DEPENDENCY_FAILED} at ${t(l.at, t0)}, before ${c.key} died at ${t(e.at, t0)}`,
          );
      }
    }
  }
  return out;
}

/**
 * The results a parent gets are its children's: every wait that resolved, and a completed parent's
 * result (`fr`), name the planned children and no other job, each with what its completed run
 * returned (as Redis or, for one retention deleted, the events stream kept it); a dead child it
 * ignores has null, or no key (a process sandbox's JSON channel drops an undefined).
 */
export function flowResultViolations(
  adds: readonly FlowAddView[],
  jobs: ReadonlyMap<string, FlowJobView>,
  deleted: ReadonlyMap<string, DeletedChild>,
  lines: readonly FlowLine[],
): string[] {
  const out: string[] = [];
  for (const add of adds) {
    const children = plannedChildren(add);
    const judge = (what: string, res: Record<string, unknown>) => {
      const planned = new Set(children.map((c) => c.key));
      const extra = Object.keys(res).filter((k) => !planned.has(k));
      if (extra.length > 0)
        out.push(`${add.id}: ${what} names [${extra.join(', ')}], none of them its child`);
      for (const c of children) {
        const j = jobs.get(ref(c.queue, c.id));
        const d = deleted.get(ref(c.queue, c.id));
        // A process sandbox's results cross a JSON channel: an undefined result is an absent key there.
        if (!(c.key in res)) {
          if (j?.state !== 'dead')
            out.push(
              `${add.id}: ${what} lacks its child ${c.key} (${j?.state ?? (d ? 'completed' : 'missing')})`,
            );
          continue;
        }
        const got = canonical(res[c.key]);
        if (j?.state === 'dead') {
          if (got !== 'null') out.push(`${add.id}: ${what} gives dead child ${c.key} ${got}, not null`);
        } else if (j?.state === 'completed') {
          if (got !== canonical(j.result))
            out.push(`${add.id}: ${what} gives ${c.key} ${got}, the child returned ${canonical(j.result)}`);
        } else if (d) {
          if (!d.results.some((r) => canonical(r) === got))
            out.push(
              `${add.id}: ${what} gives ${c.key} ${got}, its completions recorded ${d.results.map(canonical).join(', ') || 'no result'}`,
            );
        }
      }
    };
    for (const l of lines)
      if (l.id === add.id && l.s === add.seq && l.call === 'wait' && l.o === 'resolved')
        judge(`the wait of attempt ${l.a}`, l.res ?? {});
    const parent = parentOf(add, jobs);
    if (parent?.state === 'completed') {
      const fr = (parent.result as { fr?: Record<string, unknown> } | undefined)?.fr;
      if (!fr) out.push(`${add.id}: completed without its children's results`);
      else judge('its result', fr);
    }
  }
  return out;
}

/**
 * How many times each flow parent parked, at least and at most (`id#s`): once if a run logged the
 * park, and at most once (after a park the job runs again only when every child has ended, so its
 * next wait resolves; a park whose answer was lost is not logged).
 */
export function flowParkBounds(
  adds: readonly FlowAddView[],
  lines: readonly FlowLine[],
): Map<string, { lo: number; hi: number }> {
  const parked = new Set(
    lines.filter((l) => l.call === 'wait' && l.o === 'parked').map((l) => `${l.id}#${l.s}`),
  );
  return new Map(
    adds.map((a) => [`${a.id}#${a.seq}`, { lo: parked.has(`${a.id}#${a.seq}`) ? 1 : 0, hi: 1 }]),
  );
}
