/**
 * What a processor wrapper throws when the attempt never started and must not: the job's expiry came
 * while it waited for its sandbox (a sandbox starting up, or busy). The runner hands the job back
 * unstarted (release.lua: no attempt counted) instead of failing it, and the next claim, or the expiry
 * sweep, ends it dead with its ExpiredError on Redis's clock.
 */
export class UnstartedError extends Error {
  override name = 'UnstartedError';

  constructor(message: string) {
    super(message);
    MINE.add(this);
  }
}

const MINE = new WeakSet<object>();

/**
 * `err` is an UnstartedError this library made. A WeakSet lookup, not instanceof: whatever a processor
 * rejects with reaches this check, and a Proxy whose traps throw must not make it throw.
 */
export function isUnstarted(err: unknown): boolean {
  return typeof err === 'object' && err !== null && MINE.has(err);
}

/** The job never started and its expiry has passed on this worker's clock: it must not start now. */
export function expiredUnstarted(job: { attempt: number; expireAt: number }, now = Date.now()): boolean {
  return job.attempt === 1 && job.expireAt > 0 && job.expireAt <= now;
}
