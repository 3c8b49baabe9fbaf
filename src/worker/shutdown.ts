/**
 * What a closing worker does with the jobs it holds, apart from running ones.
 *
 * Jobs claimed but never started (prefetched into the buffer, or in the reply of a claim that arrived
 * while the worker was closing) are handed back at once with release.lua: to the front of waiting,
 * the attempt the claim counted given back, so another worker runs them now instead of after a lease
 * expiry, and with `maxAttempts: 1` they still get their one attempt.
 */
import type { Job } from './job.js';
import type { Lane } from './lane.js';

/**
 * Hands `jobs` (claimed, never started) back to their partitions. A job whose lease this worker no
 * longer holds is skipped. If a release call fails (connection lost), its jobs keep their lease until
 * it expires and recovery puts them back (that attempt is then spent): the error goes to `onError`.
 */
export async function handBack(
  lanes: readonly Lane[],
  jobs: readonly Job<unknown>[],
  onError: (err: unknown) => void,
): Promise<void> {
  const byLane = new Map<Lane, { id: string; token: string }[]>();
  for (const job of jobs) {
    const lane = lanes[job.partition];
    if (!lane || lane.held.get(job.id)?.token !== job.token) continue;
    let rows = byLane.get(lane);
    if (!rows) {
      rows = [];
      byLane.set(lane, rows);
    }
    rows.push({ id: job.id, token: job.token });
  }
  await Promise.all(
    [...byLane].map(async ([lane, rows]) => {
      try {
        await lane.calls.release(rows);
      } catch (err) {
        onError(err);
        return;
      }
      // Released, or no longer ours (lost meanwhile): either way this worker holds none of them now.
      for (const r of rows) lane.release(r.id, r.token);
    }),
  );
}

/** Resolves when `promise` settles or after `ms`, whichever comes first (true if it settled). */
export function settledWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), Math.min(Math.max(0, ms), 2 ** 31 - 1));
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
