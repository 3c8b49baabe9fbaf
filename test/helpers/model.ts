/**
 * An in-memory reference model of one queue's state machine, written from docs/design.md and the
 * script headers, not from the Lua code. test/model/state-machine.model.test.ts runs random operations against it and
 * against the real scripts and compares the two after every step: a divergence is a bug in one of them.
 *
 * Waiting jobs are kept as one line per priority; claim takes the lines in priority order
 * (negative first, then 0, then positive), which is what the prio zset scores and the waiting list
 * implement together. A job joins the back of its line, or the front when it is lifo (each time it
 * becomes waiting) or put back (recovered, released, rate-limited).
 */

/** `b` (blocked): here only a dedupe successor waiting behind its key's running job (keepLastIfActive). */
export type Letter = 'w' | 'd' | 'b' | 'a' | 'c' | 'x';
export const STATE_NAMES = {
  w: 'waiting',
  d: 'delayed',
  b: 'blocked',
  a: 'active',
  c: 'completed',
  x: 'dead',
} as const satisfies Record<Letter, string>;

export interface ModelConfig {
  now: number;
  /** `defaultLeaseMs` argument of claim/extend: the lease of jobs added without `leaseMs`. */
  defaultLeaseMs: number;
  /** `defaultMaxAttempts` argument of fail/recover. */
  defaultMaxAttempts: number;
  /** Retention of completed and dead jobs (the same rule for both). */
  keepCount: number;
  keepAgeMs: number;
  /** Where the generated-id counter starts (the `ids` key as seeded): 0 for a new queue. */
  idStart?: number;
}

export interface ModelJobOptions {
  priority: number;
  maxAttempts?: number | undefined;
  leaseMs?: number | undefined;
  /** Epoch ms after which it must not start (ttlMs or expireAt, on the add script's clock). */
  expireAt?: number | undefined;
  /** Last in, first out: the front of its line each time it becomes waiting. */
  lifo?: boolean | undefined;
}

/**
 * A dedupe add (docs/groups.md): throttle (`t`) or debounce (`d`), with a window of `windowMs` or
 * none (throttle: until the job finishes; debounce: while it has not started); `k` is debounce with
 * keepLastIfActive (never a window): while the key's job runs or has started, the add becomes its one
 * pending successor, blocked behind it until it ends.
 */
export interface ModelDedupe {
  key: string;
  mode: 't' | 'd' | 'k';
  windowMs?: number | undefined;
}

/** A dedupe key as Redis holds it: the id of the job that took it, and when its window ends (null: none). */
export interface DedupeKey {
  holder: string;
  until: number | null;
}

/**
 * One claim as the model sees it: the job id, which incarnation of that id was claimed (an id is free
 * again after remove or retention, and may be added anew) and the attempt number. The real fencing
 * token is opaque (a lease id unique in the queue's history); the model only needs to know which claim
 * a token came from.
 */
export interface Held {
  id: string;
  incarnation: number;
  /** The job's attempts as claimed (this attempt is counted later, by its start mark). */
  attempt: number;
  /** Which claim of this incarnation (1, 2, ...): what the opaque token identifies. */
  lease: number;
}

export interface ModelError {
  at: number;
  attempt: number;
  code: string;
}

/** How a fail row is sent: E a failure (error JSON), S a snooze, R a rate limit (see fail.lua). */
export type FailKind = 'E' | 'S' | 'R';

export interface ModelJob {
  id: string;
  incarnation: number;
  state: Letter;
  attempts: number;
  /** Starts not charged: those before the last retry() (the budget restarts there), plus snoozes and rate limits. */
  base: number;
  /** Unmarked lease losses (no start mark) recover returned free. */
  refunds: number;
  /** Snoozes (fail rows of kind S). */
  snoozes: number;
  priority: number;
  maxAttempts: number | undefined;
  leaseMs: number | undefined;
  /** Added with lifo: true. */
  lifo: boolean;
  /** Delayed jobs: due time. */
  dueAt: number;
  /** When it was added, on the add script's clock: due ties are promoted in add order. */
  createdAt: number;
  /** Active jobs: lease deadline. */
  leaseUntil: number;
  startedAt: number | undefined;
  finishedAt: number | undefined;
  /** What add() stored; changes only when a debounce add rewrites the job (a new incarnation). */
  data: unknown;
  /** Its expireAt (undefined: never expires); a manual retry clears it. */
  expireAt: number | undefined;
  /** The dedupe key its record names (it frees the key when it ends), if any. */
  dedupe: string | undefined;
  /** A blocked dedupe successor: the id of the running job it waits behind (keepLastIfActive). */
  behind: string | undefined;
  errors: ModelError[];
  /**
   * The attempt whose claim's token the record still carries: set by claim, kept by complete and fail
   * (so a re-sent outcome is recognised), cleared when the lease is revoked (recover, cancel, retry).
   */
  tokenOf: number | null;
  /** Claims of this incarnation so far: the lease number of the next claim minus one. */
  leases: number;
  /** Signals sent to it and not taken (annex `\x01g`), in arrival order: name and payload JSON ('' = undefined). */
  signals: { name: string; json: string }[];
  /** Its durable steps (annex `\x01s`) as lines in write order: here only the waits' `~wait:<n>` and `~signal:<n>`. */
  steps: [string, string][];
  /**
   * Parked (wait-signal.lua) and still so: delayed at its wait's due time, waiting for signal `name`
   * until `deadline` (null: without end). Any other way out of that delay (falling due, promote,
   * changeDelay, cancel) ends the park: a signal of that name is then only kept.
   */
  parked: { name: string; deadline: number | null } | null;
}

export type AdminReply = 'OK' | 'NOT_FOUND' | `INVALID_STATE:${Letter}`;

/** A parked job waiting without a deadline sits in `delayed` at this score: never due (Date's maximum). */
export const NEVER = 8_640_000_000_000_000;

/** wait-signal.lua's reply: [outcome, payload JSON | deadline | ''] */
export type WaitSignalReply = ['taken' | 'timeout' | 'stored' | 'parked' | 'stale', string];
/** signal.lua's reply: [outcome, state letter | ''] */
export type SignalReply = ['kept' | 'woke' | 'ended' | 'missing' | 'full', string];

/**
 * A job brought in from BullMQ (import-bullmq.lua, import-copy.lua; includes/write_imported.lua), as
 * the migration maps it: state waiting, delayed until `due` or dead since `finished`, created at
 * BullMQ's timestamp, with `attempts` starts already charged to its budget and its error lines.
 */
export interface ModelImport {
  state: 'w' | 'd' | 'x';
  created: number;
  /** Delayed jobs: due time. */
  due?: number | undefined;
  /** Dead jobs: finish time. */
  finished?: number | undefined;
  priority: number;
  maxAttempts: number;
  lifo: boolean;
  attempts: number;
  errors: ModelError[];
  data: unknown;
  /** BullMQ's id counter: the generated-id counter is raised to it (undefined: left). */
  idFloor?: number | undefined;
}

/** What import-bullmq.lua's take of the BullMQ job finds (includes/bullmq_take.lua), the id aside. */
export type BullTake = 'moved' | 'changed' | 'gone';

export const WORKER_ERROR_CODE = 'E_MODEL';
const LEASE_EXPIRED = 'ERR_LEASE_EXPIRED';
const CANCELLED = 'ERR_CANCELLED';
const EXPIRED = 'ERR_EXPIRED';

/** Redis orders equal scores by member, bytewise; ids here are ASCII, where JS order is the same. */
function byMember(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * One unit of a fetcher's registration for handoffs (claim.lua): member `<fetcher>|<nonce>|<unit>` of
 * `idle`, until `deadline`.
 */
export interface Registration {
  fetcher: string;
  member: string;
  deadline: number;
}

/** A claim's ticket (claim.lua's claimer, nonce): `r<nonce>` sends again a claim whose reply was lost. */
export interface ClaimTicket {
  claimer: string;
  nonce: string;
}

/** One field of the `claims` hash: a claim's or a registration's leased jobs, and their latest deadline. */
interface LeaseRecord {
  nonce: string;
  held: Held[];
  expiry: number;
}

/** What a claim says about handoffs (claim.lua's fetcher .. received). */
export interface HandoffClaim {
  fetcher: string;
  nonce: string;
  withdraw: string | null;
  registerMs: number;
  registerUnits: number;
  withdrawUnits: number;
  received: number;
}

export class QueueModel {
  now: number;
  paused = false;
  /** Registration units, in no order (add takes the latest deadline, then highest member). */
  registrations: Registration[] = [];
  /**
   * Per fetcher, the jobs handed off with its last registration that had any (its `.h` record), and
   * the latest lease deadline among them (the record's expiry).
   */
  readonly handoffs = new Map<string, LeaseRecord>();
  /** Per claimer, its last claim that leased jobs (includes/record_claim.lua), for a retry's replay. */
  readonly tickets = new Map<string, LeaseRecord>();
  /** Fetchers nobody listens for any more: a handoff to them finds no receiver and writes nothing. */
  readonly gone = new Set<string>();
  /** A RateLimitError's pause (fail row of kind R): no claims before this time (meta `limited`). */
  limitedUntil = 0;
  readonly jobs = new Map<string, ModelJob>();
  /**
   * The `expiring` index: id -> expireAt. An add puts a job with an expiry in; a start mark, expiry
   * and a debounce rewrite take it out, and the sweep drops the entries it finds due whose job started,
   * finished or is gone (remove, complete, cancel, retry and retention leave them to it).
   */
  readonly expiring = new Map<string, number>();
  /** Dedupe keys held (docs/groups.md). A window ends on the model's clock (the harness deletes the key). */
  readonly dedupeKeys = new Map<string, DedupeKey>();
  /**
   * keepLastIfActive: key -> the id its `dn:` string names (the pending successor). The scripts check
   * it where they read it (the successor must still be blocked behind the key's holder) and delete a
   * stale one there, so the model keeps stale names exactly as long as Redis does.
   */
  readonly dedupeNext = new Map<string, string>();
  /** The `imported` hash: id -> fingerprint of a copy (import-copy.lua) whose original is not yet taken. */
  readonly imported = new Map<string, string>();
  /**
   * Held copies (import-copy.lua): in `jobs` with their record, but in no line or sorted set until
   * import-release.lua places them (or import-undo.lua deletes them). Counts and scores leave them out.
   */
  readonly heldCopies = new Set<string>();
  /** priority -> waiting ids of that priority, in claim order. */
  private readonly lines = new Map<number, string[]>();
  private idCounter = 0;
  private incarnations = 0;

  constructor(readonly cfg: ModelConfig) {
    this.now = cfg.now;
    this.idCounter = cfg.idStart ?? 0;
  }

  // ---- reads -------------------------------------------------------------------------------------

  /** Waiting ids in the order claim takes them. */
  waitingOrder(): string[] {
    const prios = [...this.lines.keys()].sort((a, b) => a - b);
    return prios.flatMap((p) => this.lines.get(p)!);
  }

  counts(): Record<'waiting' | 'delayed' | 'blocked' | 'active' | 'completed' | 'dead', number> {
    const n = { waiting: 0, delayed: 0, blocked: 0, active: 0, completed: 0, dead: 0 };
    for (const j of this.jobs.values()) if (!this.heldCopies.has(j.id)) n[STATE_NAMES[j.state]]++;
    return n;
  }

  /**
   * [id, score] of the jobs in one state, in zset order (score, then member): lease deadline (active),
   * due time (delayed), finish time (completed, dead).
   */
  scored(state: 'a' | 'd' | 'c' | 'x'): [string, number][] {
    const score = (j: ModelJob) => (state === 'a' ? j.leaseUntil : state === 'd' ? j.dueAt : j.finishedAt!);
    return [...this.jobs.values()]
      .filter((j) => j.state === state && !this.heldCopies.has(j.id))
      .map((j): [string, number] => [j.id, score(j)])
      .sort((a, b) => a[1] - b[1] || byMember(a[0], b[0]));
  }

  private leaseOf(j: ModelJob): number {
    return j.leaseMs ?? this.cfg.defaultLeaseMs;
  }

  private attemptsLeft(j: ModelJob): boolean {
    return j.attempts - j.base < (j.maxAttempts ?? this.cfg.defaultMaxAttempts);
  }

  // ---- waiting lines -----------------------------------------------------------------------------

  private enqueue(j: ModelJob): void {
    const wasDelayed = j.state === 'd';
    this.promoteDue();
    // A delayed job that was due is placed by the promotion, in due order.
    if (wasDelayed && j.state === 'w') return;
    this.push(j);
  }

  /** Back of its line; a lifo job, the front (each time it becomes waiting: docs/data-layout.md). */
  private push(j: ModelJob): void {
    j.state = 'w';
    j.parked = null;
    const line = this.lines.get(j.priority) ?? [];
    if (j.lifo) line.unshift(j.id);
    else line.push(j.id);
    this.lines.set(j.priority, line);
  }

  /**
   * Recovered jobs go back to the front of the line (design.md: "front of the line"; recover.lua: "the
   * oldest expired job first in line"): ahead of every waiting job of their priority, oldest lease first.
   */
  private enqueueFront(batch: ModelJob[]): void {
    if (batch.length === 0) return;
    this.promoteDue();
    const byPrio = new Map<number, string[]>();
    for (const j of batch) {
      j.state = 'w';
      byPrio.set(j.priority, [...(byPrio.get(j.priority) ?? []), j.id]);
    }
    for (const [p, ids] of byPrio) this.lines.set(p, [...ids, ...(this.lines.get(p) ?? [])]);
  }

  private unqueue(j: ModelJob): void {
    const line = this.lines.get(j.priority) ?? [];
    const i = line.indexOf(j.id);
    if (i >= 0) line.splice(i, 1);
    if (line.length === 0) this.lines.delete(j.priority);
  }

  private delete(j: ModelJob): void {
    if (j.state === 'w') this.unqueue(j);
    this.jobs.delete(j.id);
  }

  // ---- transitions -------------------------------------------------------------------------------

  /** A new incarnation of job `jobId` in the jobs map, waiting, not yet in any line. */
  private createJob(
    jobId: string,
    opts: ModelJobOptions,
    dueAt: number | null,
    data: unknown,
    scriptNow: number,
  ): ModelJob {
    const j: ModelJob = {
      id: jobId,
      incarnation: ++this.incarnations,
      state: 'w',
      attempts: 0,
      base: 0,
      refunds: 0,
      snoozes: 0,
      priority: opts.priority,
      maxAttempts: opts.maxAttempts,
      leaseMs: opts.leaseMs,
      lifo: opts.lifo === true,
      dueAt: dueAt ?? this.now,
      createdAt: scriptNow,
      leaseUntil: 0,
      startedAt: undefined,
      finishedAt: undefined,
      data,
      expireAt: opts.expireAt,
      dedupe: undefined,
      behind: undefined,
      errors: [],
      tokenOf: null,
      leases: 0,
      signals: [],
      steps: [],
      parked: null,
    };
    this.jobs.set(jobId, j);
    return j;
  }

  /**
   * add: idempotent by id while the job exists; generated ids are the counter's next numbers, skipping
   * ids that exist and the explicit ids of the same call (`reserved`).
   */
  add(
    id: string | null,
    opts: ModelJobOptions,
    dueAt: number | null,
    data: unknown,
    reserved: ReadonlySet<string> = new Set(),
    /** Given when the add goes by add-one.lua: the lease of a job it hands off without leaseMs of its own. */
    handoffLeaseMs?: number,
    /** The add script's clock, when it is not the model's (queue.add reads Redis's TIME). */
    scriptNow = this.now,
    /** A bulk add pushes its new waiting jobs at the end of the call, after promoting (addBulk). */
    deferred?: ModelJob[],
  ): { id: string; isNew: boolean; state: Letter; handedTo?: { fetcher: string; held: Held } } {
    // A job with an expiry is never handed off (add-one.lua).
    const taker =
      handoffLeaseMs !== undefined && (dueAt === null || dueAt <= this.now) && opts.expireAt === undefined
        ? this.takeIdle(scriptNow)
        : null;
    let jobId = id;
    if (jobId === null) {
      do jobId = String(++this.idCounter);
      while (this.jobs.has(jobId) || reserved.has(jobId));
    }
    const existing = this.jobs.get(jobId);
    if (existing) {
      if (taker) this.registrations.push(taker);
      return { id: jobId, isNew: false, state: existing.state };
    }
    const j = this.createJob(jobId, opts, dueAt, data, scriptNow);
    if (taker && !this.gone.has(taker.fetcher)) {
      // Handed off: leased in the add, as a claim would lease it (not started, lease 1 of this incarnation).
      j.state = 'a';
      j.startedAt = undefined;
      j.leases = 1;
      j.tokenOf = 1;
      j.leaseUntil = this.now + (j.leaseMs ?? handoffLeaseMs!);
      const held = { id: jobId, incarnation: j.incarnation, attempt: 0, lease: 1 };
      const nonce = taker.member.split('|')[1]!;
      const record = this.handoffs.get(taker.fetcher);
      if (record?.nonce === nonce) {
        record.held.push(held);
        record.expiry = Math.max(record.expiry, j.leaseUntil);
      } else {
        this.handoffs.set(taker.fetcher, { nonce, held: [held], expiry: j.leaseUntil });
        if (!record) this.pruneClaims();
      }
      return { id: jobId, isNew: true, state: 'a', handedTo: { fetcher: taker.fetcher, held } };
    }
    // (A registration whose fetcher is gone was taken and dropped: nobody received the job.)
    if (j.expireAt !== undefined) this.expiring.set(jobId, j.expireAt);
    if (dueAt !== null && dueAt > this.now) j.state = 'd';
    // Lifo ones too: add.lua puts them at the front at once, after promoting, and pushes at the front
    // and at the back commute, so pushing all at the end of the call gives the same line.
    else if (deferred) deferred.push(j);
    else {
      // Jobs due by the add script's clock are claimable first (includes/enqueue.lua promote_due).
      this.promoteDue(scriptNow);
      this.enqueue(j);
    }
    return { id: jobId, isNew: true, state: j.state };
  }

  /** addBulk: the items in order, as one call (its explicit ids are reserved from generation). */
  addBulk(
    items: { id: string | null; opts: ModelJobOptions; data: unknown }[],
    scriptNow = this.now,
  ): { id: string; isNew: boolean; state: Letter }[] {
    const reserved = new Set(items.flatMap((it) => (it.id === null ? [] : [it.id])));
    const deferred: ModelJob[] = [];
    const out = items.map((it) =>
      this.add(it.id, it.opts, null, it.data, reserved, undefined, scriptNow, deferred),
    );
    if (deferred.length > 0) this.promoteDue(scriptNow);
    for (const j of deferred) this.push(j);
    return out;
  }

  /**
   * An add with a dedupe key (add.lua; docs/groups.md, "Dedupe"), one job per call. A generated id is
   * drawn first, as for any add. An explicit id that exists answers for itself, whatever the key.
   * Otherwise, with the key held: throttle answers the holder, or `completed` when the holder is gone but
   * its window lasts; debounce rewrites a holder that is waiting or delayed and has never started (same
   * id; in every other respect a new job: data, options, due time, expiry, add time, and its window
   * restarts as this add says). keepLastIfActive (`k`) first rewrites the key's pending successor if it
   * has one; else, with the holder active or started and unfinished, adds a successor blocked behind it
   * (the key stays with the holder). In every other case a new job is added and takes the key.
   */
  addDedupe(
    id: string | null,
    opts: ModelJobOptions,
    dueAt: number | null,
    data: unknown,
    d: ModelDedupe,
  ): { id: string; isNew: boolean; state: Letter } {
    let jobId = id;
    if (jobId === null) {
      do jobId = String(++this.idCounter);
      while (this.jobs.has(jobId));
    }
    const existing = this.jobs.get(jobId);
    if (existing) return { id: jobId, isNew: false, state: existing.state };
    const held = this.dedupeKeys.get(d.key);
    const holder = held && this.jobs.get(held.holder);
    const debounce = d.mode === 'd' || d.mode === 'k';
    const successor = d.mode === 'k' && holder ? this.successorOf(d.key, holder.id) : undefined;
    let isNew = true;
    let behind: string | undefined;
    if (successor) {
      // The pending successor, rewritten in place: a new incarnation, still behind the holder.
      jobId = successor.id;
      this.delete(successor);
      this.expiring.delete(jobId);
      behind = holder!.id;
      isNew = false;
    } else if (
      debounce &&
      holder &&
      (holder.state === 'w' || holder.state === 'd') &&
      !this.started(holder)
    ) {
      // A new incarnation under the holder's id: tokens of the old one never match it.
      jobId = holder.id;
      this.delete(holder);
      this.expiring.delete(jobId);
      isNew = false;
    } else if (
      d.mode === 'k' &&
      holder &&
      (holder.state === 'a' || holder.state === 'w' || holder.state === 'd')
    ) {
      behind = holder.id;
    } else if (d.mode === 't' && held) {
      if (holder) return { id: holder.id, isNew: false, state: holder.state };
      if (held.until !== null) return { id: held.holder, isNew: false, state: 'c' };
    }
    if (behind !== undefined) {
      // Blocked behind the running job: not in any line, nothing promoted by this add.
      const j = this.createJob(jobId, opts, dueAt, data, this.now);
      j.state = 'b';
      j.behind = behind;
      j.dedupe = d.key;
      if (j.expireAt !== undefined) this.expiring.set(jobId, j.expireAt);
      this.dedupeNext.set(d.key, jobId);
      return { id: jobId, isNew, state: 'b' };
    }
    this.add(jobId, opts, dueAt, data);
    const j = this.jobs.get(jobId)!;
    j.dedupe = d.key;
    this.dedupeKeys.set(d.key, {
      holder: jobId,
      until: d.windowMs === undefined ? null : this.now + d.windowMs,
    });
    return { id: jobId, isNew, state: j.state };
  }

  /**
   * The key's pending successor (includes/dedupe_successor.lua): the job its `dn:` string names, if
   * that job is still blocked behind `holder`; a stale name is deleted.
   */
  private successorOf(key: string, holder: string): ModelJob | undefined {
    const id = this.dedupeNext.get(key);
    if (id === undefined) return undefined;
    const j = this.jobs.get(id);
    if (j?.state === 'b' && j.behind === holder) return j;
    this.dedupeNext.delete(key);
    return undefined;
  }

  /**
   * Jobs `ended` (in the order the script settles them) finished, died or were removed: the successors
   * blocked behind them become waiting (lifo-aware), or delayed when their due time is later
   * (includes/settle_dependents.lua: the link runs whatever the end).
   */
  private releaseSuccessors(ended: readonly ModelJob[]): void {
    for (const h of ended) {
      for (const j of this.jobs.values()) {
        if (j.state !== 'b' || j.behind !== h.id) continue;
        j.behind = undefined;
        if (j.dueAt > this.now) j.state = 'd';
        else this.enqueue(j);
      }
    }
  }

  /** Dedupe windows that ended by now (Redis expires a key when its time has passed): the keys freed. */
  endWindows(): string[] {
    const ended: string[] = [];
    for (const [key, held] of this.dedupeKeys) {
      if (held.until !== null && held.until < this.now) {
        this.dedupeKeys.delete(key);
        ended.push(key);
      }
    }
    return ended;
  }

  /** "Started" (includes/record_started.lua): an attempt was counted, or a start mark is standing. */
  private started(j: ModelJob): boolean {
    return j.attempts > 0 || j.startedAt !== undefined;
  }

  /**
   * Job `j` ended or was removed: it frees the dedupe key it holds. A key with a window outlives its
   * job, unless `withdrawn` (removed or cancelled before it ever started: the window is given back).
   */
  private releaseDedupe(j: ModelJob, withdrawn = false): void {
    if (j.dedupe === undefined) return;
    const held = this.dedupeKeys.get(j.dedupe);
    if (held?.holder !== j.id) {
      // A successor that leaves before its holder ended drops its name; the holder keeps the key.
      if (held && this.dedupeNext.get(j.dedupe) === j.id) this.dedupeNext.delete(j.dedupe);
      return;
    }
    // keepLastIfActive: the pending successor takes the key (it is released in the same script).
    const successor = this.successorOf(j.dedupe, j.id);
    if (successor) {
      this.dedupeNext.delete(j.dedupe);
      this.dedupeKeys.set(j.dedupe, { holder: successor.id, until: null });
      return;
    }
    if (withdrawn || held.until === null) this.dedupeKeys.delete(j.dedupe);
  }

  /** Must not start now (docs/job-control.md, "Expiry"): its time has come and it never started. */
  private expired(j: ModelJob): boolean {
    return j.expireAt !== undefined && j.expireAt <= this.now && j.attempts === 0;
  }

  /** Ends jobs (already out of their line) dead with an ExpiredError; they leave `expiring`. */
  private expireJobs(list: ModelJob[]): void {
    for (const j of list) {
      j.state = 'x';
      j.tokenOf = null;
      j.finishedAt = this.now;
      j.errors.push({ at: this.now, attempt: j.attempts, code: EXPIRED });
      this.expiring.delete(j.id);
      // It never ran: its throttle window is given back, as for a job removed before it started.
      this.releaseDedupe(j, true);
    }
    this.releaseSuccessors(list);
  }

  /**
   * The expiry sweep of the recovery pass (expire.lua): the entries of `expiring` due by now, in index
   * order. A job leased and not started is its worker's (entry kept); a waiting, delayed or blocked one
   * that expired ends dead; any other entry (started, finished, gone, expiry cleared) is dropped.
   */
  expire(): string[] {
    const due = [...this.expiring]
      .filter(([, t]) => t <= this.now)
      .sort((a, b) => a[1] - b[1] || byMember(a[0], b[0]));
    const ended: ModelJob[] = [];
    for (const [id] of due) {
      const j = this.jobs.get(id);
      if (j?.state === 'a' && j.startedAt === undefined) continue;
      if (j && (j.state === 'w' || j.state === 'd' || j.state === 'b') && this.expired(j)) {
        if (j.state === 'w') this.unqueue(j);
        ended.push(j);
      } else this.expiring.delete(id);
    }
    this.expireJobs(ended);
    if (ended.length > 0) this.trim('x');
    return ended.map((j) => j.id);
  }

  /**
   * Jobs due by `at` become waiting, appended to their line in due-time order, ties in add order
   * (createdAt, then the shorter id, then id text). Every transition that makes a job claimable does
   * this first (includes/enqueue.lua promote_due), so a job that fell due goes before jobs made ready
   * after it.
   */
  private promoteDue(at = this.now): void {
    const due = this.scored('d')
      // A parked job without a deadline is never due, whatever a caller's clock (no clock reaches NEVER).
      .filter(([, t]) => t <= at && t < NEVER)
      .map(([id]) => this.jobs.get(id)!)
      .sort(
        (a, b) =>
          a.dueAt - b.dueAt || a.createdAt - b.createdAt || a.id.length - b.id.length || byMember(a.id, b.id),
      );
    for (const j of due) this.push(j);
  }

  /**
   * A field created in `claims` prunes the expired ones (includes/prune_claims.lua): it samples 4
   * fields, and with at most 4 (one handoff record per fetcher, one claim ticket) that is every one.
   */
  private pruneClaims(): void {
    for (const records of [this.handoffs, this.tickets])
      for (const [f, r] of records) if (r.expiry < this.now) records.delete(f);
  }

  /** Of a record's jobs, those still under the very lease it gave them, with their attempts now. */
  private stillHeld(held: readonly Held[]): Held[] {
    return held.flatMap((x) => {
      const j = this.jobs.get(x.id);
      return j && this.holds(j, x) ? [{ ...x, attempt: j.attempts }] : [];
    });
  }

  /**
   * Claims lease jobs with nothing counted (their start marks count them); `freeSlots` sizes the
   * handoff registration. A retried ticket (`r<nonce>`) whose claim is the one recorded returns that
   * claim's jobs still under its leases and claims nothing (`retried`).
   */
  claim(
    count: number,
    freeSlots = count,
    reg?: HandoffClaim,
    ticket?: ClaimTicket,
  ): {
    held: Held[];
    nextDue: number | null;
    paused: boolean;
    registered: number;
    replayed: Held[];
    retried: boolean;
  } {
    const nonce = ticket?.nonce.replace(/^r/, '');
    const record = ticket && this.tickets.get(ticket.claimer);
    if (record && ticket?.nonce.startsWith('r') && record.nonce === nonce) {
      return {
        held: this.stillHeld(record.held),
        nextDue: null,
        paused: false,
        registered: 0,
        replayed: [],
        retried: true,
      };
    }
    const out = this.claimAfresh(count, freeSlots, reg);
    if (ticket && out.held.length > 0) {
      const expiry = Math.max(this.now, ...out.held.map((h) => this.jobs.get(h.id)!.leaseUntil));
      this.tickets.set(ticket.claimer, { nonce: nonce!, held: out.held, expiry });
      if (!record) this.pruneClaims();
    }
    return { ...out, retried: false };
  }

  private claimAfresh(
    count: number,
    freeSlots: number,
    reg: HandoffClaim | undefined,
  ): { held: Held[]; nextDue: number | null; paused: boolean; registered: number; replayed: Held[] } {
    // The registration this fetcher may hold is withdrawn (its units left). If more jobs were handed
    // off with it than reached the fetcher, those still under their handoff's lease come back at the
    // end of the reply (`replayed`), and the claim takes that many fewer (at most) for itself.
    const wanted = count;
    let replayed: Held[] = [];
    let unseen = 0;
    if (reg && reg.withdraw !== null) {
      const prefix = `${reg.fetcher}|${reg.withdraw}|`;
      const units = new Set(Array.from({ length: reg.withdrawUnits }, (_, u) => `${prefix}${u + 1}`));
      const before = this.registrations.length;
      this.registrations = this.registrations.filter((r) => !units.has(r.member));
      unseen = reg.withdrawUnits - (before - this.registrations.length) - reg.received;
      const h = this.handoffs.get(reg.fetcher);
      if (unseen > 0 && h?.nonce === reg.withdraw) {
        replayed = this.stillHeld(h.held);
        unseen = Math.min(unseen, replayed.length);
        count = Math.max(0, count - unseen);
      } else unseen = 0;
    }
    const no = { registered: 0, replayed };
    this.promoteDue();
    if (this.paused) return { held: [], nextDue: null, paused: true, ...no };
    if (count > 0 && this.limitedUntil > this.now) return { held: [], nextDue: null, paused: false, ...no };
    const held: Held[] = [];
    // A job taken that expired is not leased: it ends dead (no retention trim here), and the worker is
    // told to claim again at once (nextDue now) rather than register for a handoff.
    const expired: ModelJob[] = [];
    for (const id of this.waitingOrder().slice(0, count)) {
      const j = this.jobs.get(id)!;
      this.unqueue(j);
      if (this.expired(j)) {
        expired.push(j);
        continue;
      }
      j.state = 'a';
      j.startedAt = undefined;
      j.leases += 1;
      j.tokenOf = j.leases;
      j.leaseUntil = this.now + this.leaseOf(j);
      held.push({ id, incarnation: j.incarnation, attempt: j.attempts, lease: j.leases });
    }
    this.expireJobs(expired);
    const firstDelayed = this.scored('d')[0];
    const nextDue =
      held.length >= wanted ? null : expired.length > 0 ? this.now : firstDelayed ? firstDelayed[1] : null;
    // Left with free slots: registered for that many handoffs (at most registerUnits) until
    // now + registerMs.
    const units =
      reg && reg.registerMs > 0 && expired.length === 0
        ? Math.min(reg.registerUnits, freeSlots - held.length - unseen)
        : 0;
    for (let u = 1; u <= units; u++) {
      const member = `${reg!.fetcher}|${reg!.nonce}|${u}`;
      this.registrations = this.registrations.filter((r) => r.member !== member);
      this.registrations.push({ fetcher: reg!.fetcher, member, deadline: this.now + reg!.registerMs });
    }
    return { held, nextDue, paused: false, registered: Math.max(0, units), replayed };
  }

  /**
   * The registration a plain add may hand its job to (includes/take_idle.lua) at the script's `now`:
   * the latest deadline (then the highest member), taken out; none when that one is past (all are
   * dropped), or when the job could not start at once (paused, rate-limited, jobs waiting before it:
   * then it stays).
   */
  private takeIdle(now: number): Registration | null {
    const sorted = [...this.registrations].sort(
      (a, b) => b.deadline - a.deadline || byMember(b.member, a.member),
    );
    const top = sorted[0];
    if (!top) return null;
    this.registrations = sorted.slice(1);
    if (top.deadline < now) {
      this.registrations = [];
      return null;
    }
    if (this.paused || this.limitedUntil > this.now || this.waitingOrder().length > 0) {
      this.registrations.push(top);
      return null;
    }
    return top;
  }

  /** The record still carries the token of claim `h` (same incarnation, same attempt, not revoked). */
  private sameToken(j: ModelJob, h: Held): boolean {
    return j.incarnation === h.incarnation && j.tokenOf === h.lease;
  }

  /** Fencing (design.md): an outcome applies only while the job is active under the caller's token. */
  private holds(j: ModelJob, h: Held): boolean {
    return j.state === 'a' && this.sameToken(j, h);
  }

  private stale(j: ModelJob): string {
    return `STALE:${j.state}:${j.attempts}`;
  }

  /**
   * complete: the start marks riding on the call are applied first (their lost ids come after the
   * refusals, as START_LOST); then all rows are judged against the records as they were. A completion
   * counts its start if the mark has not arrived.
   */
  complete(rows: Held[], marks: Held[] = []): [string, string][] {
    const lostStarts = this.start(marks);
    const refused: [string, string][] = [];
    const done: ModelJob[] = [];
    for (const h of rows) {
      const j = this.jobs.get(h.id);
      if (!j) refused.push([h.id, 'NOT_FOUND']);
      else if (this.holds(j, h)) done.push(j);
      // A completion re-sent after a lost reply is a no-op, neither applied nor refused.
      else if (!(j.state === 'c' && this.sameToken(j, h))) refused.push([h.id, this.stale(j)]);
    }
    for (const j of done) {
      this.impliedStart(j);
      j.state = 'c';
      j.finishedAt = this.now;
      this.releaseDedupe(j);
    }
    if (done.length > 0) this.trim('c');
    this.releaseSuccessors(done);
    for (const id of lostStarts) refused.push([id, 'START_LOST']);
    return refused;
  }

  /**
   * fail: retryDelayMs 0 -> waiting, > 0 -> delayed, -1 or no attempts left -> dead. Kind S (snooze):
   * the attempt is given back, no error, snoozes + 1, delayed by max(0, retryDelayMs). Kind R (rate
   * limit): the attempt is given back, no error, snoozes + 1, front of waiting, claims stop until
   * now + delay.
   */
  fail(rows: Held[], retryDelayMs: number, as: FailKind = 'E'): [string, string][] {
    const out: [string, string][] = [];
    const accepted: ModelJob[] = [];
    const givenBack: ModelJob[] = [];
    for (const h of rows) {
      const j = this.jobs.get(h.id);
      if (!j) out.push([h.id, 'NOT_FOUND']);
      else if (as !== 'E' && this.holds(j, h)) {
        this.impliedStart(j);
        givenBack.push(j);
        out.push([h.id, as === 'S' ? 'snoozed' : 'limited']);
      } else if (as !== 'E' && j.state !== 'a' && this.sameToken(j, h)) {
        out.push([h.id, as === 'S' ? 'snoozed' : 'limited']);
      } else if (this.holds(j, h)) {
        // A failure counts its start if the mark has not arrived, before it is judged.
        this.impliedStart(j);
        accepted.push(j);
        const dead = retryDelayMs < 0 || !this.attemptsLeft(j);
        out.push([h.id, dead ? 'dead' : retryDelayMs === 0 ? 'waiting' : 'delayed']);
      } else if (j.state !== 'a' && this.sameToken(j, h)) {
        // A failure re-sent after a lost reply: already applied, reported with the job's state.
        out.push([h.id, STATE_NAMES[j.state]]);
      } else out.push([h.id, this.stale(j)]);
    }
    const delay = Math.max(0, retryDelayMs);
    const limited: ModelJob[] = [];
    for (const j of givenBack) {
      // The budget is given back; the start stays counted. Both kinds count toward maxSnoozes.
      j.base += 1;
      j.snoozes += 1;
      if (as === 'S') {
        j.state = 'd';
        j.dueAt = this.now + delay;
      } else {
        limited.push(j);
        this.limitedUntil = Math.max(this.limitedUntil, this.now + delay);
      }
    }
    // Each goes to the front in turn, as fail.lua enqueues them one by one (the last row ends first).
    for (const j of limited) this.enqueueFront([j]);
    const died: ModelJob[] = [];
    for (const j of accepted) {
      j.errors.push({ at: this.now, attempt: j.attempts, code: WORKER_ERROR_CODE });
      if (retryDelayMs < 0 || !this.attemptsLeft(j)) {
        j.state = 'x';
        j.finishedAt = this.now;
        this.releaseDedupe(j);
        died.push(j);
      } else if (retryDelayMs === 0) {
        this.enqueue(j);
      } else {
        j.state = 'd';
        j.dueAt = this.now + retryDelayMs;
      }
    }
    if (died.length > 0) this.trim('x');
    this.releaseSuccessors(died);
    return out;
  }

  /** extend: renews the leases still held; returns the ids whose lease is lost. */
  extend(rows: Held[]): string[] {
    const lost: string[] = [];
    for (const h of rows) {
      const j = this.jobs.get(h.id);
      if (j !== undefined && this.holds(j, h)) j.leaseUntil = this.now + this.leaseOf(j);
      else lost.push(h.id);
    }
    return lost;
  }

  /** An outcome whose start mark has not arrived counts the start itself (complete.lua, fail.lua). */
  private impliedStart(j: ModelJob): void {
    if (j.startedAt !== undefined) return;
    j.attempts += 1;
    j.startedAt = this.now;
  }

  /**
   * start (start marks): jobs still held and not yet marked under this lease count the start (attempts
   * + 1, startedAt now); a job already marked is left as it is. Returns the ids whose lease is lost.
   */
  start(rows: Held[]): string[] {
    const lost: string[] = [];
    for (const h of rows) {
      const j = this.jobs.get(h.id);
      if (j === undefined || !this.holds(j, h)) lost.push(h.id);
      else if (j.startedAt === undefined) {
        this.impliedStart(j);
        // Once started, a job never expires (includes/mark_starts.lua).
        this.expiring.delete(j.id);
      }
    }
    return lost;
  }

  /**
   * recover: leases that ended before now. A marked start is charged (LeaseExpiredError), dead with no
   * attempts left; an unmarked one goes back free (no error), however many times (the worker bounds a
   * processor that kills it: src/worker/runner.ts confirms such a job's start before running it).
   */
  recover(): { requeued: string[]; dead: string[] } {
    const expired = this.scored('a')
      .filter(([, until]) => until < this.now)
      .map(([id]) => this.jobs.get(id)!);
    const requeued: ModelJob[] = [];
    const dead: ModelJob[] = [];
    for (const j of expired) {
      const free = j.startedAt === undefined;
      if (free) j.refunds += 1;
      if (!free) j.errors.push({ at: this.now, attempt: j.attempts, code: LEASE_EXPIRED });
      j.tokenOf = null;
      if (free || this.attemptsLeft(j)) requeued.push(j);
      else {
        j.state = 'x';
        j.finishedAt = this.now;
        this.releaseDedupe(j);
        dead.push(j);
      }
    }
    this.enqueueFront(requeued);
    if (dead.length > 0) this.trim('x');
    // recover.lua walks the expired jobs backwards: their successors are released in that order.
    this.releaseSuccessors([...dead].reverse());
    return { requeued: requeued.map((j) => j.id), dead: dead.map((j) => j.id) };
  }

  /**
   * release: a worker hands back jobs it holds and never started (a prefetched job at close or pause,
   * one past its expiry): those still held under the caller's lease and unmarked go to the front of
   * their line in the order given, lease revoked, nothing counted; they keep their index entry. The
   * script's clock is Redis's (`scriptNow`): what it promotes first follows it. Returns the rows
   * handed back.
   */
  release<H extends Held>(rows: H[], scriptNow: number): H[] {
    const back = rows.filter((h) => {
      const j = this.jobs.get(h.id);
      return j !== undefined && this.holds(j, h) && j.startedAt === undefined;
    });
    if (back.length === 0) return [];
    const jobs = back.map((h) => this.jobs.get(h.id)!);
    this.promoteDue(scriptNow);
    for (const j of jobs) j.tokenOf = null;
    this.enqueueFront(jobs);
    return back;
  }

  /** retry: dead or completed -> waiting with a fresh budget; errors are kept, the expiry cleared. */
  retry(id: string): AdminReply {
    const j = this.jobs.get(id);
    if (!j) return 'NOT_FOUND';
    if (j.state !== 'x' && j.state !== 'c') return `INVALID_STATE:${j.state}`;
    j.base = j.attempts;
    j.tokenOf = null;
    j.finishedAt = undefined;
    // A manual retry runs the job: an expiry it had no longer applies (its index entry is left).
    j.expireAt = undefined;
    this.enqueue(j);
    return 'OK';
  }

  /** remove: any job but an active one. */
  remove(id: string): AdminReply {
    const j = this.jobs.get(id);
    if (!j) return 'NOT_FOUND';
    if (j.state === 'a') return 'INVALID_STATE:a';
    this.releaseDedupe(j, j.state !== 'c' && j.state !== 'x' && !this.started(j));
    this.delete(j);
    // An unfinished job removed counts as dead for the jobs behind it (remove.lua: settle_dependents).
    if (j.state !== 'c') this.releaseSuccessors([j]);
    return 'OK';
  }

  /** cancel: a job that has not finished ends dead at once, with a CancelledError; its lease is revoked. */
  cancel(id: string): AdminReply {
    const j = this.jobs.get(id);
    if (!j) return 'NOT_FOUND';
    if (j.state === 'c' || j.state === 'x') return `INVALID_STATE:${j.state}`;
    if (j.state === 'w') this.unqueue(j);
    this.releaseDedupe(j, j.state !== 'a' && !this.started(j));
    j.state = 'x';
    j.parked = null;
    j.tokenOf = null;
    j.finishedAt = this.now;
    j.errors.push({ at: this.now, attempt: j.attempts, code: CANCELLED });
    this.releaseSuccessors([j]);
    return 'OK';
  }

  /**
   * import-bullmq.lua: nothing is written when the id is taken here ('exists', checked first) or when
   * the take of the BullMQ job fails (`take`: 'changed', 'gone'); else the job is written as
   * writeImported says ('moved').
   */
  importJob(id: string, imp: ModelImport, take: BullTake): 'exists' | BullTake {
    if (this.jobs.has(id)) return 'exists';
    if (take !== 'moved') return take;
    this.writeImported(id, imp);
    return 'moved';
  }

  /**
   * import-copy.lua: the job's record written as import-bullmq.lua writes it, but held: in no line or
   * sorted set, so no claim, promotion, recovery or trim sees it (it is in `heldCopies`), and noted with the
   * BullMQ hash's fingerprint. An id taken here answers 'copied' when the note names this very
   * fingerprint (an earlier run's copy), else 'exists'; either way nothing is written.
   */
  importCopy(id: string, imp: ModelImport, fingerprint: string): 'copied' | 'exists' {
    if (this.jobs.has(id)) return this.imported.get(id) === fingerprint ? 'copied' : 'exists';
    this.writeImported(id, imp, false);
    this.heldCopies.add(id);
    this.imported.set(id, fingerprint);
    return 'copied';
  }

  /**
   * import-release.lua (once BullMQ's original is taken): without a note of this fingerprint,
   * 'absent'. Else the note goes, and the held copy is placed as a one-server import places it
   * (placeImported) on the clock of the release ('released'); 'absent' if its record is gone.
   */
  importRelease(id: string, fingerprint: string): 'released' | 'absent' {
    if (this.imported.get(id) !== fingerprint) return 'absent';
    this.imported.delete(id);
    const j = this.jobs.get(id);
    if (!j) return 'absent';
    this.heldCopies.delete(id);
    this.placeImported(j);
    return 'released';
  }

  /**
   * import-undo.lua (BullMQ kept the original): without a note of this fingerprint, 'absent'. Else the
   * note, the record and its annex go ('undone'): a held copy was in no line, so nothing had started it.
   */
  importUndo(id: string, fingerprint: string): 'undone' | 'absent' {
    if (this.imported.get(id) !== fingerprint) return 'absent';
    this.imported.delete(id);
    const j = this.jobs.get(id);
    if (j) this.delete(j);
    this.heldCopies.delete(id);
    return 'undone';
  }

  /**
   * includes/write_imported.lua: a new job under its own id, with `attempts` charged (base 0), never
   * started here, no lease, no expiry, no dedupe key: waiting, delayed (unless already due: then
   * waiting) or dead since `finished`. The generated-id counter is raised to `idFloor`. `place`: put
   * where workers find it at once (import-bullmq.lua), else left held (import-copy.lua).
   */
  private writeImported(id: string, imp: ModelImport, place = true): void {
    const j = this.createJob(
      id,
      { priority: imp.priority, maxAttempts: imp.maxAttempts, lifo: imp.lifo },
      null,
      imp.data,
      imp.created,
    );
    j.attempts = imp.attempts;
    j.errors = imp.errors.map((e) => ({ ...e }));
    if (imp.idFloor !== undefined && this.idCounter < imp.idFloor) this.idCounter = imp.idFloor;
    if (imp.state === 'x') {
      j.state = 'x';
      j.finishedAt = imp.finished!;
    } else if (imp.state === 'd' && imp.due !== undefined && imp.due > this.now) {
      j.state = 'd';
      j.dueAt = imp.due;
    }
    if (place) this.placeImported(j);
  }

  /**
   * includes/place_imported.lua: a waiting job joins its line after the promotion of due jobs (the
   * back, the front if lifo); a delayed one is indexed by its due time, even if that has passed since
   * it was written (the next promotion takes it); a dead one by its finish time (no retention runs).
   */
  private placeImported(j: ModelJob): void {
    if (j.state === 'w') this.enqueue(j);
  }

  /**
   * changeDelay (change-delay.lua, on the model's clock): a waiting, delayed or blocked job is due
   * `delayMs` from now. Delayed with 0: waiting now, at the back of its line (the front if lifo), after
   * the jobs already due; waiting with 0: stays where it is; blocked: only its due time changes.
   * Anything else is delayed until then. A parked job so moved is parked no more.
   */
  changeDelay(id: string, delayMs: number): AdminReply {
    const j = this.jobs.get(id);
    if (!j) return 'NOT_FOUND';
    if (j.state !== 'w' && j.state !== 'd' && j.state !== 'b') return `INVALID_STATE:${j.state}`;
    j.parked = null;
    j.dueAt = this.now + delayMs;
    if (j.state === 'b' || (j.state === 'w' && delayMs === 0)) return 'OK';
    if (delayMs === 0) {
      j.state = 'w'; // out of `delayed` first: the promotion before it does not take it
      this.enqueue(j);
      return 'OK';
    }
    if (j.state === 'w') this.unqueue(j);
    j.state = 'd';
    return 'OK';
  }

  /**
   * queue.signal (signal.lua, docs/workflows.md#signals): a job that has not ended keeps the signal
   * (at most `maxPending` unconsumed); a job parked for this name is waiting again at once, first in
   * its line (after the jobs already due). An ended or missing job, or a full one, keeps nothing.
   */
  signal(id: string, name: string, json: string, maxPending: number): SignalReply {
    const j = this.jobs.get(id);
    if (!j) return ['missing', ''];
    if (j.state === 'c' || j.state === 'x') return ['ended', j.state];
    if (j.signals.length >= maxPending) return ['full', j.state];
    j.signals.push({ name, json });
    if (j.state !== 'd' || j.parked?.name !== name) return ['kept', j.state];
    j.state = 'w'; // out of `delayed` before the promotion that precedes its enqueue
    j.parked = null;
    this.enqueueFront([j]);
    return ['woke', 'w'];
  }

  /**
   * job.waitForSignal's script (wait-signal.lua) for wait `n` of the attempt holding lease `h`. Fenced:
   * another lease gets 'stale' and changes nothing; the same park sent again answers 'parked' again.
   * The wait's deadline is fixed when it is first reached (step `~wait:<n>`, 0 = none). The oldest
   * signal of the name is taken (recorded as step `~signal:<n>`), even past the deadline; else past it
   * the timeout is recorded; else the job parks: delayed until the deadline (or never due), its
   * budget given back (its start counted if not yet), no snooze counted, its lease and token kept.
   * A wait that ended already answers 'stored' with what it ended with.
   */
  waitSignal(h: Held, name: string, n: number, timeoutMs: number): WaitSignalReply {
    const j = this.jobs.get(h.id);
    if (!j || !this.sameToken(j, h)) return ['stale', ''];
    if (j.state !== 'a') {
      if (j.state === 'd' && j.parked?.name === name)
        return ['parked', j.parked.deadline === null ? '' : String(j.parked.deadline)];
      return ['stale', ''];
    }
    // The same wait sent again after it ended: what it ended with stands (nothing is taken again).
    const ended = j.steps.filter(([s]) => s === `~signal:${n}`).at(-1);
    if (ended !== undefined) return ['stored', ended[1]];
    const waitStep = `~wait:${n}`;
    const stored = j.steps.filter(([s]) => s === waitStep).at(-1);
    let deadline = stored === undefined ? 0 : Number(stored[1]);
    if (stored === undefined) {
      deadline = timeoutMs > 0 ? this.now + timeoutMs : 0;
      j.steps.push([waitStep, String(deadline)]);
    }
    const i = j.signals.findIndex((s) => s.name === name);
    if (i >= 0) {
      const [s] = j.signals.splice(i, 1);
      const u = s!.json === '';
      j.steps.push([`~signal:${n}`, `{"payload":${u ? 'null' : s!.json},"u":${u}}`]);
      return ['taken', s!.json];
    }
    if (deadline > 0 && this.now >= deadline) {
      j.steps.push([`~signal:${n}`, '{"timedOut":true}']);
      return ['timeout', ''];
    }
    this.impliedStart(j);
    j.base += 1;
    j.state = 'd';
    j.dueAt = deadline > 0 ? deadline : NEVER;
    j.parked = { name, deadline: deadline > 0 ? deadline : null };
    return ['parked', deadline > 0 ? String(deadline) : ''];
  }

  /** promote: a delayed job becomes waiting now (back of its line). */
  promote(id: string): AdminReply {
    const j = this.jobs.get(id);
    if (!j) return 'NOT_FOUND';
    if (j.state !== 'd') return `INVALID_STATE:${j.state}`;
    this.enqueue(j);
    return 'OK';
  }

  /**
   * Retention of one finished state, as RetentionRule (src/types.ts) documents it: finished jobs older
   * than keepAgeMs are deleted, and at most keepCount are kept (the most recently finished).
   */
  private trim(state: 'c' | 'x'): void {
    const finished = this.scored(state).map(([id]) => this.jobs.get(id)!);
    const young = finished.filter((j) => j.finishedAt! >= this.now - this.cfg.keepAgeMs);
    const victims = [
      ...finished.filter((j) => !young.includes(j)),
      ...young.slice(0, Math.max(0, young.length - this.cfg.keepCount)),
    ];
    for (const j of victims) this.jobs.delete(j.id);
  }
}
