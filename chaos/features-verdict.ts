/**
 * The verdicts on the features the chaos workload added after the core (verdict.ts): per-group FIFO
 * at concurrency 1, parked groups, durable steps, expiring jobs, dedupe, late sandbox calls, and the
 * results `completed` events carry. Each
 * is a pure function of small inputs (jobs as Redis left them, the adds, the workers' log lines, group
 * samples), so test/unit/chaos-verdict.test.ts shows each one failing on a violating log.
 *
 * Times: the workers' logs, the producer and the samples read Date.now(), Redis's records its own
 * TIME; all run on one machine and read the same clock (verdict.ts EARLY_TOLERANCE_MS).
 */
import type { JobAttemptError } from '../src/index.js';

/** A begun attempt ('b' line). */
export interface Begin {
  id: string;
  s: number;
  a: number;
  z?: number;
  pid: number;
  at: number;
}

/**
 * The begins Redis may have recorded as starts. A begin followed later by another of the same job with
 * the same attempt and snooze count never had its start recorded: its lease was lost (or its worker
 * killed) before the start mark landed, and the job went back free (docs/guarantees.md, "How attempts
 * are counted"). For Redis that job never started, so a debounce add may rightly rewrite it before its
 * next run: the dedupe verdicts judge starts Redis knew of, not those runs.
 */
export function recordedBegins(begins: readonly Begin[]): Begin[] {
  const last = new Map<string, number>();
  for (const b of begins) {
    const k = `${b.id}#${b.a}#${b.z ?? 0}`;
    last.set(k, Math.max(last.get(k) ?? Number.NEGATIVE_INFINITY, b.at));
  }
  return begins.filter((b) => b.at >= last.get(`${b.id}#${b.a}#${b.z ?? 0}`)!);
}

/** The jobs of kind `kind` per dedupe key, each key's in creation order. */
function jobsPerKey(jobs: readonly JobView[], kind: string): Map<string, JobView[]> {
  const perKey = new Map<string, JobView[]>();
  for (const j of jobs) {
    if (j.data.k !== kind || j.data.dk === undefined) continue;
    perKey.set(j.data.dk, [...(perKey.get(j.data.dk) ?? []), j]);
  }
  for (const list of perKey.values()) list.sort((x, y) => x.createdAt - y.createdAt);
  return perKey;
}

/** What these verdicts read of a job in Redis. */
export interface JobView {
  id: string;
  state: string;
  data: { s: number; k: string; dk?: string; late?: string };
  group?: string;
  createdAt: number;
  finishedAt?: number;
  expireAt?: number;
  snoozes: number;
  errors: readonly Pick<JobAttemptError, 'attempt' | 'name' | 'at'>[];
  steps?: Record<string, unknown>;
}

/** What these verdicts read of an add. */
export interface AddView {
  seq: number;
  id?: string;
  isNew?: boolean;
  state?: string;
  sentAt?: number;
  delayMs?: number;
  runAt?: number;
  dedupe?: { key: string; mode: 'throttle' | 'debounce'; ttlMs?: number; keepLastIfActive?: true };
  /** When the add's promise resolved (accepted adds). */
  repliedAt?: number;
}

const LEASE_EXPIRED = 'LeaseExpiredError';
const EXPIRED = 'ExpiredError';
const DEPENDENCY_FAILED = 'DependencyFailedError';
/** The message of the DependencyFailedError job.waitForChildren throws (src/errors.ts). */
const CHILD_DEAD = /: child job ".*" is dead$/;
const t = (ms: number, t0: number) => `+${((ms - t0) / 1_000).toFixed(3)}s`;
const jobKey = (id: string, s: number) => `${id}#${s}`;

/** Earliest begin per job (id#s). */
function firstBegins(begins: readonly Begin[]): Map<string, number> {
  const first = new Map<string, number>();
  for (const b of begins) {
    const k = jobKey(b.id, b.s);
    const prev = first.get(k);
    if (prev === undefined || b.at < prev) first.set(k, b.at);
  }
  return first;
}

/**
 * Per-group FIFO at group concurrency 1 (docs/groups.md "Limits"): jobs of `group` start in the order
 * they became due (due time, then insertion order: ties in due time are not judged), and a job that
 * fails and retries, or snoozes, keeps its place: no other job of the group begins between that
 * outcome being recorded and the job's next begin.
 *
 * `snoozes`: when each recorded snooze of a job ended its run (the 'x' line of an execution whose
 * snooze Redis counted). `parks`: when a run parked its job (job.waitForSignal, job.waitForChildren):
 * a later run of that job is a resume, which does not keep the group's place and goes first in its
 * group when woken (docs/workflows.md), so it is no cut in front of a retry.
 */
export function fifoViolations(
  group: string,
  jobs: readonly JobView[],
  adds: ReadonlyMap<number, AddView>,
  begins: readonly Begin[],
  snoozes: readonly { id: string; s: number; at: number }[],
  t0: number,
  parks: readonly { id: string; s: number; at: number }[] = [],
): string[] {
  const out: string[] = [];
  const firstPark = new Map<string, number>();
  for (const p of parks)
    firstPark.set(jobKey(p.id, p.s), Math.min(firstPark.get(jobKey(p.id, p.s)) ?? p.at, p.at));
  const resumes = (b: Begin) => b.at > (firstPark.get(jobKey(b.id, b.s)) ?? Number.POSITIVE_INFINITY);
  const members = jobs.filter((j) => j.group === group);
  const inGroup = new Set(members.map((j) => jobKey(j.id, j.data.s)));
  const first = firstBegins(begins.filter((b) => inGroup.has(jobKey(b.id, b.s))));
  const due = (j: JobView) => {
    const add = adds.get(j.data.s);
    if (add?.delayMs !== undefined) return j.createdAt + add.delayMs;
    if (add?.runAt !== undefined) return Math.max(j.createdAt, add.runAt);
    return j.createdAt;
  };
  const order = members
    .filter((j) => first.has(jobKey(j.id, j.data.s)))
    .map((j) => ({ j, due: due(j), begun: first.get(jobKey(j.id, j.data.s))! }))
    .sort((x, y) => x.begun - y.begun || x.due - y.due);
  let latest: (typeof order)[number] | null = null;
  for (const o of order) {
    if (latest && o.due < latest.due && o.begun > latest.begun)
      out.push(
        `${group}: ${o.j.id} (due ${t(o.due, t0)}) began at ${t(o.begun, t0)}, after ${latest.j.id} (due later, ${t(latest.due, t0)}) began at ${t(latest.begun, t0)}`,
      );
    if (!latest || o.due > latest.due) latest = o;
  }
  // Retries and snoozes keep the job's place.
  const groupBegins = begins.filter((b) => inGroup.has(jobKey(b.id, b.s))).sort((x, y) => x.at - y.at);
  for (const j of members) {
    const own = groupBegins.filter((b) => b.id === j.id && b.s === j.data.s);
    const last = j.errors[j.errors.length - 1];
    const held = [
      ...j.errors
        .filter((e) => e.name !== LEASE_EXPIRED && !(j.state === 'dead' && e === last))
        .map((e) => ({ at: e.at, what: `attempt ${e.attempt} failed` })),
      ...snoozes
        .filter((z) => z.id === j.id && z.s === j.data.s)
        .map((z) => ({ at: z.at, what: 'a run snoozed' })),
    ];
    for (const h of held) {
      const next = own.find((b) => b.at > h.at);
      if (!next) continue;
      const cut = groupBegins.find(
        (b) => (b.id !== j.id || b.s !== j.data.s) && b.at > h.at && b.at < next.at && !resumes(b),
      );
      if (cut)
        out.push(
          `${group}: ${j.id} ${h.what} at ${t(h.at, t0)} and ran again at ${t(next.at, t0)}, but ${cut.id} began in between (${t(cut.at, t0)})`,
        );
    }
  }
  return out;
}

/** One read of queue.groups() during the run. */
export interface GroupSample {
  /** Date.now() just before and after the read. */
  at: number;
  done: number;
  groups: {
    group: string;
    waiting: number;
    limits: { concurrency: number | null; rateLimit: { max: number; durationMs: number } | null };
    parkedUntil?: number;
  }[];
}

/** A rate limit whose window the chaos workload can never fill (a group starts a few jobs a second). */
export const UNFILLABLE_RATE = 1_000;
/** Slack on top of what a park can last: a hold behind a retry (backoff) or a rate window. */
export const PARK_SLACK_MS = 1_000;

/**
 * No group is parked for longer than a reason in force allows, and none stays parked past its time:
 * - parked until later than its rate window (or, with no rate limit it could fill, later than a hold
 *   behind a retry could last: `holdMs`, the backoff) allows, from the moment of the sample: every
 *   change that frees a group must wake it (a limit removed or raised);
 * - parked with its time `pastDueMs` or more in the past while it has waiting jobs, with workers able
 *   to reach Redis all along (`cutOff`: faults that cut every worker off).
 */
export function parkedViolations(
  samples: readonly GroupSample[],
  holdMs: number,
  pastDueMs: number,
  cutOff: readonly { at: number; until: number }[],
  t0: number,
): string[] {
  const out: string[] = [];
  for (const sample of samples) {
    for (const g of sample.groups) {
      if (g.parkedUntil === undefined) continue;
      const rate = g.limits.rateLimit;
      const fillable = rate !== null && rate.max < UNFILLABLE_RATE;
      const allowed = fillable ? rate.durationMs : holdMs;
      if (g.parkedUntil > sample.done + allowed + PARK_SLACK_MS)
        out.push(
          `${g.group} at ${t(sample.at, t0)}: parked until ${t(g.parkedUntil, t0)}, ${g.parkedUntil - sample.done} ms ahead, with limits ${JSON.stringify(g.limits)} (at most ${allowed} ms)`,
        );
      const late = sample.at - g.parkedUntil;
      const blocked = cutOff.some((f) => f.at <= sample.at && f.until >= g.parkedUntil!);
      if (g.waiting > 0 && late >= pastDueMs && !blocked)
        out.push(
          `${g.group} at ${t(sample.at, t0)}: parked until ${t(g.parkedUntil, t0)}, ${late} ms past due, with ${g.waiting} waiting`,
        );
    }
  }
  return out;
}

/** A step body's run ('p') or a confirmed store ('q'). */
export interface StepLine {
  id: string;
  s: number;
  a: number;
  z: number;
  name: string;
  pid: number;
  at: number;
}

/**
 * A durable step's body runs at most once per job, unless the run that ran it never stored it (its
 * attempt lost its lease, its process died, or its write failed): once job.step has returned after
 * storing a result, no run that began after it may run the body again (an attempt reads the stored
 * steps once, after it begins: one that began before the store, such as a stale attempt whose lease
 * was lost and whose write the fence then refuses, may still run the body). Keyed by job id (the step
 * kinds have ids Redis generates), so a job rewritten under its id (a debounce add) still counts as
 * the same job.
 */
export function stepViolations(
  runs: readonly StepLine[],
  stores: readonly StepLine[],
  t0: number,
  /** When each run began ('b' lines): a run's body counts only if the run began after the store. */
  begins: readonly Begin[],
  /**
   * Whether the add numbered `s` may have rewritten a job made by another add (a debounce add): then
   * runs of that id's steps are one job's. Otherwise two adds under one id are two jobs (a generated id
   * handed out again after Redis restarted from an AOF that missed the counter's last increments).
   */
  rewrites: (s: number) => boolean = () => true,
): string[] {
  const out: string[] = [];
  const began = new Map<string, number[]>();
  for (const b of begins) {
    const k = `${b.id}\t${b.s}\t${b.a}\t${b.pid}`;
    began.set(k, [...(began.get(k) ?? []), b.at]);
  }
  /** When the run that ran `p` began: the latest begin of its attempt in its process before `p`. */
  const beganAt = (p: StepLine) =>
    Math.max(...(began.get(`${p.id}\t${p.s}\t${p.a}\t${p.pid}`) ?? [p.at]).filter((at) => at <= p.at), 0);
  const firstStore = new Map<string, StepLine>();
  for (const q of stores) {
    const k = `${q.id}\t${q.name}`;
    const prev = firstStore.get(k);
    if (!prev || q.at < prev.at) firstStore.set(k, q);
  }
  for (const p of runs) {
    const q = firstStore.get(`${p.id}\t${p.name}`);
    if (!q || p.at <= q.at || (p.a === q.a && p.z === q.z && p.pid === q.pid)) continue;
    if (p.s !== q.s && !rewrites(p.s) && !rewrites(q.s)) continue; // another job under a reused id
    if (beganAt(p) < q.at) continue; // it read the steps before the store
    out.push(
      `${p.id} step ${p.name}: stored by attempt ${q.a} (snoozes ${q.z}) at ${t(q.at, t0)}, ran again in attempt ${p.a} (snoozes ${p.z}, data #${p.s}) at ${t(p.at, t0)}`,
    );
  }
  return out;
}

/**
 * Expiring jobs (docs/job-control.md "Expiry"): none begins its first attempt after its expiry (beyond
 * `slackMs`, unless `excused` says a fault or stall of that process delayed the start it was given in
 * time), and only a job that never started ends dead by ExpiredError: one with a snooze or a failed
 * attempt recorded had started, and runs to its end.
 */
export function expiryViolations(
  jobs: readonly JobView[],
  begins: readonly Begin[],
  slackMs: number,
  excused: (pid: number, from: number, to: number) => boolean,
  t0: number,
): string[] {
  const out: string[] = [];
  const first = new Map<string, Begin>();
  for (const b of begins) {
    const k = jobKey(b.id, b.s);
    const prev = first.get(k);
    if (!prev || b.at < prev.at) first.set(k, b);
  }
  for (const j of jobs) {
    if (j.expireAt === undefined) continue;
    const b = first.get(jobKey(j.id, j.data.s));
    if (b && b.at > j.expireAt + slackMs && !excused(b.pid, j.expireAt, b.at))
      out.push(
        `${j.id}: expires at ${t(j.expireAt, t0)}, its first attempt began at ${t(b.at, t0)} (pid ${b.pid}), ${b.at - j.expireAt} ms after`,
      );
    const last = j.errors[j.errors.length - 1];
    if (j.state !== 'dead' || last?.name !== EXPIRED) continue;
    const started = j.errors.filter((e) => e.name !== EXPIRED && e.name !== LEASE_EXPIRED);
    if (j.snoozes > 0 || started.length > 0)
      out.push(
        `${j.id}: ended dead by ExpiredError after it had started (${j.snoozes} snoozes, errors ${started.map((e) => `${e.attempt} ${e.name}`).join(', ') || 'none'})`,
      );
  }
  return out;
}

/**
 * Dedupe (docs/groups.md "Dedupe"). Throttle: a key's next job is created only once its holder has
 * finished, or, with a ttlMs, once the holder's window (ttlMs from its add) is over; an add that
 * enqueued nothing names a job of its key that still held it when the add was sent; and an answer
 * `completed` names a job that completed. Debounce: a job that began is never rewritten (every begin
 * runs the same data), and no add answers with a job that had begun before the add was sent.
 * `deleted`: ids retention deleted as completed (their records are gone). Begins are those Redis may
 * have recorded (recordedBegins): a run whose start mark never landed left the job unstarted.
 */
export function dedupeViolations(
  jobs: readonly JobView[],
  adds: readonly AddView[],
  allBegins: readonly Begin[],
  deleted: ReadonlySet<string> | null,
  t0: number,
): string[] {
  const begins = recordedBegins(allBegins);
  const out: string[] = [];
  const bySeq = new Map(adds.map((a) => [a.seq, a]));
  const byId = new Map(jobs.map((j) => [j.id, j]));
  const window = (holder: JobView): number | undefined => {
    const ttl = bySeq.get(holder.data.s)?.dedupe?.ttlMs;
    return ttl === undefined ? holder.finishedAt : holder.createdAt + ttl;
  };
  // Throttle: jobs of one key, in creation order.
  for (const [key, list] of jobsPerKey(jobs, 't')) {
    for (let i = 1; i < list.length; i++) {
      const prev = list[i - 1]!;
      const next = list[i]!;
      const free = window(prev);
      if (free === undefined || next.createdAt < free - 1)
        out.push(
          `throttle ${key}: ${next.id} created at ${t(next.createdAt, t0)} while ${prev.id} held the key (${free === undefined ? `${prev.state}, never finished` : `until ${t(free, t0)}`})`,
        );
    }
  }
  // By id alone: a rewrite changes the job's data (and its sequence number), not its id.
  const first = new Map<string, number>();
  for (const b of begins) if (!(first.get(b.id)! <= b.at)) first.set(b.id, b.at);
  const beganAt = (j: JobView) => first.get(j.id);
  for (const a of adds) {
    if (!a.dedupe || a.isNew !== false || a.id === undefined) continue;
    const holder = byId.get(a.id);
    if (!holder) {
      if (a.state === 'completed' || deleted?.has(a.id)) continue;
      out.push(`${a.dedupe.mode} add #${a.seq} (key ${a.dedupe.key}) answered ${a.id}, which does not exist`);
      continue;
    }
    if (holder.data.dk !== a.dedupe.key)
      out.push(
        `${a.dedupe.mode} add #${a.seq} (key ${a.dedupe.key}) answered ${a.id}, a job of key ${holder.data.dk}`,
      );
    if (a.state === 'completed' && holder.state !== 'completed')
      out.push(`add #${a.seq} (key ${a.dedupe.key}) answered ${a.id} as completed; it ended ${holder.state}`);
    const sent = a.sentAt ?? 0;
    if (a.dedupe.mode === 'throttle') {
      const free = window(holder);
      if (free !== undefined && free < sent - 1)
        out.push(
          `throttle add #${a.seq} (key ${a.dedupe.key}) sent at ${t(sent, t0)} enqueued nothing: its holder ${a.id} had let the key go at ${t(free, t0)}`,
        );
    } else {
      const began = beganAt(holder);
      if (began !== undefined && sent > began)
        out.push(
          `debounce add #${a.seq} (key ${a.dedupe.key}) sent at ${t(sent, t0)} answered ${a.id}, which had begun at ${t(began, t0)}: a started job takes no add`,
        );
    }
  }
  // Debounce: every begin of a job runs one data.
  const seqs = new Map<string, Set<number>>();
  for (const b of begins) {
    const j = byId.get(b.id);
    if (j?.data.k !== 'w') continue;
    seqs.set(b.id, (seqs.get(b.id) ?? new Set()).add(b.s));
  }
  for (const [id, set] of seqs)
    if (set.size > 1)
      out.push(`debounce ${id}: rewritten after it began (it ran data #${[...set].join(', #')})`);
  return out;
}

/**
 * Dedupe with keepLastIfActive (docs/groups.md, "Keep the last add while the job runs"), kind l:
 * - never two jobs of one key at once: the key's jobs in creation order (an add creates a job only
 *   once the one before it runs or has finished, and a rewrite happens before its job begins) each
 *   begin their first attempt only after the job before them has finished, by Redis's finishedAt
 *   (`toleranceMs` for the two clocks). A run of the earlier job that lost its lease may still be
 *   going on then (at-least-once): Redis's record of its end is what is judged, not that run's end.
 *   A job whose record retention deleted is skipped: the chain is compared across it.
 * - the last add's data runs: an add answered by job J was applied while J had not begun (J was
 *   pending, or blocked behind the running job), so if its reply came before J's first begin, J's
 *   first run must not carry the data of an add whose reply came before this add was sent (that add
 *   was applied first, so this one replaced its data).
 */
export function keepLastViolations(
  jobs: readonly JobView[],
  adds: readonly AddView[],
  allBegins: readonly Begin[],
  toleranceMs: number,
  t0: number,
): string[] {
  const begins = recordedBegins(allBegins);
  const out: string[] = [];
  const first = new Map<string, Begin>();
  for (const b of begins) {
    const prev = first.get(b.id);
    if (!prev || b.at < prev.at) first.set(b.id, b);
  }
  for (const [key, list] of jobsPerKey(jobs, 'l')) {
    for (let i = 1; i < list.length; i++) {
      const prev = list[i - 1]!;
      const next = list[i]!;
      const began = first.get(next.id);
      if (!began) continue;
      if (prev.finishedAt === undefined)
        out.push(
          `keep-last ${key}: ${next.id} began at ${t(began.at, t0)} while ${prev.id}, created before it, is ${prev.state}`,
        );
      else if (began.at < prev.finishedAt - toleranceMs)
        out.push(
          `keep-last ${key}: ${next.id} began at ${t(began.at, t0)}, before ${prev.id} (created before it) finished at ${t(prev.finishedAt, t0)}`,
        );
    }
  }
  const bySeq = new Map(adds.map((a) => [a.seq, a]));
  const answered = new Map<string, AddView[]>();
  for (const a of adds) {
    if (!a.dedupe?.keepLastIfActive || a.id === undefined || a.repliedAt === undefined) continue;
    answered.set(a.id, [...(answered.get(a.id) ?? []), a]);
  }
  for (const [id, list] of answered) {
    const began = first.get(id);
    const ran = began && bySeq.get(began.s);
    if (!began || ran?.repliedAt === undefined) continue;
    for (const x of list) {
      if (x.seq === ran.seq || x.sentAt === undefined) continue;
      if (ran.repliedAt < x.sentAt && x.repliedAt! < began.at)
        out.push(
          `keep-last ${x.dedupe!.key}: ${id} first ran the data of add #${ran.seq} (answered at ${t(ran.repliedAt, t0)}), but add #${x.seq}, sent after that at ${t(x.sentAt, t0)}, was answered with ${id} at ${t(x.repliedAt!, t0)}, before it began at ${t(began.at, t0)}`,
        );
    }
  }
  return out;
}

/**
 * Calls a sandboxed job makes after returning (updateData, step) must never land on another job: a
 * job whose data carries another job's `late` mark, or that stored a `late:<id>` step of another id.
 */
export function lateCallViolations(jobs: readonly JobView[]): string[] {
  const out: string[] = [];
  for (const j of jobs) {
    if (j.data.late !== undefined && j.data.late !== j.id)
      out.push(`${j.id}: its data was replaced by a late updateData of job ${j.data.late}`);
    for (const name of Object.keys(j.steps ?? {}))
      if (name.startsWith('late:') && name !== `late:${j.id}`)
        out.push(`${j.id}: holds step ${name}, stored by a late job.step of another job`);
  }
  return out;
}

/** What the attempt-accounting verdict reads of a job in Redis (JobInfo). */
export interface AccountView {
  id: string;
  state: string;
  data: { s: number };
  attempts: number;
  attemptsLeft: number;
  maxAttempts: number;
  snoozes: number;
  errors: readonly Pick<JobAttemptError, 'attempt' | 'name' | 'message'>[];
}

/**
 * One account of a job's life (docs/guarantees.md "How attempts are counted"):
 * - every start Redis counted (attempts 1..n) was a processor that really began that attempt (a 'b'
 *   line of the job with that number): recovery charges only a marked start, however often a job's
 *   lease was lost unmarked, so a single-attempt job bounced by faults still runs (and any job that
 *   kept a charge for an unrun attempt fails here, not only one that ended dead of it); the current
 *   start of an active job may not have begun yet (its start confirmed before its processor runs);
 * - the budget is the starts less the snoozes and rate limits (`snoozes` counts both) and the parks
 *   (job.waitForSignal, counted nowhere in the record: `parks` bounds them per `id#s`, from the
 *   workers' logs; the count is read back from attemptsLeft, or from the error lines, and must fall
 *   within them): attemptsLeft = max(0, maxAttempts - (attempts - snoozes - parks));
 * - a finished job has one error line per charged attempt that did not complete (an ExpiredError,
 *   for a job that never started, and a DependencyFailedError, for a child a dead parent failed, are
 *   errors of no attempt; one job.waitForChildren threw, naming a dead child, is its attempt's).
 */
export function accountingViolations(
  jobs: readonly AccountView[],
  begins: readonly Begin[],
  parks: ReadonlyMap<string, { lo: number; hi: number }> = new Map(),
): string[] {
  const out: string[] = [];
  const begun = new Map<string, Set<number>>();
  for (const b of begins) {
    const k = jobKey(b.id, b.s);
    const set = begun.get(k) ?? new Set<number>();
    set.add(b.a);
    begun.set(k, set);
  }
  for (const j of jobs) {
    // A DependencyFailedError a run threw (job.waitForChildren met a dead child) is its attempt's.
    const lines = j.errors.filter(
      (e) => e.name !== EXPIRED && (e.name !== DEPENDENCY_FAILED || CHILD_DEAD.test(e.message)),
    ).length;
    const finished = j.state === 'completed' || j.state === 'dead';
    const bounds = parks.get(jobKey(j.id, j.data.s));
    let parked = 0;
    if (bounds) {
      // Read back: from the budget while some is left, else from the error lines of a finished job.
      const read =
        j.attemptsLeft > 0
          ? j.attempts - j.snoozes - (j.maxAttempts - j.attemptsLeft)
          : finished
            ? j.attempts - j.snoozes - lines - (j.state === 'completed' ? 1 : 0)
            : bounds.lo;
      parked = read;
      if (read < bounds.lo || read > bounds.hi)
        out.push(
          `${j.id}: ${read} starts given back beyond its ${j.snoozes} snoozes, but it parked ${bounds.lo === bounds.hi ? bounds.lo : `${bounds.lo} to ${bounds.hi}`} times`,
        );
    }
    const charged = j.attempts - j.snoozes - parked;
    const left = Math.max(0, j.maxAttempts - charged);
    if (j.attemptsLeft !== left)
      out.push(
        `${j.id}: attemptsLeft ${j.attemptsLeft}, but ${j.attempts} starts less ${j.snoozes} snoozes${bounds ? ` and ${parked} parks` : ''} of ${j.maxAttempts} leave ${left}`,
      );
    const ran = begun.get(jobKey(j.id, j.data.s)) ?? new Set<number>();
    const unrun: number[] = [];
    // An active job's current start may be counted and not begun yet: a job that came back unmarked 3
    // times is marked before its processor is called (src/worker/runner.ts, confirm). Seen only in a
    // run that did not drain, which fails anyway.
    const last = j.state === 'active' ? j.attempts - 1 : j.attempts;
    for (let a = 1; a <= last; a++) if (!ran.has(a)) unrun.push(a);
    if (unrun.length > 0)
      out.push(
        `${j.id}: attempt(s) ${unrun.join(', ')} counted as started, but no processor began them (${j.state}, ${j.snoozes} snoozes, errors: ${j.errors.map((e) => `${e.attempt} ${e.name}`).join('; ') || 'none'})`,
      );
    if (!finished) continue;
    const want = charged - (j.state === 'completed' ? 1 : 0);
    if (lines !== want)
      out.push(
        `${j.id} (${j.state}): ${lines} error lines for ${want} charged attempts that did not complete`,
      );
  }
  return out;
}

/** A run that returned (an 'ok' execution line), keyed as `${id}#${attempt}#${snoozes}@${pid}`. */
export function okRunKey(id: string, a: number, z: number | undefined, pid: number): string {
  return `${id}#${a}#${z ?? 0}@${pid}`;
}

/**
 * Retention 0: a completed job's record is deleted in the script that appends its `completed` event,
 * so the event's `result` is Redis's only record of what the job returned. Every such result must be
 * the return value of a run the workers logged as returning (a chaos result names its attempt,
 * snoozes and pid): not missing (every chaos processor that returns, returns a value), and not the
 * value of a run whose outcome was refused. `results`: per job id, the result of each of its
 * `completed` events (an id can complete more than once: retention 0 frees it for a new add).
 */
export function eventResultViolations(
  results: ReadonlyMap<string, readonly unknown[]>,
  okRuns: ReadonlySet<string>,
): string[] {
  const out: string[] = [];
  for (const [id, list] of results) {
    for (const r of list) {
      const res = r as { a?: unknown; p?: unknown; z?: unknown } | undefined;
      if (typeof res?.a !== 'number' || typeof res.p !== 'number') {
        out.push(`${id}: a completed event carries ${JSON.stringify(r) ?? 'no result'}, not a chaos result`);
      } else if (!okRuns.has(okRunKey(id, res.a, typeof res.z === 'number' ? res.z : 0, res.p))) {
        out.push(
          `${id}: a completed event carries the result of attempt ${res.a} in pid ${res.p}, which no logged run returned`,
        );
      }
    }
  }
  return out;
}

/** What the cross-queue verdicts read of a main-queue add that named parents of the parents queue. */
export interface CrossChildAdd {
  seq: number;
  id?: string;
  /** Parent ids in the parents queue. */
  xdeps?: string[];
  ignoreDep?: true;
}

/** What the cross-queue verdicts read of a parents-queue job. */
export interface ParentView {
  id: string;
  state: string;
  finishedAt?: number;
}

/**
 * Parents-queue jobs: every accepted parent add and every job the parents queue lists ended
 * completed or dead (none lost, none stuck), and every cross-queue child named a parent that exists.
 */
export function crossParentViolations(
  acceptedParents: readonly string[],
  parents: ReadonlyMap<string, ParentView>,
): string[] {
  const out: string[] = [];
  for (const id of acceptedParents) {
    const p = parents.get(id);
    if (!p) out.push(`parent ${id}: accepted, but the parents queue lists no such job`);
    else if (p.state !== 'completed' && p.state !== 'dead')
      out.push(`parent ${id}: ${p.state}, not finished`);
  }
  const accepted = new Set(acceptedParents);
  for (const p of parents.values())
    if (!accepted.has(p.id) && p.state !== 'completed' && p.state !== 'dead')
      out.push(`parent ${p.id} (from an unknown add): ${p.state}, not finished`);
  return out;
}

/**
 * A cross-queue child never begins (a 'b' line of its add's seq) before every parent it named has
 * ended: its begin is at or after each parent's finishedAt (Redis's clock, same machine: `toleranceMs`).
 */
export function crossOrderViolations(
  children: readonly CrossChildAdd[],
  parents: ReadonlyMap<string, ParentView>,
  begins: readonly Begin[],
  toleranceMs: number,
  t0: number,
): string[] {
  const out: string[] = [];
  const first = firstBegins(begins);
  for (const c of children) {
    if (!c.xdeps || c.id === undefined) continue;
    const began = first.get(jobKey(c.id, c.seq));
    if (began === undefined) continue;
    for (const pid of c.xdeps) {
      const p = parents.get(pid);
      if (!p || p.finishedAt === undefined)
        out.push(`${c.id}: began at ${t(began, t0)} while parent ${pid} is ${p ? p.state : 'missing'}`);
      else if (began < p.finishedAt - toleranceMs)
        out.push(
          `${c.id}: began at ${t(began, t0)}, ${p.finishedAt - began} ms before parent ${pid} ended ${p.state} at ${t(p.finishedAt, t0)}`,
        );
    }
  }
  return out;
}

/**
 * A cross-queue child whose parent ended dead ends dead with a DependencyFailedError, unless it was
 * added with ignoreDependencyFailure; one whose parents all completed (or that ignores failure) never
 * gets a DependencyFailedError. `completedDeleted`: children retention 0 deleted as they completed.
 */
export function crossOutcomeViolations(
  children: readonly CrossChildAdd[],
  parents: ReadonlyMap<string, ParentView>,
  jobs: ReadonlyMap<string, JobView>,
  completedDeleted: ReadonlySet<string> | null,
): string[] {
  const out: string[] = [];
  for (const c of children) {
    if (!c.xdeps || c.id === undefined) continue;
    const job = jobs.get(c.id);
    const state = job?.state ?? (completedDeleted?.has(c.id) ? 'completed' : undefined);
    if (state === undefined) continue; // judged by 'lost'
    const states = c.xdeps.map((id) => parents.get(id)?.state);
    if (states.some((s) => s !== 'completed' && s !== 'dead')) continue; // judged by the parents check
    const depFailed = job?.errors.some((e) => e.name === DEPENDENCY_FAILED) === true;
    const deadParent = c.xdeps.find((id) => parents.get(id)?.state === 'dead');
    if (deadParent !== undefined && !c.ignoreDep) {
      if (state !== 'dead' || job?.errors.at(-1)?.name !== DEPENDENCY_FAILED)
        out.push(
          `${c.id}: parent ${deadParent} ended dead, but the child is ${state} (last error ${job?.errors.at(-1)?.name ?? 'none'})`,
        );
    } else if (depFailed)
      out.push(
        `${c.id}: ${state} with a DependencyFailedError though ${c.ignoreDep ? 'it ignores dependency failure' : 'every parent completed'}`,
      );
  }
  return out;
}

/** No cross-queue outbox entry (`xnotify`) or link entry (`xlinks`) left in any queue after the drain. */
export function crossLeftoverViolations(
  left: readonly { key: string; count: number; members: readonly string[] }[],
): string[] {
  return left
    .filter((l) => l.count > 0)
    .map(
      (l) =>
        `${l.key}: ${l.count} entries left, e.g. ${l.members
          .slice(0, 3)
          .map((m) => JSON.stringify(m))
          .join(', ')}`,
    );
}
