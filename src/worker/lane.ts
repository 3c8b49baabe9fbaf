/**
 * One partition as a worker sees it: its keys and calls, the jobs the worker holds there, and the loops
 * that work per partition (fetch, mark starts, write outcomes, renew leases). One lane per partition (one
 * for an unpartitioned queue), sharing the worker's slots, subscriber, heartbeat, recovery.
 *
 * Data flows one way, and the lane knows neither the runner nor the other lanes: the fetcher's claimed
 * jobs become Jobs held here and go up to the host (onClaimed: the worker gives them to the runner); the
 * runner's settled attempts come down as outcome rows (completed, failed) for this lane's acker, which
 * writes them through this lane's calls; the lane then forgets their leases and reports each written
 * outcome upward as one LaneOutcome. Leases found lost and jobs cancelled go up as ids. The lane owns
 * its held leases (others read them through holds and leaseLeft); the runner owns the attempts that run.
 */
import { type Clock, REAL_TIMERS } from '../clock.js';
import type { SuretyError } from '../errors.js';
import { type RefusalContext, refusalError } from '../scripts/refusals.js';
import type { ClaimedJob } from '../scripts/replies.js';
import type { RedisClient } from '../scripts/specs.js';
import { decodeClaimed, tokenTime } from '../store/job-record.js';
import { handoffChannel, type QueueKeys } from '../store/keys.js';
import type { AttemptOutcome } from '../telemetry/tracing.js';
import { Acker, type CompleteRow, type FailRow } from './acker.js';
import { WorkerCalls } from './calls.js';
import type { ChildQueues } from './children.js';
import { type ClaimReply, type ClaimTicket, Fetcher, type HandoffArgs } from './fetcher.js';
import { HeldLeases } from './held-leases.js';
import { attemptOf, Job } from './job.js';
import { LeaseRenewer } from './lease-renewer.js';
import type { ResolvedWorkerOptions } from './options.js';
import type { LaneSlots } from './slot-share.js';
import { encodeMarks, Starter } from './starter.js';

/** A written outcome (or a refused one: the lease was lost and the fence said no), reported upward. */
export type LaneOutcome =
  | { kind: 'completed'; job: Job<unknown>; value: unknown }
  | { kind: 'failed'; job: Job<unknown>; cause: Error; outcome: 'waiting' | 'delayed' | 'dead' }
  /** The processor snoozed the job (SnoozeError) or hit a rate limit (RateLimitError): no attempt spent. */
  | { kind: 'snoozed' | 'rateLimited'; job: Job<unknown>; delayMs: number }
  | { kind: 'refused'; error: SuretyError };

/** A fail row's written outcome as its attempt's span reports it. */
function spanOutcome(r: { outcome: string } | { refusal: unknown }): AttemptOutcome {
  if ('refusal' in r) return 'lease-lost';
  if (r.outcome === 'snoozed') return 'snoozed';
  if (r.outcome === 'limited') return 'rate-limited';
  return r.outcome === 'dead' ? 'dead' : 'retry';
}

export interface LaneHost {
  client: RedisClient;
  subscriber: RedisClient;
  options: ResolvedWorkerOptions;
  queueName: string;
  /** The Queues job.addChildren adds through (one per child queue, on the worker's connection). */
  childQueues: ChildQueues;
  /** The worker's slots, shared among its lanes: asked before each claim. */
  slots: LaneSlots<Lane>;
  /** Jobs just claimed (and held here): to run when a slot frees, or to hand back if closing. */
  onClaimed(jobs: Job<unknown>[]): void;
  /** A claim of this lane came back short: slots it had reserved are free for the other lanes. */
  onClaimReleased(): void;
  /** queue.cancel moved this job to dead; its lease is forgotten here (stop it if it runs). */
  onCancelled(lane: Lane, id: string): void;
  /** The renewer or a refused start mark found these leases lost (already forgotten here). */
  onLeasesLost(lane: Lane, ids: string[]): void;
  onOutcome(outcome: LaneOutcome): void;
  onError(err: unknown): void;
}

/** @internal See Lane.diagnostics. */
export interface LaneDiagnostics {
  partition: number;
  /** The first 50 ids whose lease this lane holds. */
  held: string[];
  heldCount: number;
  claimsRequested: number;
  /** Claims this lane has sent so far (surety/testing: did a claim follow a wake-up?). */
  claimsSent: number;
  drained: boolean;
  outcomesPending: number;
}

export class Lane {
  readonly calls: WorkerCalls;
  /** Jobs whose lease this worker holds here: running, or finished with the outcome not yet written. */
  private readonly held = new HeldLeases();
  private readonly fetcher: Fetcher;
  private readonly acker: Acker;
  private readonly renewer: LeaseRenewer;
  private readonly starter: Starter;
  /** Node's timers, or the test clock's (clock.ts) when the worker has one. */
  readonly timers: Clock;
  /** Free slots counted by this lane's claims in flight (see LaneSlots.startable). */
  private starts = 0;
  /** Claims sent and not answered yet (close waits for them, so their jobs can be handed back). */
  private readonly claims = new Set<Promise<unknown>>();

  constructor(
    readonly partition: number,
    readonly keys: QueueKeys,
    private readonly host: LaneHost,
  ) {
    const { slots, onError, options } = host;
    this.timers = options.clock ?? REAL_TIMERS;
    this.calls = new WorkerCalls(host.client, keys, options);
    this.fetcher = new Fetcher({
      subscriber: host.subscriber,
      wakeChannel: keys.wakeChannel,
      pollIntervalMs: options.pollIntervalMs,
      timers: this.timers,
      freeSlots: () => slots.claimable(this) + this.fetcher.requestedCount,
      handoffChannel: options.limiter ? undefined : (fetcher) => handoffChannel(keys, fetcher),
      handoffUnits: () => slots.handoffUnits(),
      claim: (count, ticket, handoff) => this.sendClaim(count, ticket, handoff),
      onJobs: (claimed) => host.onClaimed(this.toJobs(claimed)),
      onCancelled: (id) => {
        if (this.held.forget(id)) host.onCancelled(this, id);
      },
      onError,
      onReleased: () => host.onClaimReleased(),
    });
    this.acker = new Acker({
      writeCompletions: (rows) => this.writeCompletions(rows),
      writeFailures: (rows) => this.writeFailures(rows),
      onError,
    });
    this.starter = new Starter({
      start: (rows) => this.calls.start(rows),
      wanted: (job) => !attemptOf(job).decided && this.holds(job),
      onLost: (jobs) => this.startsLost(jobs),
      onError,
    });
    this.renewer = new LeaseRenewer({
      timers: this.timers,
      leases: this.held,
      extend: (rows) => this.calls.extend(rows),
      onLost: (ids) => this.leasesLost(ids),
      onError,
    });
  }

  // ---- claimed jobs --------------------------------------------------------------------------

  /**
   * One claim of the fetcher's: counts the free slots it may start at once (LaneSlots.startable)
   * until it is answered, and stamps its jobs with the send time and Redis's time, which date their
   * leases (toJobs).
   */
  private sendClaim(count: number, ticket: ClaimTicket, handoff: HandoffArgs): Promise<ClaimReply> {
    const startNow = this.host.slots.startable(count);
    this.starts += startNow;
    const sent = { at: this.timers.now(), redisNow: 0 };
    const call = this.track(
      this.calls.claim(count, startNow, ticket, handoff).then((reply) => {
        sent.redisNow = reply.now;
        for (const job of reply.jobs) job.sent = sent;
        for (const job of reply.replayed) job.sent = sent;
        return reply;
      }),
    );
    void call.then(
      () => (this.starts -= startNow),
      () => (this.starts -= startNow),
    );
    return call;
  }

  /** The jobs of a claim reply, each held from now on. */
  private toJobs(claimed: readonly ClaimedJob[]): Job<unknown>[] {
    const jobs: Job<unknown>[] = [];
    for (const { id, record: raw, sent } of claimed) {
      const record = decodeClaimed(raw);
      let data: unknown;
      try {
        data = JSON.parse(record.dataJson);
      } catch {
        data = undefined; // cannot happen for data written by add()
      }
      const job = new Job<unknown>(this.host.queueName, id, record, data, this.partition);
      // Its lease began at the time its token names (Redis's clock), which a claim's reply dates
      // against its own send time; a handoff message came just after its lease began.
      const since = sent ? sent.at - Math.max(0, sent.redisNow - tokenTime(record.token)) : this.timers.now();
      const attempt = attemptOf(job);
      attempt.writer = (j, progress, lines) => this.calls.writeAnnex(j, progress, lines);
      attempt.parentReader = (j) => this.calls.parentResults(j.id);
      attempt.store = this.calls;
      attempt.childQueues = this.host.childQueues;
      if (this.timers !== REAL_TIMERS) attempt.clockNow = () => this.timers.now();
      this.hold(job, since + job.leaseMs);
      jobs.push(job);
    }
    return jobs;
  }

  /** Holds a just-claimed job's lease (sure until `until`): renewed from now on, early enough for its length. */
  private hold(job: Job<unknown>, until: number): void {
    this.held.hold(job.id, { token: job.token, leaseMs: job.leaseMs, until });
    this.renewer.noteLease(job.leaseMs);
  }

  /** This worker still holds this attempt's lease (as far as it knows). */
  holds(job: Job<unknown>): boolean {
    return this.held.holds(job.id, job.token);
  }

  /** How long this attempt's lease surely stands yet, on the lane's clock (-Infinity: not held). */
  leaseLeft(job: Job<unknown>): number {
    return this.held.leaseLeft(job.id, job.token, this.timers.now());
  }

  /**
   * An attempt settled; if its lease was lost while it ran, its outcome is still sent, and will be
   * refused or accepted by the fence, so the lease is renewed again until it is written.
   */
  private holdForOutcome(job: Job<unknown>): void {
    // (until 0: a lost lease stands for nothing; only a buffered job's start reads it.)
    this.held.holdIfAbsent(job.id, { token: job.token, leaseMs: job.leaseMs, until: 0 });
  }

  /** Forgets a lease (outcome written, handed back, lost) unless the job was claimed again meanwhile. */
  forget(id: string, token: string): void {
    this.held.forget(id, token);
  }

  // ---- running jobs --------------------------------------------------------------------------

  /** The attempt's processor started: its start is marked with the lane's next call (starter.ts), never awaited. */
  markStart(job: Job<unknown>): void {
    const attempt = attemptOf(job);
    if (!attempt.decided && !attempt.startMarked && this.holds(job)) this.starter.push(job);
  }

  /**
   * Marks the start of a job whose processor may run only once Redis counted it (Runner.confirm), with
   * the other such marks of this turn in one start.lua call, and resolves with the answer: true when
   * the start is counted under its lease, false when the lease is gone (forgotten here, as for a
   * refused mark) or the lane stopped (closing). A call that fails is sent again (start.lua is
   * idempotent) while this lane holds the lease and the attempt is undecided.
   */
  confirmStart(job: Job<unknown>): Promise<boolean> {
    return this.starter.confirm(job);
  }

  /** Sends the start marks no completion took this turn (one start.lua call). */
  flushStarts(): void {
    this.starter.flush();
  }

  /** Start marks refused: those leases are gone, so their attempts stop (as when a renewal finds them lost). */
  private startsLost(jobs: Job<unknown>[]): void {
    const ids: string[] = [];
    for (const job of jobs) {
      if (!this.holds(job)) continue;
      this.held.forget(job.id);
      ids.push(job.id);
    }
    this.leasesLost(ids);
  }

  /** Leases found lost (already forgotten), by a renewal or a refused start mark: their attempts stop. */
  private leasesLost(ids: string[]): void {
    if (ids.length > 0) this.host.onLeasesLost(this, ids);
  }

  // ---- outcomes ------------------------------------------------------------------------------

  /** A completion for the next batch (written at the next flushOutcomes). */
  completed(row: CompleteRow): void {
    this.holdForOutcome(row.job);
    this.acker.pushComplete(row);
  }

  /** A failure, snooze or rate limit for the next batch (written at the next flushOutcomes). */
  failed(row: FailRow): void {
    this.holdForOutcome(row.job);
    this.acker.pushFail(row);
  }

  flushOutcomes(): void {
    this.acker.flush();
  }

  private async writeCompletions(rows: CompleteRow[]): Promise<void> {
    const marks = this.starter.take();
    let reply: Awaited<ReturnType<WorkerCalls['complete']>>;
    try {
      reply = await this.calls.complete(rows, encodeMarks(marks));
    } catch (err) {
      this.starter.putBack(marks);
      throw err;
    }
    this.starter.refused(marks, reply.lostStarts);
    const { refusals } = reply;
    const tracing = this.host.options.tracing;
    rows.forEach((row, i) => {
      this.forget(row.id, row.token);
      const refusal = refusals[i];
      tracing.ended(row.job, refusal ? 'lease-lost' : 'completed');
      this.host.onOutcome(
        refusal
          ? { kind: 'refused', error: refusalError(refusal, this.outcomeOf(row)) }
          : { kind: 'completed', job: row.job, value: row.value },
      );
    });
    if (reply.notified) await this.forwardCross();
  }

  /**
   * Children in other queues of the jobs just ended: delivered now. A failure leaves them in the outbox,
   * which the recovery pass delivers.
   */
  private async forwardCross(): Promise<void> {
    await this.calls.forwardCross().catch((err: unknown) => this.host.onError(err));
  }

  private async writeFailures(rows: FailRow[]): Promise<void> {
    const { results, notified } = await this.calls.fail(rows);
    const tracing = this.host.options.tracing;
    rows.forEach((row, i) => {
      const r = results[i]!;
      this.forget(row.id, row.token);
      tracing.ended(row.job, spanOutcome(r), row.cause);
      this.host.onOutcome(
        'refusal' in r
          ? { kind: 'refused', error: refusalError(r.refusal, this.outcomeOf(row)) }
          : r.outcome === 'snoozed' || r.outcome === 'limited'
            ? {
                kind: r.outcome === 'snoozed' ? 'snoozed' : 'rateLimited',
                job: row.job,
                delayMs: row.retryDelayMs,
              }
            : { kind: 'failed', job: row.job, cause: row.cause, outcome: r.outcome },
      );
    });
    if (notified) await this.forwardCross();
  }

  /** What a refused outcome was (StaleJobError names the job and the attempt whose outcome it was). */
  private outcomeOf(row: CompleteRow | FailRow): RefusalContext {
    return { operation: 'outcome', jobId: row.id, attempt: row.job.attempt };
  }

  /**
   * Hands back jobs claimed but never started (release.lua: front of waiting, attempt not spent),
   * skipping those whose lease this worker no longer holds. Either way this worker holds none of them
   * afterwards: released, lost meanwhile, or, when the call fails (connection lost), left to their
   * lease, which is no longer renewed, so recovery puts them back (free: their start was never marked).
   */
  async handBack(jobs: readonly Job<unknown>[]): Promise<void> {
    const rows = jobs.filter((job) => this.holds(job)).map((job) => ({ id: job.id, token: job.token }));
    if (rows.length === 0) return;
    try {
      await this.calls.release(rows);
    } catch (err) {
      this.host.onError(err);
    } finally {
      for (const r of rows) this.forget(r.id, r.token);
    }
  }

  // ---- claiming, for the worker's slot sharing -----------------------------------------------

  /** Jobs asked for by this lane's claims in flight. */
  get claimsRequested(): number {
    return this.fetcher.requestedCount;
  }

  /** Jobs to be started at claim by this lane's claims in flight. */
  get startsRequested(): number {
    return this.starts;
  }

  /** True while this lane's last claim came back short and nothing has woken its fetcher since. */
  get isDrained(): boolean {
    return this.fetcher.isDrained;
  }

  /** Claims for the free slots, unless drained or two claims are in flight. */
  pumpClaims(): void {
    this.fetcher.pump();
  }

  private track<T>(claim: Promise<T>): Promise<T> {
    const settled = claim.then(
      () => {},
      () => {},
    );
    this.claims.add(settled);
    settled.then(() => this.claims.delete(settled));
    return claim;
  }

  /** @internal What this lane holds and waits for, to diagnose a stuck worker (the chaos harness's report). */
  diagnostics(): LaneDiagnostics {
    return {
      partition: this.partition,
      held: this.held.ids(50),
      heldCount: this.held.size,
      claimsRequested: this.claimsRequested,
      claimsSent: this.fetcher.claimsSent,
      drained: this.isDrained,
      outcomesPending: this.acker.pending,
    };
  }

  // ---- lifecycle -----------------------------------------------------------------------------

  /** Subscribes and makes the first claim. Safe to call again after a failure (the worker retries). */
  startFetching(): Promise<void> {
    return this.fetcher.start();
  }

  startRenewing(): void {
    this.renewer.start();
  }

  stopFetching(): Promise<void> {
    return this.fetcher.stop();
  }

  /**
   * The worker paused: once the claims in flight are answered (one may have registered), withdraw the
   * handoff registration that stands, so no add hands this lane a job it would only hand back.
   */
  async withdrawHandoffs(): Promise<void> {
    await this.claimsSettled();
    await this.fetcher.withdraw();
  }

  /** Resolves once every claim in flight has been answered (or failed). */
  async claimsSettled(): Promise<void> {
    while (this.claims.size > 0) await Promise.all(this.claims);
  }

  /** Resolves once every start call has been answered (or failed). */
  startsSettled(): Promise<void> {
    return this.starter.settled();
  }

  /** Resolves when every buffered outcome has been written (true) or `timeoutMs` passed (false). */
  drainOutcomes(timeoutMs: number): Promise<boolean> {
    return this.acker.drain(timeoutMs);
  }

  /** Stops writing outcomes and renewing leases (the last steps of close before unregistering). */
  stop(): void {
    this.acker.stop();
    this.starter.stop();
    this.renewer.stop();
  }
}
