/**
 * What a flow parent (kind p, behaviour.ts) fans out to: drawn by the producer when it adds the parent,
 * carried in the parent's data (so every run adds the same children), and kept with its add record for
 * the verdict (chaos/flows-verdict.ts) and the signaller (the signals its children wait for).
 *
 * A child has an explicit id, `<parent>-c<i>`, so the signaller reaches it without reading the parent's
 * log, and the verdict can tell a planned child from any other job. It lives in the parent's queue or
 * in the second queue (the parents queue of cross-queue dependencies, run by every worker process):
 * - ok: in the parent's queue a kind n job (fails at random, retried, completes); in the second queue a
 *   job that completes;
 * - dead: ends dead (kind u in the parent's queue: UnrecoverableError at once; in the second queue it
 *   fails both of its attempts);
 * - sig: in the parent's queue only, a kind a job (waits for one or two signals, some with a timeout).
 * Some children are added with ignoreDependencyFailure: their death does not fail the parent.
 */
import type { JobOptions } from '../src/index.js';
import type { ChildJob } from '../src/types.js';
import {
  type ChildMode,
  type FlowChild,
  type FlowData,
  type JobData,
  type Kind,
  maxAttemptsOf,
} from './behaviour.js';
import type { Rng } from './rng.js';
import { type PlannedSend, planSignals } from './signal-plan.js';

/** The lease and fixed backoff the children are added with (the parent's queue defaults). */
export interface FlowDefaults {
  leaseMs: number;
  backoffMs: number;
}

/** The data of a flow child in the second queue (the parents queue's ParentData, with its parent). */
export interface SecondChildData {
  p: 0;
  /** The flow parent's id and this child's index. */
  fp: string;
  ci: number;
  f?: 1;
}

/** Attempts of a second-queue child (a dead one fails both). */
export const SECOND_CHILD_ATTEMPTS = 2;

/** The id of child `i` of flow parent `parent`. */
export function childId(parent: string, i: number): string {
  return `${parent}-c${i}`;
}

/** How job.waitForChildren names a child's result: its id, or `queue:id` for another queue's. */
export function childKey(parentQueue: string, child: { queue: string; id: string }): string {
  return child.queue === parentQueue ? child.id : `${child.queue}:${child.id}`;
}

/** The kind a child of the parent's queue runs as. */
export function childKind(m: ChildMode): Kind {
  return m === 'ok' ? 'n' : m === 'dead' ? 'u' : 'a';
}

/**
 * A flow parent's children (2 to 4, spread over both queues when a second queue is given) and the
 * signals planned for each sig child, by index.
 */
export function planFlow(
  rng: Rng,
  horizonMs: number,
  secondQueue: string | null,
): { children: FlowChild[]; sends: (PlannedSend[] | undefined)[] } {
  const n = rng.int(2, 4);
  const children: FlowChild[] = [];
  const sends: (PlannedSend[] | undefined)[] = [];
  for (let i = 0; i < n; i++) {
    const second = secondQueue !== null && rng.chance(0.4);
    const m: ChildMode = second
      ? rng.chance(0.25)
        ? 'dead'
        : 'ok'
      : rng.weighted({ ok: 45, dead: 15, sig: 40 });
    const c: FlowChild = { m };
    if (second) c.q = secondQueue!;
    if (rng.chance(0.35)) c.ig = 1;
    if (m === 'sig') {
      const plan = planSignals(rng, horizonMs);
      c.sw = plan.waits;
      sends[i] = plan.sends;
    }
    children.push(c);
  }
  return { children, sends };
}

/** What flow parent `parent` (data `s`) passes to job.addChildren: the same on every run. */
export function childJobs(parent: string, s: number, flow: FlowData): ChildJob[] {
  return flow.children.map((c, i) => {
    const id = childId(parent, i);
    const opts: JobOptions = { id };
    if (c.ig) opts.ignoreDependencyFailure = true;
    if (c.q !== undefined) {
      const data: SecondChildData = { p: 0, fp: parent, ci: i, ...(c.m === 'dead' ? { f: 1 as const } : {}) };
      return { queue: c.q, data, opts: { ...opts, maxAttempts: SECOND_CHILD_ATTEMPTS } };
    }
    const k = childKind(c.m);
    const data: JobData = { s, k, fp: parent, ci: i, ...(c.sw ? { sw: c.sw } : {}) };
    return {
      data,
      opts: {
        ...opts,
        maxAttempts: maxAttemptsOf(k),
        leaseMs: flow.lease,
        backoff: { type: 'fixed', delayMs: flow.backoff },
      },
    };
  });
}
