/**
 * What a closing worker does with the jobs it holds, apart from running ones.
 *
 * Jobs claimed but never started (prefetched into the buffer, or in the reply of a claim that arrived
 * while the worker was closing) are handed back at once with release.lua: to the front of waiting,
 * the attempt the claim counted given back, so another worker runs them now instead of after a lease
 * expiry, and with `maxAttempts: 1` they still get their one attempt.
 */
import { safeTimeout } from '../timers.js';
import type { Job } from './job.js';
import type { Lane } from './lane.js';

/**
 * Hands `jobs` (claimed, never started) back to their partitions, one release call per lane (see
 * Lane.handBack: a job whose lease this worker no longer holds is skipped; a failed call leaves its
 * jobs to lease expiry, and the error goes to the lane's onError).
 */
export async function handBack(lanes: readonly Lane[], jobs: readonly Job<unknown>[]): Promise<void> {
  const byLane = new Map<Lane, Job<unknown>[]>();
  for (const job of jobs) {
    const lane = lanes[job.partition];
    if (!lane) continue;
    let list = byLane.get(lane);
    if (!list) {
      list = [];
      byLane.set(lane, list);
    }
    list.push(job);
  }
  await Promise.all([...byLane].map(([lane, list]) => lane.handBack(list)));
}

/** Resolves when `promise` settles or after `ms`, whichever comes first (true if it settled). */
export function settledWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = safeTimeout(() => resolve(false), ms);
    promise.then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      () => {
        clearTimeout(timer);
        resolve(true);
      },
    );
  });
}
