/**
 * The signaller: sends the signals kind a jobs wait for (behaviour.ts), with queue.signal straight to
 * Redis, through every fault but the workers' network ones, and records every send with its answer.
 *
 * Each job's sends are planned when it is added (signal-plan.ts): early (at once, usually before the job
 * reaches its wait), late (while it is parked, or after a wait with a timeout gave up), a duplicate
 * (a second send of the same name), or never (only for a name whose every wait has a timeout, so the
 * timeout path runs). A name with a wait without timeout gets at least as many sends as it has waits,
 * so no job can be left parked for good by the plan. One job's sends go one at a time, so the order
 * they were applied in is known (a send answered before the next was sent was applied before it);
 * one that rejects (Redis down, maxmemory) may or may not have been applied, and is sent again.
 */
import type { Queue, SignalResult } from '../src/index.js';
import type { JobData, SignalPayload } from './behaviour.js';
import { childId } from './flow-plan.js';
import { type AddRecord, MAYBE_APPLIED_CODES, type Producer } from './producer.js';
import { endlessNames, type PlannedSend, type SendWhy } from './signal-plan.js';
import { within } from './time.js';

/**
 * The sig children of a flow parent's add (kind p, chaos/flow-plan.ts), each as the add record of a
 * kind a job: its id, its waits and its planned sends (timed from the parent's add); `seq` is the
 * parent's (a child's data.s).
 */
export function flowTargets(rec: AddRecord): AddRecord[] {
  if (rec.kind !== 'p' || rec.id === undefined || !rec.flow) return [];
  return rec.flow.flatMap((c, i) =>
    c.m === 'sig' && c.sw && rec.flowSends?.[i]
      ? [
          {
            seq: rec.seq,
            kind: 'a' as const,
            id: childId(rec.id!, i),
            notBefore: 0,
            waits: c.sw,
            sends: rec.flowSends[i],
          },
        ]
      : [],
  );
}

/** One queue.signal call and what it answered. */
export interface SendRecord {
  /** Unique per run: the payload carries it ({ sid }), so a wait's result names its send. */
  sid: number;
  id: string;
  /** The add's sequence number (the job's data.s). */
  s: number;
  name: string;
  why: SendWhy;
  sentAt: number;
  /** When the call settled (answered or rejected). */
  repliedAt?: number;
  answer?: SignalResult;
  /** A rejected (or never settled) call: it may or may not have been applied. */
  error?: string;
}

const RETRY_MS = 250;
/** An add whose answer was lost may still land: a needed send answered `missing` is tried again. */
const MISSING_RETRY_MS = 1_000;
const CALL_MS = 10_000;
const POLL_MS = 20;

export class Signaller {
  readonly sends: SendRecord[] = [];
  private sid = 0;
  private seen = 0;
  private stopped = false;
  private readonly followed = new Set<string>();
  private readonly chains = new Set<Promise<void>>();
  private readonly sleepers = new Set<() => void>();

  constructor(
    private readonly queue: Queue<JobData>,
    private readonly producer: Producer,
  ) {}

  /** Follows the producer's accepted adds of kind a, sending their plans, until stop(). */
  async run(): Promise<void> {
    while (!this.stopped) {
      for (; this.seen < this.producer.accepted.length; this.seen++) {
        const rec = this.producer.accepted[this.seen]!;
        if (rec.kind === 'a') this.follow(rec, rec.repliedAt ?? Date.now(), false);
        for (const child of flowTargets(rec)) this.follow(child, rec.repliedAt ?? Date.now(), true);
      }
      await this.sleep(POLL_MS);
    }
  }

  /**
   * Production is over: the adds whose answer was lost may have written their job; they get their
   * plans too (not those refused with a code that says nothing was written, such as maxmemory's).
   */
  followUnknown(): void {
    const now = Date.now();
    for (const rec of this.producer.unknown)
      if (rec.code === undefined || MAYBE_APPLIED_CODES.includes(rec.code)) {
        if (rec.kind === 'a') this.follow(rec, now, true);
        for (const child of flowTargets(rec)) this.follow(child, now, true);
      }
  }

  /** Stops sending; waits up to `settleMs` for the calls in flight (those left count as unknown). */
  async stop(settleMs: number): Promise<void> {
    this.stopped = true;
    for (const wake of this.sleepers) wake();
    await within(Promise.all(this.chains), settleMs, 'the signaller').catch(() => {});
  }

  /** After the drain: one send to every signal job (each has ended: it must answer delivered: false). */
  async sendToEnded(): Promise<void> {
    const all = [...this.producer.accepted, ...this.producer.unknown];
    const recs = [...all.filter((r) => r.kind === 'a'), ...all.flatMap(flowTargets)];
    const ids = new Map(recs.map((r) => [r.id!, r]));
    const list = [...ids.values()];
    for (let i = 0; i < list.length; i += 50)
      await Promise.all(list.slice(i, i + 50).map((rec) => this.sendOnce(rec, 'go', 'ended')));
  }

  /** Whether every job's plan has been sent (answered or given up on). */
  get idle(): boolean {
    return this.chains.size === 0;
  }

  /**
   * `retryMissing`: a needed send (of a name some wait without timeout waits for) answered `missing`
   * is sent again until the job exists: an add whose answer was lost may still land, and a flow child
   * exists only once its parent ran.
   */
  private follow(rec: AddRecord, from: number, retryMissing: boolean): void {
    if (rec.id === undefined || !rec.sends || this.followed.has(rec.id)) return;
    this.followed.add(rec.id);
    const endless = endlessNames(rec.waits ?? []);
    const chain = (async () => {
      for (const p of rec.sends!) {
        await this.sleep(from + p.afterMs - Date.now());
        await this.deliver(rec, p, retryMissing && endless.has(p.name));
      }
    })();
    this.chains.add(chain);
    void chain.finally(() => this.chains.delete(chain));
  }

  /** One planned send, sent again while it is rejected (and, for a needed one, while the job is missing). */
  private async deliver(rec: AddRecord, p: PlannedSend, retryMissing: boolean): Promise<void> {
    while (!this.stopped) {
      const r = await this.sendOnce(rec, p.name, p.why);
      if (r.answer && !(retryMissing && r.answer.reason === 'missing')) return;
      await this.sleep(r.answer ? MISSING_RETRY_MS : RETRY_MS);
    }
  }

  private async sendOnce(rec: AddRecord, name: string, why: SendWhy): Promise<SendRecord> {
    const r: SendRecord = { sid: ++this.sid, id: rec.id!, s: rec.seq, name, why, sentAt: Date.now() };
    this.sends.push(r);
    const payload: SignalPayload = { sid: r.sid };
    try {
      r.answer = await within(this.queue.signal(r.id, name, payload), CALL_MS, 'signal()');
    } catch (err) {
      const code = (err as { code?: unknown })?.code;
      r.error = typeof code === 'string' ? code : String((err as Error)?.message ?? err).slice(0, 120);
    }
    r.repliedAt = Date.now();
    return r;
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopped || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(t);
        this.sleepers.delete(wake);
        resolve();
      };
      const t = setTimeout(wake, ms);
      this.sleepers.add(wake);
    });
  }
}
