/**
 * Script refusals: what a Lua script answers (or errors with) when the change it was asked for must
 * not happen, read into data (parseRefusal) and turned into the typed error the caller throws
 * (refusalError). The error classes themselves are in errors.ts; this is the script reply protocol.
 */
import {
  BatchExistsError,
  InvalidStateError,
  JobNotFoundError,
  PartitionMismatchError,
  RepartitionError,
  StaleJobError,
  SuretyError,
  ValidationError,
} from '../errors.js';
import { stateName } from '../states.js';

/**
 * A script's refusal, as data: what a script answers (or errors with) when the change it was asked for
 * must not happen. Scripts spell them `NOT_FOUND`, `INVALID_STATE:<letter>`, `STALE:<letter>:<attempts>`
 * (replies) and `SURETY_<CODE> <details>` (error replies, for refusals that abort a whole call).
 */
export type Refusal =
  | { code: 'NOT_FOUND' }
  | { code: 'INVALID_STATE'; state: string }
  | { code: 'STALE'; state: string; attempts: number }
  | { code: 'UNKNOWN_PARENT'; parent: string }
  | { code: 'PARTITIONS'; recorded: number }
  | { code: 'NOT_MOVABLE'; jobId: string; state: string }
  | { code: 'BATCH_EXISTS'; batchId: string }
  | { code: 'CHILD_TAKEN'; jobId: string }
  | { code: 'UNEXPECTED'; text: string };

/** The refusal a script's reply or error message spells, or null when it spells none. */
export function parseRefusal(text: string): Refusal | null {
  if (text === 'NOT_FOUND') return { code: 'NOT_FOUND' };
  if (text.startsWith('INVALID_STATE:')) return { code: 'INVALID_STATE', state: text.slice(14) };
  if (text.startsWith('STALE:')) {
    const [, state = '', attempts = ''] = text.split(':');
    return { code: 'STALE', state, attempts: Number(attempts) };
  }
  // Error replies reach us as ioredis ReplyError messages, which may carry a prefix: search, not anchor.
  const m = /SURETY_([A-Z_]+) ?(.*)$/.exec(text);
  if (!m) return null;
  const [, code, rest = ''] = m;
  if (code === 'UNKNOWN_PARENT') return { code, parent: rest };
  if (code === 'PARTITIONS') return { code, recorded: Number(rest) };
  if (code === 'BATCH_EXISTS') return { code, batchId: rest };
  if (code === 'CHILD_TAKEN') return { code, jobId: rest };
  if (code === 'NOT_MOVABLE') {
    const space = rest.lastIndexOf(' ');
    return { code, jobId: rest.slice(0, space), state: rest.slice(space + 1) };
  }
  return { code: 'UNEXPECTED', text };
}

/** What the caller was doing when a script refused: enough to name the job, queue and operation. */
export interface RefusalContext {
  operation: string;
  jobId?: string;
  /** The attempt whose outcome was refused (complete, fail). */
  attempt?: number;
  queue?: string;
  /** The caller's partition count (add). */
  partitions?: number;
}

/** Why a worker's outcome was refused, in words (the `reason` of a StaleJobError). */
function refusalReason(r: Refusal): string {
  if (r.code === 'NOT_FOUND') return 'the job no longer exists (removed or trimmed)';
  if (r.code === 'STALE') {
    return `its lease was lost; the job is now ${stateName(r.state) ?? r.state} at attempt ${r.attempts}`;
  }
  return `unexpected reply ${JSON.stringify(r)}`;
}

/**
 * The one place where script refusals become typed errors: every caller of a script that can refuse
 * passes what it got here, with what it was doing.
 */
export function refusalError(r: Refusal, ctx: RefusalContext): SuretyError {
  const jobId = ctx.jobId ?? '';
  if (ctx.attempt !== undefined && (r.code === 'STALE' || r.code === 'NOT_FOUND')) {
    return new StaleJobError(jobId, ctx.attempt, refusalReason(r));
  }
  switch (r.code) {
    case 'NOT_FOUND':
      return new JobNotFoundError(jobId);
    case 'INVALID_STATE':
      return new InvalidStateError(jobId, stateName(r.state) ?? r.state, ctx.operation);
    case 'UNKNOWN_PARENT':
      return new JobNotFoundError(r.parent);
    case 'PARTITIONS':
      return new PartitionMismatchError(ctx.queue ?? '', ctx.partitions ?? 0, r.recorded);
    case 'BATCH_EXISTS':
      return new BatchExistsError(r.batchId);
    case 'CHILD_TAKEN':
      return new ValidationError(
        `job ${JSON.stringify(r.jobId)}${ctx.queue ? ` of queue ${ctx.queue}` : ''} is a child of another job already: a job has one parent (job.addChildren)`,
      );
    case 'NOT_MOVABLE':
      return new RepartitionError(
        r.state === 'f'
          ? `job ${JSON.stringify(r.jobId)} is part of a workflow under way (job.addChildren: a child not ended, or a parent of one) and cannot be moved; wait until it ends`
          : `job ${JSON.stringify(r.jobId)} is ${stateName(r.state) ?? r.state} and cannot be moved; wait until it finishes`,
      );
    default:
      return new SuretyError(
        'ERR_UNEXPECTED_REPLY',
        `unexpected reply ${JSON.stringify(r.code === 'UNEXPECTED' ? r.text : r)} to ${ctx.operation}`,
      );
  }
}
