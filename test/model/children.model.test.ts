/**
 * Model-based test of job.addChildren and job.waitForChildren (docs/workflows.md "Children"): random
 * operation sequences run against the real scripts, with an injected clock, over two hash tags, and
 * against a reference model of the protocol written from the script headers and the docs.
 *
 * Queue P holds the parents ('p1', 'p2') and children of the same tag (their ends reach the parent
 * inline, includes/child_ended.lua); queue C holds children of another tag (their ends go through C's
 * `wnotify` outbox, delivered by child-ended.lua in P). The child ids 'k1'..'k3' exist in both queues,
 * so a child is named by (queue, id). A parent's run follows the client protocol of
 * src/worker/children.ts one call at a time: plan (add-children.lua, fenced), the adds of each child
 * queue (add.lua with the waiter column), the step marked added (step.lua, fenced), then the wait
 * (wait-children.lua, fenced). Any call may come from the run that holds the lease or from a stale one
 * (a stalled worker); a run may stop anywhere (a crash), and the next run replays the plan. Children
 * are claimed, completed (with a result, sometimes deleted at once by keepCount 0), failed dead,
 * cancelled, removed and retried; outboxes are delivered in full, twice, one member at a time, or with
 * a crash before the ZREM; the recovery pass (recover.lua) takes expired leases; purge-waiters.lua runs
 * an hour later, after a full delivery, as the recovery pass orders them.
 *
 * After every step the model and Redis must agree on every job (state, attempts, base, snoozes), the
 * structure holding it (integrity), `waiters` (open lines and tombstones), `wended`, both outboxes,
 * and each parent's children (`\x01c`), their ends (`\x01k`) and its `deps` entry. Besides the
 * comparison, invariants are checked on a ledger the model does not use: no child is created twice
 * for one parent; a child's end is recorded once, with the outcome and result of its first end; a
 * parked parent always has a child whose end can still arrive (never parked for ever); a parent leaves
 * blocked only with every child's end recorded; no open `waiters` line names an ended or deleted job.
 * At the end of each run, a full delivery empties both outboxes.
 *
 * Soak it: CHILDREN_MODEL_RUNS=3000 npx vitest run test/model/children.model.test.ts
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LIBRARY_JOB_DEFAULTS, resolveAddOptions } from '../../src/options/job.js';
import { TOMBSTONE_MS } from '../../src/queue/children.js';
import { type ArgValue, callScript, runScript, type ScriptSpec, scripts } from '../../src/scripts/specs.js';
import { ANNEX_SUFFIX, decodeClaimed, encodeOptionTail, readHeader } from '../../src/store/job-record.js';
import { type QueueKeys, queueKeys } from '../../src/store/keys.js';
import { endedRefs } from '../../src/worker/children.js';
import { NO_HANDOFF } from '../helpers/claim-args.js';
import { uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();

const RUNS = Number(process.env.CHILDREN_MODEL_RUNS ?? 100);
const LEASE = 1_000;
const PARENTS = ['p1', 'p2'] as const;
const KIDS = ['k1', 'k2', 'k3'] as const;
/** A parent's budget is never spent here (recover would otherwise kill it); a child's is one attempt. */
const PARENT_MAX = 50;
const STEP = '~children:1';
const ERROR_JSON = `{"name":"Error","message":"boom","code":"E_MODEL"}`;

type Q = 'P' | 'C';
type St = 'w' | 'a' | 'b' | 'c' | 'x';
type Kid = { q: Q; c: number; ignore: boolean };

type Op =
  | { op: 'addParent'; p: number }
  | { op: 'plainAdd'; q: Q; c: number }
  | { op: 'claim'; q: Q }
  | { op: 'start'; p: number }
  | { op: 'run'; p: number; kids: Kid[]; upto: number; forward: boolean }
  | { op: 'plan'; p: number; stale: boolean; kids: Kid[] }
  | { op: 'adds'; p: number; q: Q; stale: boolean; forward: boolean }
  | { op: 'mark'; p: number; stale: boolean }
  | { op: 'wait'; p: number; stale: boolean }
  | { op: 'parentEnd'; p: number; how: 'complete' | 'fail' }
  | { op: 'childEnd'; q: Q; c: number; how: 'complete' | 'keep0' | 'dead' }
  | { op: 'cancel' | 'remove' | 'retry'; q: Q; id: number }
  | { op: 'deliver'; q: Q; mode: 'full' | 'dup' | 'partial' | 'one' }
  | { op: 'recover' }
  | { op: 'purge' };

const qArb = fc.constantFrom<Q>('P', 'C');
const pArb = fc.integer({ min: 0, max: PARENTS.length - 1 });
const cArb = fc.integer({ min: 0, max: KIDS.length - 1 });
const staleArb = fc.constantFrom(false, false, false, true);
const kidArb = fc.record({ q: qArb, c: cArb, ignore: fc.boolean() });
const kidsArb = fc.uniqueArray(kidArb, { minLength: 1, maxLength: 3, selector: (k) => `${k.q}${k.c}` });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ op: fc.constant('addParent' as const), p: pArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('plainAdd' as const), q: qArb, c: cArb }) },
  { weight: 5, arbitrary: fc.record({ op: fc.constant('claim' as const), q: qArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('start' as const), p: pArb }) },
  {
    weight: 8,
    arbitrary: fc.record({
      op: fc.constant('run' as const),
      p: pArb,
      kids: kidsArb,
      upto: fc.integer({ min: 1, max: 6 }),
      forward: fc.constantFrom(true, true, false),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('plan' as const),
      p: pArb,
      stale: staleArb,
      kids: kidsArb,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('adds' as const),
      p: pArb,
      q: qArb,
      stale: staleArb,
      forward: fc.constantFrom(true, true, false),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('mark' as const), p: pArb, stale: staleArb }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('wait' as const), p: pArb, stale: staleArb }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('parentEnd' as const),
      p: pArb,
      how: fc.constantFrom('complete' as const, 'fail' as const),
    }),
  },
  {
    weight: 6,
    arbitrary: fc.record({
      op: fc.constant('childEnd' as const),
      q: qArb,
      c: cArb,
      how: fc.constantFrom('complete' as const, 'keep0' as const, 'dead' as const),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constantFrom('cancel' as const, 'remove' as const, 'retry' as const),
      q: qArb,
      id: fc.integer({ min: 0, max: 4 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('deliver' as const),
      q: qArb,
      mode: fc.constantFrom('full' as const, 'dup' as const, 'partial' as const, 'one' as const),
    }),
  },
  { weight: 2, arbitrary: fc.constant({ op: 'recover' as const }) },
  { weight: 1, arbitrary: fc.constant({ op: 'purge' as const }) },
);

/** A job of the model. `token` is what the record's fencing field holds ('' after a revocation). */
interface MJob {
  state: St;
  attempts: number;
  base: number;
  started: boolean;
  refunds: number;
  max: number;
  token: string;
  /** Completed: its result JSON. */
  result: string;
}

/** A parent's annex as the model keeps it (deleted with the parent). */
interface MParent {
  /** `\x01c` lines, `queue \t id \t i or s`, in plan order. */
  children: string[];
  /** `\x01k` lines, `queue \t id \t outcome \t result`. */
  ends: string[];
  step: 'none' | 'planned' | 'added';
  /** The run (token) that planned: any other run's adds are a replay. */
  plannedBy: string;
  /** `deps` while parked: the children still open. */
  open: number | null;
}

/** A `waiters` line: the parent, and once the child ended, its outcome and when. */
interface MWaiter {
  pid: string;
  outcome: '' | 'c' | 'x';
  endedAt: number;
  /** Ledger: the parent incarnation the line was written for. */
  inc: number;
}

/** What the runs exercised, checked after the property (a harness that checks nothing must not pass). */
const seen = {
  planned: 0,
  stalePlan: 0,
  created: 0,
  adopted: 0,
  refusedTaken: 0,
  tombstoneAnswer: 0,
  parked: 0,
  resentPark: 0,
  staleWait: 0,
  ready: 0,
  releasedInline: 0,
  releasedByDelivery: 0,
  duplicateDelivery: 0,
  purged: 0,
};

const key = (q: Q, id: string) => `${q}/${id}`;

class Harness {
  readonly names: Record<Q, string> = { P: uniqueName('cmodel-p'), C: uniqueName('cmodel-c') };
  readonly keys: Record<Q, QueueKeys> = {
    P: queueKeys('surety', this.names.P),
    C: queueKeys('surety', this.names.C),
  };
  now = 1_700_000_000_000;
  readonly jobs = new Map<string, MJob>();
  readonly parents = new Map<string, MParent>();
  readonly waiters = new Map<string, MWaiter>();
  readonly outbox: Record<Q, Map<string, number>> = { P: new Map(), C: new Map() };
  readonly trace: string[] = [];
  // ---- the ledger (invariants; the predictions above never read it) ----
  /** Tokens each parent was claimed with, oldest first. */
  readonly tokens = new Map<string, string[]>();
  /** Per run (token): the child queues whose adds it made. */
  readonly runAdds = new Map<string, Set<Q>>();
  /** Claimed children: key -> token. */
  readonly kidTokens = new Map<string, string>();
  readonly incarnation = new Map<string, number>();
  private incs = 0;
  /** Each parent incarnation's creation time: what `waiters` lines and outbox members name it by. */
  private readonly incCreated = new Map<number, number>();
  /** `pid#inc|q/id` -> how many times add.lua created that child for that parent. */
  readonly created = new Map<string, number>();
  /** `pid#inc|q/id` -> the child's first end while its line named that parent. */
  readonly firstEnd = new Map<string, { outcome: 'c' | 'x'; result: string }>();
  private results = 0;

  fail(msg: string): never {
    throw new Error(`${msg}\ntrace:\n  ${this.trace.join('\n  ')}`);
  }

  private values(q: Q, extra: Record<string, ArgValue>): Record<string, ArgValue> {
    return {
      now: this.now,
      defaultLeaseMs: LEASE,
      defaultMaxAttempts: 1,
      limit: 1_000,
      keepCount: 1_000,
      keepAgeMs: 1_000_000_000,
      wakeChannel: this.keys[q].wakeChannel,
      doneChannel: this.keys[q].doneChannel,
      rateMax: 0,
      rateWindowMs: 0,
      eventsMaxLen: 0,
      partitions: 1,
      idSuffix: '',
      checkOnly: '',
      batch: '',
      cbId: '',
      cbPriority: 0,
      cbDelayMs: '',
      cbRunAt: '',
      cbTail: '',
      cbData: '',
      outboxMarks: '',
      outboxForget: '',
      claimer: '',
      nonce: '',
      count: 100,
      freeSlots: '',
      starts: '',
      maxChildren: 10_000,
      maxBytes: 1 << 20,
      ...NO_HANDOFF,
      ...extra,
    };
  }

  private args<A extends string>(
    spec: ScriptSpec<A, string, unknown>,
    q: Q,
    extra: Record<string, ArgValue>,
  ) {
    const values = this.values(q, extra);
    const args = {} as Record<A, ArgValue>;
    for (const a of spec.args) {
      const v = values[a];
      if (v === undefined) throw new Error(`no value for argument ${a} of ${spec.name}.lua`);
      args[a] = v;
    }
    return args;
  }

  raw<A extends string, R extends string, T>(
    spec: ScriptSpec<A, R, T>,
    q: Q,
    extra: Record<string, ArgValue> = {},
    rows: readonly Record<R, ArgValue>[] = [],
  ): Promise<unknown> {
    return runScript(
      fx.redis,
      spec as ScriptSpec<A, R, unknown>,
      this.keys[q],
      this.args(spec, q, extra),
      rows,
    );
  }

  call<A extends string, R extends string, T>(
    spec: ScriptSpec<A, R, T>,
    q: Q,
    extra: Record<string, ArgValue> = {},
    rows: readonly Record<R, ArgValue>[] = [],
  ): Promise<T> {
    return callScript(fx.redis, spec, this.keys[q], this.args(spec, q, extra), rows);
  }

  private addRow(id: string, max: number, waiter: string) {
    return {
      id,
      priority: 0,
      delayMs: '',
      runAt: '',
      optionTail: encodeOptionTail(resolveAddOptions({ maxAttempts: max }, LIBRARY_JOB_DEFAULTS)),
      data: '{"n":1}',
      dependsOn: '',
      depMode: '',
      group: '',
      dedupeKey: '',
      dedupeMode: '',
      dedupeTtlMs: '',
      ttlMs: '',
      xDependsOn: '',
      waiter,
    };
  }

  waiterLine(pid: string, q: Q, inc: number): string {
    return `${this.keys.P.tag}\t${pid}\t${this.names.P}\t${this.incCreated.get(inc)}\t${this.names[q]}`;
  }

  /** Whether incarnation `inc` of a parent is the one named `pid` now, by creation time (as Redis tells). */
  private isCurrent(pid: string, created: number): boolean {
    const inc = this.incarnation.get(pid);
    return this.jobs.has(key('P', pid)) && inc !== undefined && this.incCreated.get(inc) === created;
  }

  private ledgerKey(pid: string, inc: number, q: Q, id: string): string {
    return `${pid}#${inc}|${key(q, id)}`;
  }

  // ---- the model's transitions -------------------------------------------------------------------

  private newJob(k: string, max: number): MJob {
    const j: MJob = {
      state: 'w',
      attempts: 0,
      base: 0,
      started: false,
      refunds: 0,
      max,
      token: '',
      result: '',
    };
    this.jobs.set(k, j);
    return j;
  }

  private impliedStart(j: MJob): void {
    if (j.started) return;
    j.attempts += 1;
    j.started = true;
  }

  /** child_ended: parent `pid` (of P) records child (q, id)'s end once; a parked parent counts it off. */
  private childEnded(
    pid: string,
    created: number,
    q: Q,
    id: string,
    outcome: 'c' | 'x',
    result: string,
  ): void {
    const j = this.jobs.get(key('P', pid));
    const par = this.parents.get(pid);
    // A completed or dead parent records it too: a retry's wait finds it (includes/child_ended.lua).
    if (!j || !par) return;
    // Another job of that id (created at another time) is another parent: it takes nothing.
    if (!this.isCurrent(pid, created)) return;
    const ref = `${this.names[q]}\t${id}\t`;
    if (par.ends.some((l) => l.startsWith(ref))) return;
    par.ends.push(`${ref}${outcome}\t${result}`);
    if (j.state !== 'b' || par.open === null) return;
    par.open -= 1;
    if (par.open === 0) {
      par.open = null;
      j.state = 'w';
    }
  }

  /** settle_dependents' notify_waiters: an ended child's open line becomes a tombstone; its parent learns. */
  private ended(q: Q, id: string, outcome: 'c' | 'x', result: string): void {
    const w = this.waiters.get(key(q, id));
    if (w?.outcome !== '') return;
    w.outcome = outcome;
    w.endedAt = this.now;
    const lk = this.ledgerKey(w.pid, w.inc, q, id);
    if (!this.firstEnd.has(lk)) this.firstEnd.set(lk, { outcome, result });
    if (q === 'P') {
      const was = this.jobs.get(key('P', w.pid))?.state;
      this.childEnded(w.pid, this.incCreated.get(w.inc)!, q, id, outcome, result);
      if (was === 'b' && this.jobs.get(key('P', w.pid))?.state === 'w') seen.releasedInline++;
    } else this.outbox.C.set(this.member(w.pid, w.inc, q, id, outcome, result), this.now);
  }

  private member(pid: string, inc: number, q: Q, id: string, outcome: string, result: string): string {
    return `${this.keys.P.tag}\t${pid}\t${this.incCreated.get(inc)}\t${this.names[q]}\t${id}\t${outcome}\t${result}`;
  }

  private finish(q: Q, id: string, j: MJob, outcome: 'c' | 'x', result: string, keep = true): void {
    j.state = outcome;
    j.result = result;
    if (!keep) this.jobs.delete(key(q, id));
    this.ended(q, id, outcome, result);
  }

  private dropParent(pid: string): void {
    this.parents.delete(pid);
  }

  // ---- steps -------------------------------------------------------------------------------------

  private tokenFor(pid: string, stale: boolean): string | null {
    const list = this.tokens.get(pid) ?? [];
    if (list.length === 0) return null;
    const j = this.jobs.get(key('P', pid));
    // The run holding the lease is the last one claimed while the parent is active; a stale run is an
    // earlier one (or, while it is parked, the parked run sending its park again).
    if (stale && j?.state === 'a') return list.length > 1 ? list[list.length - 2]! : null;
    return list[list.length - 1]!;
  }

  private holds(pid: string, token: string): boolean {
    const j = this.jobs.get(key('P', pid));
    return j !== undefined && j.state === 'a' && j.token === token;
  }

  async step(op: Op): Promise<void> {
    this.now += 10;
    const log = (s: string) => this.trace.push(`t+${this.now - 1_700_000_000_000} ${s}`);
    switch (op.op) {
      case 'addParent': {
        const pid = PARENTS[op.p]!;
        // Jobs of one id are told apart by their creation time (ms): a later one is a later ms.
        this.now += 1;
        const r = (await this.raw(scripts.add, 'P', {}, [this.addRow(pid, PARENT_MAX, '')])) as unknown[];
        const exists = this.jobs.has(key('P', pid));
        this.agree(`add ${pid}`, r, [
          pid,
          exists ? 0 : 1,
          exists ? this.jobs.get(key('P', pid))!.state : 'w',
        ]);
        if (!exists) {
          this.newJob(key('P', pid), PARENT_MAX);
          this.incarnation.set(pid, ++this.incs);
          this.incCreated.set(this.incs, this.now);
          this.tokens.set(pid, []);
          this.parents.set(pid, { children: [], ends: [], step: 'none', plannedBy: '', open: null });
        }
        log(`add parent ${pid} -> ${r}`);
        break;
      }
      case 'plainAdd': {
        const id = KIDS[op.c]!;
        const r = (await this.raw(scripts.add, op.q, {}, [this.addRow(id, 1, '')])) as unknown[];
        const j = this.jobs.get(key(op.q, id));
        this.agree(`plain add ${op.q}/${id}`, r, [id, j ? 0 : 1, j ? j.state : 'w']);
        if (!j) this.newJob(key(op.q, id), 1);
        log(`plain add ${op.q}/${id} -> ${r}`);
        break;
      }
      case 'claim': {
        const r = await this.call(scripts.claim, op.q);
        const want = [...this.jobs.entries()]
          .filter(([k, j]) => k.startsWith(`${op.q}/`) && j.state === 'w')
          .map(([k]) => k.slice(2))
          .sort();
        const got = r.jobs.map((c) => c.id).sort();
        this.agree(`claim ${op.q}`, got, want);
        for (const c of r.jobs) {
          const j = this.jobs.get(key(op.q, c.id))!;
          const token = decodeClaimed(c.record).token;
          j.state = 'a';
          j.started = false;
          j.token = token;
          if (op.q === 'P' && this.tokens.has(c.id)) this.tokens.get(c.id)!.push(token);
          else this.kidTokens.set(key(op.q, c.id), token);
        }
        log(`claim ${op.q} -> [${got}]`);
        break;
      }
      case 'start': {
        const pid = PARENTS[op.p]!;
        const token = this.tokenFor(pid, false);
        if (token === null) return;
        const lost = await this.call(scripts.start, 'P', {}, [{ id: pid, token }]);
        const held = this.holds(pid, token);
        this.agree(`start ${pid}`, lost, held ? [] : [pid]);
        if (held) this.impliedStart(this.jobs.get(key('P', pid))!);
        log(`start ${pid} -> lost [${lost}]`);
        break;
      }
      case 'plan': {
        const pid = PARENTS[op.p]!;
        const par = this.parents.get(pid);
        const token = this.tokenFor(pid, op.stale);
        // The client reads the step first: a planned call is replayed, never planned again.
        if (!par || token === null || par.step !== 'none') return;
        const lines = op.kids.map((k) => `${this.names[k.q]}\t${KIDS[k.c]}\t${k.ignore ? 'i' : 's'}`);
        const refs = op.kids.map((k) => ({ queue: this.names[k.q], id: KIDS[k.c]! }));
        const r = await this.call(scripts.addChildren, 'P', {
          id: pid,
          token,
          step: STEP,
          value: JSON.stringify({ refs }),
          children: lines.join('\n'),
        });
        const held = this.holds(pid, token);
        this.agree(`plan ${pid}`, r, held ? 1 : 0);
        if (held) {
          par.children = lines;
          par.step = 'planned';
          par.plannedBy = token;
          seen.planned++;
        } else seen.stalePlan++;
        log(
          `plan ${pid}${op.stale ? ' (stale run)' : ''} [${lines.map((l) => l.split('\t').slice(1).join(':'))}] @${op.kids.map((k) => k.q)} -> ${r}`,
        );
        break;
      }
      case 'run': {
        // The run holding the lease, through the client's protocol, cut off after `upto` calls.
        const pid = PARENTS[op.p]!;
        const state = this.jobs.get(key('P', pid))?.state;
        // A waiting parent is claimed first (with whatever else waits in P).
        if (state === 'w') await this.step({ op: 'claim', q: 'P' });
        else if (state !== 'a') return;
        const calls: Op[] = [
          { op: 'plan', p: op.p, stale: false, kids: op.kids },
          { op: 'adds', p: op.p, q: 'P', stale: false, forward: op.forward },
          { op: 'adds', p: op.p, q: 'C', stale: false, forward: op.forward },
          { op: 'mark', p: op.p, stale: false },
          { op: 'wait', p: op.p, stale: false },
        ];
        for (const call of calls.slice(0, op.upto)) await this.step(call);
        if (op.upto < calls.length) log(`run of ${pid} cut off`);
        return;
      }
      case 'adds':
        await this.adds(op, log);
        break;
      case 'mark': {
        const pid = PARENTS[op.p]!;
        const par = this.parents.get(pid);
        const token = this.tokenFor(pid, op.stale);
        if (!par || token === null || par.step !== 'planned') return;
        // The client marks the step once its run made every child queue's adds.
        const queues = new Set(par.children.map((l) => (l.startsWith(`${this.names.P}\t`) ? 'P' : 'C')));
        const done = this.runAdds.get(token) ?? new Set();
        if ([...queues].some((q) => !done.has(q as Q))) return;
        const r = await this.call(scripts.step, 'P', {
          id: pid,
          token,
          name: STEP,
          value: JSON.stringify({ added: true }),
        });
        const held = this.holds(pid, token);
        this.agree(`mark ${pid}`, r, held ? 1 : 0);
        if (held) par.step = 'added';
        log(`mark ${pid}${op.stale ? ' (stale run)' : ''} -> ${r}`);
        break;
      }
      case 'wait':
        await this.wait(op, log);
        break;
      case 'parentEnd': {
        const pid = PARENTS[op.p]!;
        const token = this.tokenFor(pid, false);
        const j = this.jobs.get(key('P', pid));
        if (token === null || !j || !this.holds(pid, token)) return;
        if (op.how === 'complete') {
          await this.call(scripts.complete, 'P', {}, [{ id: pid, token, result: '"parent"' }]);
          this.impliedStart(j);
          this.finish('P', pid, j, 'c', '"parent"');
        } else {
          await this.call(scripts.fail, 'P', {}, [{ id: pid, token, retryDelayMs: 0, error: ERROR_JSON }]);
          this.impliedStart(j);
          if (j.attempts - j.base < j.max) j.state = 'w';
          else this.finish('P', pid, j, 'x', '');
        }
        log(`${op.how} parent ${pid}`);
        break;
      }
      case 'childEnd': {
        // One of the children this queue's workers hold (`c` picks among them).
        const held = [...this.kidTokens.keys()].filter((k) => k.startsWith(`${op.q}/`)).sort();
        if (held.length === 0) return;
        const k = held[op.c % held.length]!;
        const id = k.slice(2);
        const token = this.kidTokens.get(k);
        const j = this.jobs.get(k);
        if (token === undefined || !j || j.state !== 'a' || j.token !== token) return;
        this.kidTokens.delete(k);
        if (op.how === 'dead') {
          await this.call(scripts.fail, op.q, {}, [{ id, token, retryDelayMs: -1, error: ERROR_JSON }]);
          this.impliedStart(j);
          this.finish(op.q, id, j, 'x', '');
        } else {
          const result = `{"r":${++this.results}}`;
          const keepCount = op.how === 'keep0' ? 0 : 1_000;
          await this.call(scripts.complete, op.q, { keepCount }, [{ id, token, result }]);
          this.impliedStart(j);
          this.finish(op.q, id, j, 'c', result, keepCount > 0);
        }
        log(`${op.how} child ${k}`);
        break;
      }
      case 'cancel':
      case 'remove':
      case 'retry':
        await this.admin(op, log);
        break;
      case 'deliver':
        await this.deliver(op.q, op.mode);
        log(`deliver ${op.q} ${op.mode}`);
        break;
      case 'recover': {
        this.now += LEASE + 1;
        for (const q of ['P', 'C'] as const) {
          await this.call(scripts.recover, q, { defaultMaxAttempts: 1 });
          for (const [k, j] of [...this.jobs.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
            if (!k.startsWith(`${q}/`) || j.state !== 'a') continue;
            const free = !j.started;
            if (free) j.refunds += 1;
            j.token = '';
            if (free || j.attempts - j.base < j.max) j.state = 'w';
            else this.finish(q, k.slice(2), j, 'x', '');
          }
        }
        log('recover (leases expired)');
        break;
      }
      case 'purge': {
        this.now += TOMBSTONE_MS + 1;
        // As the recovery pass orders them: the outboxes are delivered, then the tombstones purged.
        await this.deliver('C', 'full');
        await this.deliver('P', 'full');
        const cutoff = this.now - TOMBSTONE_MS;
        for (const q of ['P', 'C'] as const) {
          await this.call(scripts.purgeWaiters, q, { cutoff, limit: 1_000 });
          for (const [k, w] of [...this.waiters]) {
            if (!k.startsWith(`${q}/`) || w.outcome === '' || w.endedAt >= cutoff) continue;
            this.waiters.delete(k);
            seen.purged++;
          }
        }
        log('an hour later: deliver all, purge tombstones');
        break;
      }
    }
    await this.check();
  }

  /** The adds of one child queue by a run of the parent (add.lua is not fenced: a stale run adds too). */
  private async adds(op: Extract<Op, { op: 'adds' }>, log: (s: string) => void): Promise<void> {
    const pid = PARENTS[op.p]!;
    const par = this.parents.get(pid);
    const token = this.tokenFor(pid, op.stale);
    // A run adds after it planned or read the plan, and never once the step says added.
    if (!par || token === null || par.step !== 'planned') return;
    // A run adds to each child queue once.
    if (this.runAdds.get(token)?.has(op.q)) return;
    // A replay leaves out the children whose end the parent recorded, as src/worker/children.ts does.
    const ended =
      token === par.plannedBy
        ? new Set<string>()
        : endedRefs((await fx.redis.hget(this.keys.P.annex, pid + ANNEX_SUFFIX.childEnds)) ?? '');
    const ids = par.children
      .filter(
        (l) => l.startsWith(`${this.names[op.q]}\t`) && !ended.has(l.split('\t').slice(0, 2).join('\t')),
      )
      .map((l) => l.split('\t')[1]!);
    const run = this.runAdds.get(token) ?? new Set<Q>();
    this.runAdds.set(token, run);
    if (ids.length === 0) {
      run.add(op.q);
      return;
    }
    const inc = this.incarnation.get(pid)!;
    const waiter = this.waiterLine(pid, op.q, inc);
    let reply: unknown[] | Error;
    try {
      reply = (await this.raw(
        scripts.add,
        op.q,
        {},
        ids.map((id) => this.addRow(id, 1, waiter)),
      )) as unknown[];
    } catch (err) {
      reply = err as Error;
    }
    // The model: refusals first (a child of another parent), then each row.
    const taken = ids.find((id) => {
      const w = this.waiters.get(key(op.q, id));
      return w !== undefined && (w.pid !== pid || this.incCreated.get(w.inc) !== this.incCreated.get(inc));
    });
    if (taken !== undefined) {
      if (!(reply instanceof Error) || reply.message !== `SURETY_CHILD_TAKEN ${taken}`)
        this.fail(`adds of ${pid} in ${op.q}: expected SURETY_CHILD_TAKEN ${taken}, got ${reply}`);
      seen.refusedTaken++;
      log(`adds ${pid} -> ${op.q} [${ids}] -> refused: ${taken} is taken`);
      return;
    }
    if (reply instanceof Error) this.fail(`adds of ${pid} in ${op.q} failed: ${reply.message}`);
    const want: unknown[] = [];
    for (const id of ids) {
      const k = key(op.q, id);
      const w = this.waiters.get(k);
      const j = this.jobs.get(k);
      if (w && w.outcome !== '' && !j) {
        want.push(id, 0, w.outcome);
        seen.tombstoneAnswer++;
      } else if (!w && j) {
        if (j.state === 'c' || j.state === 'x') {
          const result = j.state === 'c' ? j.result : '';
          this.waiters.set(k, { pid, outcome: j.state, endedAt: this.now, inc });
          const lk = this.ledgerKey(pid, inc, op.q, id);
          if (!this.firstEnd.has(lk)) this.firstEnd.set(lk, { outcome: j.state, result });
          this.outbox[op.q].set(this.member(pid, inc, op.q, id, j.state, result), this.now);
        } else this.waiters.set(k, { pid, outcome: '', endedAt: 0, inc });
        seen.adopted++;
        want.push(id, 0, j.state);
      } else if (j) {
        want.push(id, 0, j.state);
      } else {
        this.newJob(k, 1);
        this.waiters.set(k, { pid, outcome: '', endedAt: 0, inc });
        const lk = this.ledgerKey(pid, inc, op.q, id);
        const n = (this.created.get(lk) ?? 0) + 1;
        this.created.set(lk, n);
        if (n > 1 || this.firstEnd.has(lk))
          this.fail(`child ${k} of ${pid} was created again by a replayed add after it ended`);
        seen.created++;
        want.push(id, 1, 'w');
      }
    }
    this.agree(`adds of ${pid} in ${op.q}`, reply, want);
    run.add(op.q);
    log(`adds ${pid}${op.stale ? ' (stale run)' : ''} -> ${op.q} [${ids}] -> ${reply}`);
    // The client delivers the child queue's outbox right after (a crash may come first).
    if (op.forward) await this.deliver(op.q, 'full');
  }

  private async wait(op: Extract<Op, { op: 'wait' }>, log: (s: string) => void): Promise<void> {
    const pid = PARENTS[op.p]!;
    const par = this.parents.get(pid);
    const token = this.tokenFor(pid, op.stale);
    if (token === null) return;
    // The run holding the lease waits once addChildren returned (the step marked added).
    if (!op.stale && par && par.step === 'planned') return;
    const r = await this.call(scripts.waitChildren, 'P', { id: pid, token });
    const j = this.jobs.get(key('P', pid));
    let want: unknown;
    if (!j || !par || j.token !== token) want = { outcome: 'stale' };
    else if (j.state === 'b' && par.open !== null) {
      want = { outcome: 'parked', open: par.open };
      seen.resentPark++;
    } else if (j.state !== 'a') want = { outcome: 'stale' };
    else {
      const open = par.children.filter((l) => {
        const ref = `${l.split('\t').slice(0, 2).join('\t')}\t`;
        return !par.ends.some((e) => e.startsWith(ref));
      }).length;
      if (open === 0) {
        want = { outcome: 'ready', children: par.children.join('\n'), ends: [...par.ends].sort().join('\n') };
        seen.ready++;
      } else {
        if (op.stale) this.fail(`a stale run of ${pid} would park it`);
        this.impliedStart(j);
        j.base += 1;
        j.state = 'b';
        par.open = open;
        want = { outcome: 'parked', open };
        seen.parked++;
      }
    }
    if (op.stale) seen.staleWait++;
    const got = r.outcome === 'ready' ? { ...r, ends: r.ends.split('\n').sort().join('\n') } : r;
    this.agree(`wait ${pid}`, got, want);
    log(`wait ${pid}${op.stale ? ' (stale run)' : ''} -> ${JSON.stringify(r)}`);
  }

  private async admin(op: Extract<Op, { op: 'cancel' | 'remove' | 'retry' }>, log: (s: string) => void) {
    const all = op.q === 'P' ? [...PARENTS, ...KIDS] : [...KIDS];
    const id = all[op.id % all.length]!;
    const k = key(op.q, id);
    const j = this.jobs.get(k);
    const spec = op.op === 'cancel' ? scripts.cancel : op.op === 'remove' ? scripts.remove : scripts.retry;
    const r = await this.raw(spec, op.q, { id });
    let want = 'OK';
    if (!j) want = 'NOT_FOUND';
    else if (op.op === 'cancel') {
      if (j.state === 'c' || j.state === 'x') want = `INVALID_STATE:${j.state}`;
      else {
        if (this.parents.has(id) && op.q === 'P') this.parents.get(id)!.open = null;
        j.token = '';
        this.finish(op.q, id, j, 'x', '');
      }
    } else if (op.op === 'remove') {
      if (j.state === 'a') want = 'INVALID_STATE:a';
      else {
        this.jobs.delete(k);
        if (op.q === 'P' && this.parents.has(id)) {
          this.dropParent(id);
          this.tokens.delete(id);
        }
        if (j.state !== 'c') this.ended(op.q, id, 'x', '');
      }
    } else if (j.state !== 'c' && j.state !== 'x') want = `INVALID_STATE:${j.state}`;
    else {
      j.state = 'w';
      j.base = j.attempts;
      j.token = '';
      j.result = '';
    }
    this.agree(`${op.op} ${k}`, r, want);
    log(`${op.op} ${k} -> ${r}`);
  }

  /**
   * Delivers `q`'s outbox as src/queue/children.ts does (child-ended.lua in the parent's tag), on the
   * injected clock: in full; twice (a second deliverer); all but the ZREM (a crash after delivering);
   * or the first member only.
   */
  async deliver(q: Q, mode: 'full' | 'dup' | 'partial' | 'one'): Promise<void> {
    const k = this.keys[q];
    let members = await fx.redis.zrange(k.wnotify, 0, -1);
    if (mode === 'one') members = members.slice(0, 1);
    for (let pass = 0; pass < (mode === 'dup' ? 2 : 1); pass++) {
      for (const m of members) {
        const [, parent, created, childQueue, child, outcome, ...result] = m.split('\t') as string[];
        await this.call(scripts.childEnded, 'P', {
          parent: parent!,
          parentCreated: created!,
          childQueue: childQueue!,
          child: child!,
          outcome: outcome!,
          result: result.join('\t'),
        });
        const cq: Q = childQueue === this.names.P ? 'P' : 'C';
        const was = this.jobs.get(key('P', parent!))?.state;
        this.childEnded(parent!, Number(created), cq, child!, outcome as 'c' | 'x', result.join('\t'));
        if (was === 'b' && this.jobs.get(key('P', parent!))?.state === 'w') seen.releasedByDelivery++;
        if (pass === 1) seen.duplicateDelivery++;
      }
    }
    // The model's outbox in Redis's order (score, then member) is what was just read.
    if (mode !== 'partial' && members.length > 0) {
      await fx.redis.zrem(k.wnotify, ...members);
      for (const m of members) this.outbox[q].delete(m);
    }
  }

  private agree(what: string, got: unknown, want: unknown): void {
    if (JSON.stringify(got) !== JSON.stringify(want))
      this.fail(`${what}: Redis says ${JSON.stringify(got)}, the model ${JSON.stringify(want)}`);
  }

  /** Redis against the model, then the invariants on the ledger. */
  async check(): Promise<void> {
    for (const q of ['P', 'C'] as const) {
      const k = this.keys[q];
      const [waiting, prio, delayed, active, completed, dead, deps] = await Promise.all([
        fx.redis.lrange(k.waiting, 0, -1),
        fx.redis.zrange(k.prio, 0, -1),
        fx.redis.zrange(k.delayed, 0, -1),
        fx.redis.zrange(k.active, 0, -1),
        fx.redis.zrange(k.completed, 0, -1),
        fx.redis.zrange(k.dead, 0, -1),
        fx.redis.hkeys(k.deps),
      ]);
      const holders: Record<St | 'd', Set<string>> = {
        w: new Set([...waiting, ...prio]),
        d: new Set(delayed),
        a: new Set(active),
        c: new Set(completed),
        x: new Set(dead),
        b: new Set(deps),
      };
      const ids = q === 'P' ? [...PARENTS, ...KIDS] : [...KIDS];
      const recs = await fx.redis.hmget(k.jobs, ...ids);
      for (const [i, id] of ids.entries()) {
        const rec = recs[i] ?? null;
        const m = this.jobs.get(key(q, id));
        const where = (Object.keys(holders) as (St | 'd')[]).filter((s) => holders[s].has(id));
        if (rec === null) {
          if (m) this.fail(`${q}/${id}: no record, the model has it ${m.state}`);
          if (where.length > 0) this.fail(`${q}/${id}: no record but listed in [${where}]`);
          continue;
        }
        if (!m) this.fail(`${q}/${id}: a record the model does not have: ${rec.split('\n')[0]}`);
        const h = readHeader(rec.slice(0, rec.indexOf('\n')));
        if (where.length !== 1 || where[0] !== h.state)
          this.fail(`${q}/${id}: the record says ${h.state} but it is listed in [${where}]`);
        this.agree(
          `${q}/${id} (state, attempts, base, snoozes)`,
          [h.state, h.attempts, h.base, h.snoozes],
          [m.state, m.attempts, m.base, 0],
        );
      }
      // waiters, wended, the outbox.
      const wl = await fx.redis.hgetall(k.waiters);
      const wantW: Record<string, string> = {};
      const wantE: string[] = [];
      for (const [wk, w] of this.waiters) {
        if (!wk.startsWith(`${q}/`)) continue;
        const id = wk.slice(2);
        wantW[id] = this.waiterLine(w.pid, q, w.inc) + (w.outcome ? `\t${w.outcome}` : '');
        if (w.outcome) wantE.push(id);
      }
      this.agree(`${q} waiters`, sortObj(wl), sortObj(wantW));
      this.agree(`${q} wended`, (await fx.redis.zrange(k.wended, 0, -1)).sort(), wantE.sort());
      this.agree(
        `${q} wnotify`,
        (await fx.redis.zrange(k.wnotify, 0, -1)).sort(),
        [...this.outbox[q].keys()].sort(),
      );
      // No open line names a job that ended or is gone.
      for (const [id, line] of Object.entries(wl)) {
        if (line.split('\t').length !== 4) continue;
        const j = this.jobs.get(key(q, id));
        if (!j || j.state === 'c' || j.state === 'x')
          this.fail(`waiters of ${q} keeps ${id} open though it ${j ? `is ${j.state}` : 'is gone'}`);
      }
    }
    await Promise.all(PARENTS.map((pid) => this.checkParent(pid)));
  }

  private async checkParent(pid: string): Promise<void> {
    const k = this.keys.P;
    const [c, e, d] = await Promise.all([
      fx.redis.hget(k.annex, pid + ANNEX_SUFFIX.children),
      fx.redis.hget(k.annex, pid + ANNEX_SUFFIX.childEnds),
      fx.redis.hget(k.deps, pid),
    ]);
    const par = this.parents.get(pid);
    this.agree(`${pid} children`, c ?? '', par?.children.join('\n') ?? '');
    const ends = (e ?? '').split('\n').filter((l) => l !== '');
    this.agree(`${pid} ends`, [...ends].sort(), [...(par?.ends ?? [])].sort());
    this.agree(`${pid} deps`, d, par?.open != null ? `${par.open}|w` : null);
    if (!par) return;
    const inc = this.incarnation.get(pid)!;
    // Each end once, as the child's first end (ledger).
    const refs = ends.map((l) => l.split('\t').slice(0, 2).join('\t'));
    if (new Set(refs).size !== refs.length) this.fail(`${pid} records a child's end twice: ${ends}`);
    for (const l of ends) {
      const [queue, id, outcome, ...result] = l.split('\t');
      const q: Q = queue === this.names.P ? 'P' : 'C';
      let first = this.firstEnd.get(this.ledgerKey(pid, inc, q, id!));
      if (!first) {
        // Left as it is (see the report of this file's commit): an end still in an outbox when its
        // parent was removed reaches a new job of the parent's id.
        for (let older = inc - 1; older > 0 && !first; older--)
          first = this.firstEnd.get(this.ledgerKey(pid, older, q, id!));
        if (first) this.fail(`${pid} records ${q}/${id}'s end, which was an earlier job of this id's`);
      }
      if (!first || first.outcome !== outcome || first.result !== result.join('\t'))
        this.fail(
          `${pid} records ${q}/${id} as ${outcome} ${result}, its first end was ${JSON.stringify(first)}`,
        );
    }
    const j = this.jobs.get(key('P', pid));
    if (j?.state !== 'b') return;
    // Parked: some child's end is still to come, by its own end or by a delivery.
    const open = par.children
      .map((l) => l.split('\t'))
      .filter(([queue, id]) => !refs.includes(`${queue}\t${id}`))
      .map(([queue, id]) => ({ q: (queue === this.names.P ? 'P' : 'C') as Q, id: id! }));
    if (open.length === 0) this.fail(`${pid} is parked though every child's end is recorded`);
    const coming = open.some(({ q, id }) => {
      const w = this.waiters.get(key(q, id));
      const pending = [...this.outbox[q].keys()].some((m) =>
        m.startsWith(`${this.keys.P.tag}\t${pid}\t${this.incCreated.get(inc)}\t${this.names[q]}\t${id}\t`),
      );
      return pending || (w?.pid === pid && w.outcome === '');
    });
    const reused = open.some(({ q, id }) => {
      const w = this.waiters.get(key(q, id));
      return w?.pid === pid && w.inc !== inc;
    });
    if (!coming && reused) this.fail(`${pid} is parked on a child of an earlier job of its id`);
    else if (!coming)
      this.fail(`${pid} is parked for ever: no end of [${open.map((o) => `${o.q}/${o.id}`)}] can reach it`);
  }

  /** The end of a run: a full delivery leaves both outboxes empty, and no parent parked without cause. */
  async finale(): Promise<void> {
    await this.deliver('C', 'full');
    await this.deliver('P', 'full');
    await this.check();
    for (const q of ['P', 'C'] as const)
      if ((await fx.redis.zcard(this.keys[q].wnotify)) > 0)
        this.fail(`${q}'s outbox is not empty after delivery`);
  }
}

function sortObj(o: Record<string, string>): [string, string][] {
  return Object.entries(o).sort(([a], [b]) => (a < b ? -1 : 1));
}

async function play(ops: Op[]): Promise<Harness> {
  const h = new Harness();
  for (const op of ops) await h.step(op);
  await h.finale();
  return h;
}

describe('children model', () => {
  it('children are created once, their ends recorded once, and a parked parent is released exactly when they all ended', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 20, maxLength: 60, size: 'max' }), async (ops) => {
        await play(ops);
      }),
      { numRuns: RUNS },
    );
    // Rarer paths (a tombstone's answer, a duplicate delivery, a stale plan) have named examples below.
    const always = [
      'planned',
      'created',
      'adopted',
      'refusedTaken',
      'parked',
      'resentPark',
      'staleWait',
    ] as const;
    for (const name of [...always, 'ready', 'releasedInline', 'releasedByDelivery', 'purged'] as const)
      expect(seen[name], name).toBeGreaterThan(0);
  }, 120_000);
});

const kid = (q: Q, c: number, ignore = false): Kid => ({ q, c, ignore });
const stateOf = (h: Harness, q: Q, id: string) => h.jobs.get(key(q, id))?.state;

describe('children model: named examples', () => {
  it('a parent parked for children in two tags is released when the last end is delivered, once', async () => {
    const h = await play([
      { op: 'addParent', p: 0 },
      { op: 'run', p: 0, kids: [kid('P', 0), kid('C', 1)], upto: 6, forward: true },
      { op: 'claim', q: 'P' },
      { op: 'claim', q: 'C' },
      { op: 'childEnd', q: 'P', c: 0, how: 'complete' }, // inline: counted, still parked
      { op: 'childEnd', q: 'C', c: 0, how: 'keep0' }, // C's outbox; the child is deleted at once
    ]);
    // play() ended with a full delivery: released, each end recorded once, with its result.
    expect(stateOf(h, 'P', 'p1')).toBe('w');
    expect(h.parents.get('p1')!.ends.sort()).toEqual([
      `${h.names.C}\tk2\tc\t{"r":2}`,
      `${h.names.P}\tk1\tc\t{"r":1}`,
    ]);
  });

  it('a delivery cut off before its ZREM, and a second deliverer, count the end once', async () => {
    const h = new Harness();
    for (const op of [
      { op: 'addParent', p: 0 },
      { op: 'run', p: 0, kids: [kid('C', 0)], upto: 6, forward: true },
      { op: 'claim', q: 'C' },
      { op: 'childEnd', q: 'C', c: 0, how: 'complete' },
    ] as Op[])
      await h.step(op);
    expect(stateOf(h, 'P', 'p1')).toBe('b');
    await h.step({ op: 'deliver', q: 'C', mode: 'partial' });
    expect(stateOf(h, 'P', 'p1')).toBe('w');
    expect(await fx.redis.zcard(h.keys.C.wnotify)).toBe(1);
    await h.step({ op: 'deliver', q: 'C', mode: 'dup' });
    expect(h.parents.get('p1')!.ends).toHaveLength(1);
    await h.finale();
  });

  it('a stale run neither plans nor parks; a parked run sending its park again is answered parked', async () => {
    const h = new Harness();
    for (const op of [
      { op: 'addParent', p: 0 },
      { op: 'claim', q: 'P' },
      { op: 'recover' }, // the first run's lease is lost
      { op: 'claim', q: 'P' },
      { op: 'plan', p: 0, stale: true, kids: [kid('P', 0)] },
      { op: 'run', p: 0, kids: [kid('C', 0)], upto: 6, forward: true },
      { op: 'wait', p: 0, stale: false }, // the park sent again
    ] as Op[])
      await h.step(op);
    expect(h.parents.get('p1')!.children).toEqual([`${h.names.C}\tk1\ts`]);
    expect(stateOf(h, 'P', 'p1')).toBe('b');
    // Budget: the park gave the attempt back (base + 1), and no snooze was counted (checked per step).
    expect(h.jobs.get(key('P', 'p1'))).toMatchObject({ attempts: 1, base: 1 });
    await h.finale();
  });

  it('a replay adds nothing for a child whose end is undelivered: its tombstone answers', async () => {
    const h = await play([
      { op: 'addParent', p: 0 },
      { op: 'run', p: 0, kids: [kid('C', 0)], upto: 3, forward: false }, // cut off before the mark
      { op: 'claim', q: 'C' },
      { op: 'childEnd', q: 'C', c: 0, how: 'keep0' }, // ended and deleted; the end is in C's outbox
      { op: 'recover' },
      { op: 'run', p: 0, kids: [], upto: 6, forward: false }, // the replay: k1 is not created again
    ]);
    expect(seen.tombstoneAnswer).toBeGreaterThan(0);
    expect(stateOf(h, 'C', 'k1')).toBeUndefined();
    expect(stateOf(h, 'P', 'p1')).toBe('w');
  });

  /** Defect found by this model: before the fix, the replay created k1 again (it had run already). */
  it('a replay an hour after a child ended and was deleted does not create the child again', async () => {
    const h = await play([
      { op: 'addParent', p: 0 },
      { op: 'run', p: 0, kids: [kid('C', 0)], upto: 3, forward: true }, // cut off before the mark
      { op: 'claim', q: 'C' },
      { op: 'childEnd', q: 'C', c: 0, how: 'keep0' },
      { op: 'purge' }, // delivered, then the tombstone purged
      { op: 'recover' },
      { op: 'run', p: 0, kids: [], upto: 6, forward: true },
    ]);
    expect(stateOf(h, 'C', 'k1')).toBeUndefined();
    expect(stateOf(h, 'P', 'p1')).toBe('a'); // its wait answered ready
  });

  /**
   * Defect found by this model (seed -1569848711 of a 2 000-run soak, the 33rd run): a parent that
   * ended did not record its children's ends, so once retried it parked for an end that had come
   * and would never come again.
   */
  it('a parked parent cancelled, then retried after its child ended, is not parked for ever', async () => {
    const h = await play([
      { op: 'addParent', p: 0 },
      { op: 'run', p: 0, kids: [kid('P', 0)], upto: 6, forward: true },
      { op: 'claim', q: 'P' },
      { op: 'cancel', q: 'P', id: 0 },
      { op: 'childEnd', q: 'P', c: 0, how: 'complete' },
      { op: 'retry', q: 'P', id: 0 },
      { op: 'run', p: 0, kids: [], upto: 6, forward: true },
    ]);
    expect(stateOf(h, 'P', 'p1')).toBe('a');
    expect(h.parents.get('p1')!.ends).toEqual([`${h.names.P}\tk1\tc\t{"r":1}`]);
  });

  it('an existing job that ended is adopted as a child, and one of another parent is refused', async () => {
    const h = await play([
      { op: 'plainAdd', q: 'C', c: 0 },
      { op: 'claim', q: 'C' },
      { op: 'childEnd', q: 'C', c: 0, how: 'complete' },
      { op: 'addParent', p: 0 },
      { op: 'addParent', p: 1 },
      { op: 'run', p: 0, kids: [kid('C', 0)], upto: 6, forward: true }, // adopted: its end goes to p1
      { op: 'run', p: 1, kids: [kid('C', 0)], upto: 6, forward: true }, // SURETY_CHILD_TAKEN
    ]);
    expect(h.parents.get('p1')!.ends).toEqual([`${h.names.C}\tk1\tc\t{"r":1}`]);
    expect(h.parents.get('p2')!.step).toBe('planned');
  });

  it('a parked parent removed or cancelled takes no end; its children end and the outbox empties', async () => {
    const h = await play([
      { op: 'addParent', p: 0 },
      { op: 'addParent', p: 1 },
      { op: 'run', p: 0, kids: [kid('C', 0)], upto: 6, forward: true },
      { op: 'run', p: 1, kids: [kid('C', 1)], upto: 6, forward: true },
      { op: 'remove', q: 'P', id: 0 },
      { op: 'cancel', q: 'P', id: 1 },
      { op: 'claim', q: 'C' },
      { op: 'childEnd', q: 'C', c: 0, how: 'complete' },
      { op: 'childEnd', q: 'C', c: 1, how: 'dead' },
    ]);
    expect(stateOf(h, 'P', 'p1')).toBeUndefined();
    expect(stateOf(h, 'P', 'p2')).toBe('x');
    expect(await fx.redis.zcard(h.keys.C.wnotify)).toBe(0);
  });

  /**
   * Found by this model: `waiters` knew a parent by its id alone, so a new job of a removed parent's id
   * that names the same child id (an id derived from the parent's) was answered with the old child,
   * and nothing ever told it that child's end. The line now carries the parent's creation time: the
   * new job is another parent, and its add is refused (the old child stays the old parent's).
   */
  it('a new job of a removed parent id naming the same child is refused, not parked for ever', async () => {
    const h = await play([
      { op: 'addParent', p: 0 },
      { op: 'run', p: 0, kids: [kid('C', 0)], upto: 6, forward: true },
      { op: 'claim', q: 'C' },
      { op: 'childEnd', q: 'C', c: 0, how: 'complete' },
      { op: 'deliver', q: 'C', mode: 'full' },
      { op: 'run', p: 0, kids: [], upto: 6, forward: true }, // ready
      { op: 'parentEnd', p: 0, how: 'complete' },
      { op: 'remove', q: 'P', id: 0 },
      { op: 'addParent', p: 0 },
      { op: 'run', p: 0, kids: [kid('C', 0)], upto: 6, forward: true }, // answered k1,0,c; parks
    ]);
    expect(stateOf(h, 'P', 'p1')).not.toBe('b');
  });
});
