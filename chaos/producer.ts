/**
 * The producer: adds `total` jobs spread over the chaos phase, in bursts of addBulk and of concurrent
 * single adds. Every add whose promise resolved is "accepted" (it must end completed or dead); an add
 * that rejected, or had not settled when production ended, is "unknown" (it may or may not exist).
 */
import type { AddedJob, JobOptions, Queue } from '../src/index.js';
import {
  type FlowChild,
  type JobData,
  type Kind,
  maxAttemptsOf,
  type SignalWait,
  UNGROUPED_KINDS,
} from './behaviour.js';
import { type FlowDefaults, planFlow } from './flow-plan.js';
import type { Rng } from './rng.js';
import { type PlannedSend, planSignals } from './signal-plan.js';

export interface AddRecord {
  seq: number;
  kind: Kind;
  /** Explicit id (duplicate-id and signal kinds), else the id Redis generated (accepted adds only). */
  id?: string;
  /** Accepted adds: whether this add created the job. */
  isNew?: boolean;
  /** Accepted adds: the add leased the new job to an idle worker at once (a handoff: state active). */
  handedOff?: boolean;
  /** Earliest time the job may start (epoch ms): call time + delayMs, or runAt. 0 = at once. */
  notBefore: number;
  /** Unknown adds: why, and the error's code if it had one. */
  reason?: string;
  code?: string;
  /** When the add was sent (epoch ms): it was applied in Redis after this. */
  sentAt?: number;
  /** Accepted adds: the state the add answered (for a dedupe add that found the key held: the holder's). */
  state?: string;
  /** The job's initial delay (kind d) or runAt (kind r), to place it in its group's order by due time. */
  delayMs?: number;
  runAt?: number;
  group?: string;
  /** Kinds t, w and l: the dedupe key, mode and window (l: keepLastIfActive). */
  dedupe?: { key: string; mode: 'throttle' | 'debounce'; ttlMs?: number; keepLastIfActive?: true };
  /** Added with lifo: true (a share of the ungrouped kinds that take no dedupe key). */
  lifo?: boolean;
  /** Accepted adds: when the add's promise resolved (Date.now()): it was applied in Redis before this. */
  repliedAt?: number;
  /** Kind e: the job's expiry (epoch ms; for ttlMs: sentAt + ttlMs, which Redis's is a little after). */
  expireAt?: number;
  ttlMs?: number;
  /** Added through the producer Queue whose tracer throws at random. */
  traced?: boolean;
  /** Ids of the parents-queue jobs this add named in dependsOn `{ queue, id }` (cross-queue children). */
  xdeps?: string[];
  /** Added with ignoreDependencyFailure (cross-queue children only). */
  ignoreDep?: true;
  /** Kind a: its waits (data.sw) and the signals planned for it (chaos/signaller.ts). */
  waits?: SignalWait[];
  sends?: PlannedSend[];
  /** Kind p: its children (as in data.fl) and the signals planned for each sig child, by index. */
  flow?: FlowChild[];
  flowSends?: (PlannedSend[] | undefined)[];
}

/**
 * Codes of refused adds that may still have been applied (documented in docs/errors.md): any other
 * coded refusal means nothing was written, which the verdict checks.
 */
export const MAYBE_APPLIED_CODES: readonly string[] = ['ERR_CONNECTION', 'ERR_DURABILITY', 'ERR_CLOSED'];

/**
 * A job of the parents queue: `p` its number; `f` set for one whose every attempt throws. A flow
 * child of that queue (chaos/flow-plan.ts) has p 0 and names its parent (`fp`) and its index (`ci`).
 */
export interface ParentData {
  p: number;
  f?: 1;
  fp?: string;
  ci?: number;
}

/** An accepted add to the parents queue. */
export interface ParentRecord {
  id: string;
  p: number;
  fails: boolean;
  sentAt: number;
}

/** Share of the adds (of the kinds below, ungrouped) that name parents of the other queue. */
const CROSS_SHARE = 0.03;
/** Kinds a cross-queue child may have: no dedupe key, no explicit id, no group (their order is judged). */
const CROSS_KINDS: readonly Kind[] = ['n', 'f', 's', 'd'];
/** Children name parents among the last this many accepted (recent: some still pending, some ended). */
const RECENT_PARENTS = 12;
/** Share of the parents that fail every attempt (they end dead, failing their children). */
const PARENT_FAIL_SHARE = 0.25;

/** Dedupe keys per run: few enough that adds meet a held key often. */
const THROTTLE_KEYS = 40;
const DEBOUNCE_KEYS = 25;
/** Few keys for kind l, so adds meet a running job of their key often. */
const KEEP_LAST_KEYS = 4;
/** Share of the plain ungrouped adds sent with lifo: true. */
const LIFO_SHARE = 0.25;
/** Kinds that may be added with lifo (no dedupe key, no explicit id: their order is judged by none). */
const LIFO_KINDS: readonly Kind[] = ['n', 'f', 'u', 'd', 'r', 's', 'o', 'h', 'b', '1', 'z', 'e'];

interface Item {
  data: JobData;
  opts: JobOptions;
  rec: AddRecord;
  state: 'pending' | 'settled';
}

const MAX_INFLIGHT_BURSTS = 6;
/** An add pending this long no longer counts against the in-flight limit (it may never settle). */
const SLOW_ADD_MS = 3_000;

export class Producer {
  readonly accepted: AddRecord[] = [];
  readonly unknown: AddRecord[] = [];
  /** Adds whose promise neither resolved nor rejected by the end of production. */
  neverSettled = 0;
  private seq = 0;
  private readonly dupIds: string[] = [];
  /** Accepted adds to the parents queue, in the order they were accepted. */
  readonly parents: ParentRecord[] = [];
  /** Parent adds refused or never settled (they may exist: judged only if Redis lists them). */
  parentsUnknown = 0;
  private readonly bursts = new Set<{ since: number; items: Item[] }>();
  /** Draws of the parents queue and the cross-queue share, apart: each seed's other adds stay as they were. */
  private readonly xrng: Rng;
  /** Draws of kind a's waits and signals, apart likewise. */
  private readonly srng: Rng;
  /** Draws of kind p's children, apart likewise. */
  private readonly frng: Rng;
  /** Set when production ends: adds settling later are ignored (already counted as unknown). */
  private closed = false;

  constructor(
    private readonly queue: Queue<JobData>,
    private readonly rng: Rng,
    /** The queue's default lease: hang jobs get a timeout below it and hang well past it. */
    private readonly leaseMs: number,
    /** Share of each job kind (behaviour.ts workloadWeights). */
    private readonly weights: Readonly<Record<Kind, number>>,
    /** The same queue through a Queue whose tracer throws at random (chaos/tracer.ts): a share of the adds go through it. */
    private readonly traced: Queue<JobData> | null = null,
    /** The parents queue (another queue of the same prefix): a share of the adds depend on its jobs. */
    private readonly parentsQueue: Queue<ParentData> | null = null,
    /** The lease and backoff of the queue's defaults, which kind p's children are added with. */
    private readonly flowDefaults: FlowDefaults = { leaseMs, backoffMs: 50 },
  ) {
    this.xrng = rng.fork(35);
    this.srng = rng.fork(36);
    this.frng = rng.fork(37);
  }

  /**
   * Adds a parent job to the parents queue every `gapMs` or so until `until` (epoch ms): plain ones,
   * a share that always fail (maxAttempts 2: they end dead), a third delayed up to 1.5 s (so children
   * added meanwhile find them pending). Resolves when every add has settled (or `settleMs` passed).
   */
  async runParents(until: number, gapMs: number, settleMs: number): Promise<void> {
    const q = this.parentsQueue;
    if (!q) return;
    const pending = new Set<Promise<void>>();
    let n = 0;
    while (Date.now() < until) {
      const data: ParentData = { p: ++n };
      const fails = this.xrng.chance(PARENT_FAIL_SHARE);
      if (fails) data.f = 1;
      const opts: JobOptions = { maxAttempts: fails ? 2 : 3 };
      if (this.xrng.chance(0.33)) opts.delayMs = this.xrng.int(1, 1_500);
      const sentAt = Date.now();
      const call: Promise<void> = q.add(data, opts).then(
        (a) => {
          if (!this.closed) this.parents.push({ id: a.id, p: data.p, fails, sentAt });
        },
        () => {
          this.parentsUnknown++;
        },
      );
      pending.add(call);
      void call.finally(() => pending.delete(call));
      await new Promise((r) =>
        setTimeout(r, this.xrng.int(Math.round(gapMs / 2), Math.round((3 * gapMs) / 2))),
      );
    }
    await Promise.race([Promise.all(pending), new Promise((r) => setTimeout(r, settleMs))]);
  }

  get added(): number {
    return this.seq;
  }

  /** Adds `total` jobs between `t0` and `t0 + durationMs`; resolves when all adds are sent and settled (or given up). */
  /**
   * Adds `n` jobs in addBulk calls of 1 000 and waits for them (to a paused queue: a backlog the first
   * claims meet whole, for runs at high concurrency: claims as large as the options allow).
   */
  async preload(n: number, horizonMs: number, settleMs: number): Promise<void> {
    for (let left = n; left > 0; left -= 1_000) {
      this.send(
        Array.from({ length: Math.min(1_000, left) }, () => this.item(horizonMs)),
        true,
      );
    }
    const deadline = Date.now() + settleMs;
    while (this.bursts.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  }

  async run(total: number, t0: number, durationMs: number, settleMs: number): Promise<void> {
    while (this.seq < total) {
      const elapsed = Date.now() - t0;
      const target = Math.min(total, Math.ceil((total * (elapsed + 200)) / durationMs));
      const busy = [...this.bursts].filter((b) => Date.now() - b.since < SLOW_ADD_MS).length;
      if (this.seq >= target || busy >= MAX_INFLIGHT_BURSTS) {
        await new Promise((r) => setTimeout(r, 10));
        continue;
      }
      const bulk = this.rng.chance(0.6);
      const size = Math.min(total - this.seq, bulk ? this.rng.int(20, 400) : this.rng.int(1, 25));
      const remainingMs = Math.max(0, t0 + durationMs - Date.now());
      const items = Array.from({ length: size }, () => this.item(remainingMs));
      this.send(items, bulk);
    }
    const deadline = Date.now() + settleMs;
    while (this.bursts.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    this.closed = true;
    for (const b of this.bursts) {
      for (const it of b.items) {
        if (it.state === 'pending') {
          this.unknown.push({
            ...it.rec,
            reason: `never settled (still pending ${settleMs} ms after the last add)`,
          });
          this.neverSettled++;
        }
      }
    }
  }

  private item(remainingMs: number): Item {
    const kind = this.rng.weighted(this.weights);
    const data: JobData = { s: ++this.seq, k: kind };
    const opts: JobOptions = { maxAttempts: maxAttemptsOf(kind) };
    if (kind === 'g') opts.backoff = { type: 'custom', name: 'giveUp' };
    const rec: AddRecord = { seq: data.s, kind, notBefore: 0 };
    const now = Date.now();
    const horizon = Math.max(50, Math.min(10_000, remainingMs));
    if (kind === 'd') {
      opts.delayMs = this.rng.int(1, horizon);
      rec.notBefore = now + opts.delayMs; // Redis reads its clock after this call: its due time is later.
    } else if (kind === 'r') {
      opts.runAt = now + this.rng.int(1, horizon);
      rec.notBefore = opts.runAt as number;
    } else if (kind === 'h') {
      opts.timeoutMs = this.rng.int(Math.round(this.leaseMs / 4), this.leaseMs);
      data.h = 2 * this.leaseMs + this.rng.int(0, 1_000);
    } else if (kind === 'i') {
      const reuse = this.dupIds.length > 0 && this.rng.chance(0.5);
      const id = reuse ? this.rng.pick(this.dupIds) : `dup-${this.dupIds.length + 1}`;
      if (!reuse) this.dupIds.push(id);
      opts.id = id;
      rec.id = id;
    } else if (kind === 'e') {
      // Expiring: a snooze of its first run (behaviour.ts), often past the expiry.
      const ttl = this.rng.int(100, 4_000);
      if (this.rng.chance(0.5)) {
        opts.ttlMs = ttl;
        rec.ttlMs = ttl;
      } else {
        opts.expireAt = now + ttl;
        rec.expireAt = now + ttl;
      }
      data.zs = this.rng.int(20, 2 * ttl);
    } else if (kind === 't') {
      const key = `t${this.rng.int(1, THROTTLE_KEYS)}`;
      const ttlMs = this.rng.chance(0.3) ? this.rng.int(200, 3_000) : undefined;
      opts.dedupe = ttlMs === undefined ? { key } : { key, ttlMs };
      rec.dedupe = { key, mode: 'throttle', ...(ttlMs === undefined ? {} : { ttlMs }) };
      data.dk = key;
    } else if (kind === 'w') {
      const key = `w${this.rng.int(1, DEBOUNCE_KEYS)}`;
      opts.dedupe = { key, mode: 'debounce' };
      opts.delayMs = this.rng.int(50, 1_500);
      rec.delayMs = opts.delayMs;
      rec.notBefore = now + opts.delayMs;
      rec.dedupe = { key, mode: 'debounce' };
      data.dk = key;
      data.zs = this.rng.int(100, 1_500);
    } else if (kind === 'l') {
      const key = `l${this.rng.int(1, KEEP_LAST_KEYS)}`;
      opts.dedupe = { key, mode: 'debounce', keepLastIfActive: true };
      rec.dedupe = { key, mode: 'debounce', keepLastIfActive: true };
      if (this.rng.chance(0.5)) {
        opts.delayMs = this.rng.int(1, 300);
        rec.delayMs = opts.delayMs;
        rec.notBefore = now + opts.delayMs;
      }
      // Mostly lifo: a job that waits its turn behind a backlog would rarely meet its key's running
      // one, so a second job started beside it (the fault this kind is here to catch) would go unseen.
      if (this.rng.chance(0.75)) {
        opts.lifo = true;
        rec.lifo = true;
      }
      data.dk = key;
    } else if (kind === 'a') {
      // An explicit id: the signaller reaches the job of an add whose answer was lost, too.
      const plan = planSignals(this.srng, horizon);
      opts.id = `sig-${data.s}`;
      rec.id = opts.id;
      data.sw = plan.waits;
      rec.waits = plan.waits;
      rec.sends = plan.sends;
    } else if (kind === 'p') {
      // An explicit id, so its children's ids (`<id>-c<i>`) are known before it runs.
      const plan = planFlow(this.frng, horizon, this.parentsQueue?.name ?? null);
      opts.id = `flow-${data.s}`;
      rec.id = opts.id;
      data.fl = {
        children: plan.children,
        lease: this.flowDefaults.leaseMs,
        backoff: this.flowDefaults.backoffMs,
      };
      rec.flow = plan.children;
      rec.flowSends = plan.sends;
    }
    if (kind === 'd') rec.delayMs = opts.delayMs as number;
    if (kind === 'r') rec.runAt = opts.runAt as number;
    // A third of the jobs belong to one of 20 groups (run.ts sets their limits), so group slots,
    // rotation and holds go through every fault too. Kinds that snooze or sleep for long, and dedupe
    // (a debounce rewrite moves its job), stay out: they would make g1's order a matter of definition.
    if (!UNGROUPED_KINDS.includes(kind) && this.rng.chance(0.3)) {
      opts.group = `g${this.rng.int(1, 20)}`;
      rec.group = opts.group;
    }
    // Last in, first out for a share of the others (not in groups: g1's FIFO is judged), so the front
    // of the line goes through every fault too: at the add, when due, on retries.
    if (opts.group === undefined && LIFO_KINDS.includes(kind) && this.rng.chance(LIFO_SHARE)) {
      opts.lifo = true;
      rec.lifo = true;
    }
    // A share of the plain ungrouped adds depend on one or two recent parents of the other queue.
    if (
      this.parentsQueue !== null &&
      opts.group === undefined &&
      CROSS_KINDS.includes(kind) &&
      this.parents.length > 0 &&
      this.xrng.chance(CROSS_SHARE)
    ) {
      const recent = this.parents.slice(-RECENT_PARENTS);
      const ids = new Set([this.xrng.pick(recent).id]);
      if (this.xrng.chance(0.4)) ids.add(this.xrng.pick(recent).id);
      rec.xdeps = [...ids];
      opts.dependsOn = rec.xdeps.map((id) => ({ queue: this.parentsQueue!.name, id }));
      if (this.xrng.chance(0.3)) {
        opts.ignoreDependencyFailure = true;
        rec.ignoreDep = true;
      }
    }
    return { data, opts, rec, state: 'pending' };
  }

  private send(items: Item[], bulk: boolean): void {
    const burst = { since: Date.now(), items };
    this.bursts.add(burst);
    // A fifth of the calls go through the Queue whose tracer throws (an add that wrote must resolve).
    const traced = this.traced !== null && this.rng.chance(0.2);
    const queue = traced && this.traced ? this.traced : this.queue;
    for (const it of items) {
      it.rec.sentAt = burst.since;
      if (traced) it.rec.traced = true;
    }
    const groups: [Item[], Promise<AddedJob[]>][] = bulk
      ? [[items, queue.addBulk(items.map(({ data, opts }) => ({ data, opts })))]]
      : items.map((it) => [[it], queue.add(it.data, it.opts).then((r) => [r])]);
    for (const [group, call] of groups) {
      call.then(
        (added) => this.accept(group, added),
        (err: unknown) =>
          this.reject(
            group,
            String((err as Error)?.message ?? err).slice(0, 120),
            (err as { code?: unknown })?.code,
          ),
      );
    }
  }

  /** Forgets bursts whose every add has settled. */
  private prune(): void {
    for (const b of this.bursts) if (b.items.every((i) => i.state === 'settled')) this.bursts.delete(b);
  }

  private reject(items: Item[], reason: string, code: unknown): void {
    if (this.closed) return;
    for (const it of items) {
      this.unknown.push({ ...it.rec, reason, ...(typeof code === 'string' ? { code } : {}) });
      it.state = 'settled';
    }
    this.prune();
  }

  private accept(items: Item[], added: AddedJob[]): void {
    if (this.closed) return;
    items.forEach((it, i) => {
      const a = added[i]!;
      it.rec.id = a.id;
      it.rec.isNew = a.isNew;
      it.rec.state = a.state;
      it.rec.repliedAt = Date.now();
      if (a.isNew && a.state === 'active') it.rec.handedOff = true;
      this.accepted.push(it.rec);
      it.state = 'settled';
    });
    this.prune();
  }
}
