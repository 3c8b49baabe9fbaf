/**
 * Bulk admin operations (retry every dead job, remove every waiting one...), built on the Queue's
 * public per-job calls, so each job's change is its own atomic script and one refusal (a job that
 * moved on meanwhile) never stops the others. The CLI and the dashboard both call these.
 *
 * Snapshot semantics: the ids in `state` are read first (oldest first, at most `max`), then changed,
 * so jobs that reach `state` again while the call runs (a retried job that dies at once) are not
 * looped on.
 */
import { SuretyError, ValidationError } from '../errors.js';
import { JOB_STATES } from '../states.js';
import type { JobInfo, JobState } from '../types.js';
import { checkCallOptions, checkInt, show } from '../validate.js';

/** Most jobs one bulk call changes. */
export const MAX_BULK_CHANGE = 1_000_000;
/** Jobs changed at once (each one script call). */
const CONCURRENT = 50;
/** Ids read per page for the snapshot. */
const PAGE = 1_000;

export interface BulkOptions<S extends JobState> {
  /** The state whose jobs to change. */
  state?: S;
  /** At most this many jobs (default 10 000, at most MAX_BULK_CHANGE). */
  max?: number;
}

export interface BulkOutcome {
  /** Ids changed. */
  done: string[];
  /** Ids that could not be changed (e.g. retried or removed by someone else meanwhile), and why. */
  failed: { id: string; code?: string; message: string }[];
  /** True when more jobs than `max` were in the state: call again for the rest. */
  more: boolean;
}

/** What the bulk calls need of a Queue (its public API). */
export interface BulkTarget {
  getJobs(state: JobState, opts: { offset?: number; limit?: number }): Promise<JobInfo<unknown, unknown>[]>;
  retry(id: string): Promise<void>;
  remove(id: string): Promise<void>;
}

/** Retries the jobs in `state` (dead by default, or completed): see the file header. */
export async function retryJobs(
  queue: BulkTarget,
  opts: BulkOptions<'dead' | 'completed'> = {},
): Promise<BulkOutcome> {
  const state = checkState('retryJobs', opts, ['dead', 'completed'], 'dead');
  return changeAll(queue, state, opts, (id) => queue.retry(id));
}

/** Every state but active (a running job is its worker's: cancel it instead). */
const REMOVABLE = JOB_STATES.filter((s): s is Exclude<JobState, 'active'> => s !== 'active');

/** Removes the jobs in `state` (any state but active): see the file header. */
export async function removeJobs(
  queue: BulkTarget,
  opts: BulkOptions<Exclude<JobState, 'active'>>,
): Promise<BulkOutcome> {
  const state = checkState('removeJobs', opts, REMOVABLE, undefined);
  return changeAll(queue, state, opts, (id) => queue.remove(id));
}

function checkState<S extends JobState>(
  call: string,
  opts: BulkOptions<S>,
  allowed: readonly S[],
  fallback: S | undefined,
): S {
  checkCallOptions(`${call} options`, opts, ['state', 'max']);
  const state = opts.state ?? fallback;
  if (state === undefined || !allowed.includes(state)) {
    throw new ValidationError(`${call} state must be one of ${allowed.join(', ')}, got ${show(opts.state)}`);
  }
  return state;
}

async function changeAll(
  queue: BulkTarget,
  state: JobState,
  opts: BulkOptions<JobState>,
  change: (id: string) => Promise<void>,
): Promise<BulkOutcome> {
  const max = checkInt('max', opts.max ?? 10_000, 1, MAX_BULK_CHANGE);
  const ids: string[] = [];
  let more = false;
  // Read one more than max, to know whether some are left. Removing while paging would shift pages,
  // hence the snapshot first.
  for (let offset = 0; ids.length <= max; offset += PAGE) {
    const page = await queue.getJobs(state, { offset, limit: PAGE });
    ids.push(...page.map((j) => j.id));
    if (page.length < PAGE) break;
  }
  if (ids.length > max) {
    ids.length = max;
    more = true;
  }
  return { ...(await changeEach(ids, change)), more };
}

/**
 * Applies `change` to each id, CONCURRENT at a time; one refusal does not stop the others. For
 * callers with their own list of ids (`surety retry emails 42 43`).
 */
export async function changeEach(
  ids: readonly string[],
  change: (id: string) => Promise<void>,
): Promise<Omit<BulkOutcome, 'more'>> {
  const outcome: Omit<BulkOutcome, 'more'> = { done: [], failed: [] };
  for (let i = 0; i < ids.length; i += CONCURRENT) {
    const batch = ids.slice(i, i + CONCURRENT);
    const settled = await Promise.allSettled(batch.map(change));
    settled.forEach((s, j) => {
      const id = batch[j]!;
      if (s.status === 'fulfilled') outcome.done.push(id);
      else {
        const e = s.reason as Error;
        outcome.failed.push({
          id,
          ...(e instanceof SuretyError ? { code: e.code } : {}),
          message: e.message,
        });
      }
    });
  }
  return outcome;
}
