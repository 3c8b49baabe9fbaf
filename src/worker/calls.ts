/**
 * The worker's Redis calls: each builds one script's arguments from the worker's options and parses
 * the reply. No state and no decisions: the Worker decides what the replies mean for its jobs.
 */
import {
  DEFAULT_LEASE_MS,
  DEFAULT_MAX_ATTEMPTS,
  MAX_LOG_LINE_CHARS,
  MAX_LOG_LINES,
  MAX_STEPS_BYTES,
  SCRIPT_BATCH_LIMIT,
} from '../defaults.js';
import { crossParentResults, forwardCross } from '../queue/cross-queue.js';
import { recoverExpired } from '../queue/recovery.js';
import { untilClosed } from '../redis/in-flight.js';
import type { Refusal } from '../scripts/refusals.js';
import type { WaitChildrenAnswer, WaitSignalAnswer } from '../scripts/replies.js';
import { callScript, type RedisClient, scripts } from '../scripts/specs.js';
import { annexField, resultOf } from '../store/job-record.js';
import type { QueueKeys } from '../store/keys.js';
import { toJson } from '../validate.js';
import type { CompleteRow, FailRow } from './acker.js';
import { MAX_CHILDREN } from './children.js';
import type { ClaimReply, ClaimTicket, HandoffArgs } from './fetcher.js';
import type { Job } from './job.js';
import type { ResolvedWorkerOptions } from './options.js';
export class WorkerCalls {
  constructor(
    private readonly client: RedisClient,
    private readonly keys: QueueKeys,
    private readonly options: ResolvedWorkerOptions,
  ) {}

  /**
   * Claims up to `count` jobs. `ticket` names the claim (the fetcher's claim slot and a nonce): sent
   * again after a failure, the same ticket returns the jobs that claim leased if it ran, instead of
   * claiming again (claim.lua, includes/replay_claim.lua). Nothing is counted at claim: each job's
   * attempt is counted by its start mark (start()). `freeSlots`: jobs the worker could start at once,
   * for the handoff registration.
   */
  async claim(
    count: number,
    freeSlots: number,
    ticket: ClaimTicket,
    handoff: HandoffArgs,
  ): Promise<ClaimReply> {
    return callScript(this.client, scripts.claim, this.keys, {
      now: '',
      count,
      defaultLeaseMs: DEFAULT_LEASE_MS,
      limit: SCRIPT_BATCH_LIMIT,
      rateMax: this.options.limiter?.max ?? 0,
      rateWindowMs: this.options.limiter?.durationMs ?? 0,
      eventsMaxLen: this.options.eventsMaxLen,
      claimer: ticket.claimer,
      nonce: ticket.nonce,
      freeSlots,
      fetcher: handoff.fetcher,
      withdraw: handoff.withdraw,
      registerMs: handoff.registerMs,
      registerUnits: handoff.registerUnits,
      withdrawUnits: handoff.withdrawUnits,
      received: handoff.received,
    });
  }

  /**
   * Completes `rows`, with start marks (`starts`: starter.ts encodeMarks) riding on the same call.
   * `refusals`: one entry per row, undefined when accepted, else the script's refusal (see
   * refusalError); `lostStarts`: marks refused because the lease is gone.
   */
  async complete(
    rows: CompleteRow[],
    starts = '',
  ): Promise<{ refusals: (Refusal | undefined)[]; lostStarts: string[]; notified: boolean }> {
    const { completed } = this.options.retention;
    const { refused, lostStarts, notified } = await callScript(
      this.client,
      scripts.complete,
      this.keys,
      {
        now: '',
        keepCount: completed.maxCount,
        keepAgeMs: completed.maxAgeMs,
        limit: SCRIPT_BATCH_LIMIT,
        doneChannel: this.keys.doneChannel,
        wakeChannel: this.keys.wakeChannel,
        eventsMaxLen: this.options.eventsMaxLen,
        starts,
      },
      rows,
    );
    // Refusals come in row order, so match them in order: a batch may hold two attempts of one job
    // (a lease lost and the job claimed back), of which only the older is refused.
    let k = 0;
    const refusals = rows.map((row) => {
      const r = refused[k];
      if (r?.id !== row.id) return undefined;
      k++;
      return r.refusal;
    });
    return { refusals, lostStarts, notified };
  }

  /**
   * One entry per row: where the job went, or the script's refusal (see refusalError); `notified`:
   * the call queued notifications for children in other queues (see forwardCross).
   */
  async fail(rows: FailRow[]): Promise<{
    results: ({ outcome: 'waiting' | 'delayed' | 'dead' | 'snoozed' | 'limited' } | { refusal: Refusal })[];
    notified: boolean;
  }> {
    const { dead } = this.options.retention;
    const out = await callScript(
      this.client,
      scripts.fail,
      this.keys,
      {
        now: '',
        defaultMaxAttempts: DEFAULT_MAX_ATTEMPTS,
        keepCount: dead.maxCount,
        keepAgeMs: dead.maxAgeMs,
        limit: SCRIPT_BATCH_LIMIT,
        wakeChannel: this.keys.wakeChannel,
        doneChannel: this.keys.doneChannel,
        eventsMaxLen: this.options.eventsMaxLen,
      },
      rows,
    );
    const results = rows.map((_, i) => {
      const r = out.rows[i];
      if (!r) return { refusal: { code: 'UNEXPECTED', text: 'no reply for this row' } as Refusal };
      return 'outcome' in r ? { outcome: r.outcome } : { refusal: r.refusal };
    });
    return { results, notified: out.notified };
  }

  /**
   * Delivers the notifications for children in other queues that this partition's outbox holds
   * (after a complete or fail call that queued some): src/queue/cross-queue.ts.
   */
  async forwardCross(): Promise<void> {
    await forwardCross(this.client, this.keys, this.options.eventsMaxLen);
  }

  /**
   * Hands back jobs claimed but never started (front of waiting, attempt given back), in chunks of
   * SCRIPT_BATCH_LIMIT; returns the ids handed back (the others' lease was no longer held).
   */
  async release(rows: { id: string; token: string }[]): Promise<string[]> {
    const out: string[] = [];
    // Last chunk first: each call puts its jobs at the front, so earlier chunks must go in last.
    for (let end = rows.length; end > 0; end -= SCRIPT_BATCH_LIMIT) {
      const chunk = rows.slice(Math.max(0, end - SCRIPT_BATCH_LIMIT), end);
      const released = await callScript(
        this.client,
        scripts.release,
        this.keys,
        { wakeChannel: this.keys.wakeChannel, eventsMaxLen: this.options.eventsMaxLen },
        chunk,
      );
      out.push(...released);
    }
    return out;
  }

  /**
   * Start marks (start.lua: attempt counted) of jobs whose processor has started; returns the ids whose
   * lease is no longer held (their attempts must stop). Idempotent: safe to send again.
   */
  async start(rows: { id: string; token: string }[]): Promise<string[]> {
    return callScript(this.client, scripts.start, this.keys, { now: '' }, rows);
  }

  /** Renews leases; returns the ids whose lease is no longer held. */
  async extend(rows: { id: string; token: string }[]): Promise<string[]> {
    return callScript(
      this.client,
      scripts.extend,
      this.keys,
      { now: '', defaultLeaseMs: DEFAULT_LEASE_MS },
      rows,
    );
  }

  async recover(limit: number): Promise<{ requeued: string[]; dead: string[] }> {
    const r = await recoverExpired(
      this.client,
      this.keys,
      this.options.retention.dead,
      this.options.eventsMaxLen,
      limit,
    );
    return { requeued: r.requeued, dead: r.dead };
  }

  /** Registers the worker for ttlMs (info: its JSON description), or unregisters it (info ''). */
  async beat(workerId: string, ttlMs: number, info: string): Promise<void> {
    await callScript(this.client, scripts.heartbeat, this.keys, { now: '', ttlMs, workerId, info });
  }

  /** Progress and log lines of a running attempt, fenced by its token; false if the lease is lost. */
  async writeAnnex(job: Job<unknown>, progress: unknown, lines: string[]): Promise<boolean> {
    return callScript(
      this.client,
      scripts.progress,
      this.keys,
      {
        id: job.id,
        token: job.token,
        progress: progress === undefined ? '' : toJson(`progress of job ${job.id}`, progress, 64 * 1024),
        maxLines: MAX_LOG_LINES,
        eventsMaxLen: this.options.eventsMaxLen,
      },
      lines.map((l) => ({ line: JSON.stringify(l.slice(0, MAX_LOG_LINE_CHARS)) })),
    );
  }

  /** The steps the job's attempts stored ('' none), fenced by the attempt's token: null if the lease is lost. */
  async readSteps(job: Job<unknown>): Promise<string | null> {
    return callScript(this.client, scripts.readSteps, this.keys, { id: job.id, token: job.token });
  }

  /** Stores one step result, fenced by the attempt's token: 1 stored, 0 lease lost, -1 over the size bound. */
  async writeStep(job: Job<unknown>, name: string, valueJson: string): Promise<number> {
    return callScript(this.client, scripts.step, this.keys, {
      id: job.id,
      token: job.token,
      name,
      value: valueJson,
      maxBytes: MAX_STEPS_BYTES,
    });
  }

  /** The hash tag of this lane's partition. */
  get tag(): string {
    return this.keys.tag;
  }

  /** job.addChildren: plans children (fenced): 1, or 0 lease lost, -1 steps too large, -2 too many. */
  planChildren(job: Job<unknown>, step: string, valueJson: string, children: string): Promise<number> {
    return callScript(this.client, scripts.addChildren, this.keys, {
      id: job.id,
      token: job.token,
      step,
      value: valueJson,
      children,
      maxChildren: MAX_CHILDREN,
      maxBytes: MAX_STEPS_BYTES,
    });
  }

  /** job.waitForChildren: the children's ends, or the job parked until they come (fenced). */
  waitChildren(job: Job<unknown>): Promise<WaitChildrenAnswer> {
    return callScript(this.client, scripts.waitChildren, this.keys, {
      now: '',
      id: job.id,
      token: job.token,
      wakeChannel: this.keys.wakeChannel,
      eventsMaxLen: this.options.eventsMaxLen,
    });
  }

  /** job.addChildren's replay: the children's ends the job recorded (a read, not fenced). */
  async childEnds(job: Job<unknown>): Promise<string> {
    return (await this.client.hget(this.keys.annex, annexField(job.id, 'childEnds'))) ?? '';
  }

  /** job.waitForSignal: takes a pending signal, times the wait out, or parks the job (fenced). */
  waitSignal(job: Job<unknown>, name: string, n: number, timeoutMs: number): Promise<WaitSignalAnswer> {
    return callScript(this.client, scripts.waitSignal, this.keys, {
      now: '',
      id: job.id,
      token: job.token,
      name,
      n,
      timeoutMs,
      maxBytes: MAX_STEPS_BYTES,
      wakeChannel: this.keys.wakeChannel,
      eventsMaxLen: this.options.eventsMaxLen,
    });
  }

  /** Replaces a running job's data, fenced by the attempt's token; false if the lease is lost. */
  async setData(job: Job<unknown>, dataJson: string): Promise<boolean> {
    return callScript(this.client, scripts.setData, this.keys, {
      id: job.id,
      token: job.token,
      data: dataJson,
    });
  }

  /**
   * Stored results of the jobs `jobId` depends on (undefined for a parent gone or not completed), by
   * id; those of other queues by `queue:id`, read from their queues.
   */
  async parentResults(jobId: string): Promise<Record<string, unknown>> {
    // untilClosed: a read whose reply is lost with the connection would otherwise never settle.
    const [parents, cross] = await untilClosed(
      this.client,
      this.client.hmget(this.keys.annex, annexField(jobId, 'parents'), annexField(jobId, 'crossParents')),
    );
    const out: Record<string, unknown> = {};
    if (parents) {
      const ids = parents.split('\n');
      const records = await untilClosed(this.client, this.client.hmget(this.keys.jobs, ...ids));
      ids.forEach((id, i) => {
        const rec = records[i];
        out[id] = rec ? resultOf(rec) : undefined;
      });
    }
    if (cross) Object.assign(out, await crossParentResults(this.client, this.options.prefix, cross));
    return out;
  }
}
