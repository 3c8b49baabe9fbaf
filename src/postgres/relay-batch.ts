/**
 * One relay batch, one Postgres transaction on a connection the relay took for it:
 *
 *   1. lock   open the transaction and lock the oldest pending rows (`ORDER BY id LIMIT n FOR UPDATE
 *             SKIP LOCKED`: rows another relay holds are skipped, so relays never move the same row
 *             at once)
 *   2. move   them into Redis with queue.addBulk's add path (StoredJobAdder: the data goes as the JSON
 *             text outbox.add stored, not parsed and serialised again), their ids fixed (a repeat is
 *             a no-op), per queue in row order; a row with a parent in another queue waits for
 *             every row before it
 *   3. settle delete what Redis took, mark failed what it refused for good, record the error on
 *             what stays pending, and commit
 *
 * A crash anywhere before the commit leaves every row pending (Postgres rolls back and unlocks); the
 * next batch adds them again, and Redis answers `isNew: false` for those it had.
 */
import type { ClientBase, QueryResult } from 'pg';
import { MAX_MESSAGE_CHARS } from '../defaults.js';
import {
  ConnectionError,
  JobNotFoundError,
  PartitionMismatchError,
  SuretyError,
  ValidationError,
} from '../errors.js';
import type { StoredJob, StoredJobAdder } from '../queue/stored-adder.js';
import type { CrossQueueParent, JobOptions } from '../types.js';
import type { OutboxNames } from './schema.js';

/** A locked row: the job as outbox.add stored it (its data as that JSON text, `row` its id), and the row's facts. */
export interface LockedRow extends StoredJob {
  queue: string;
  attempts: number;
}

/**
 * A row whose dependsOn parent Redis does not have yet is tried this many times (the parent may be in
 * another relay's batch, added a moment later) before it is marked failed.
 */
export const PARENT_TRIES = 10;

/** A locked row as Postgres returns it. */
interface RowRead {
  row: string;
  queue: string;
  job_id: string;
  data: string;
  opts: string;
  attempts: number;
}

/**
 * Step 1: opens the batch's transaction and locks up to `limit` pending rows, in one round trip (a
 * multi-statement query, so `limit` is written into it: an integer the relay's options checked).
 * `enable_sort = off`, for this transaction only, keeps the lock query on the pending index, in id
 * order, stopping after `limit` rows: left to its statistics, which swing with the table between empty
 * and a burst, the planner reads every pending row (a bitmap scan) and sorts them for each batch, 20 ms
 * a batch with 20 000 rows pending instead of 1.3 ms, and a bitmap scan revisits every dead row of a
 * burst until VACUUM, where an index scan marks them dead in the index on its first pass.
 *
 * `after` (a row id): only rows after it. A batch locked ahead starts after the batch before it, whose
 * rows this relay holds: from the oldest row, SKIP LOCKED would try and skip each of them, which
 * tripled the relay's Postgres CPU (5 ms a batch of 500 instead of 1.6).
 */
export async function lockRows(
  client: ClientBase,
  n: OutboxNames,
  limit: number,
  after?: string,
): Promise<LockedRow[]> {
  if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`lockRows: limit ${limit}`);
  if (after !== undefined && !DIGITS.test(after)) throw new RangeError(`lockRows: after ${after}`);
  const replies = (await client.query(
    `BEGIN; SET LOCAL enable_sort = off;
     SELECT id::text AS row, queue, job_id, data::text AS data, opts::text AS opts, attempts
     FROM ${n.rows} WHERE state = 'pending'${after === undefined ? '' : ` AND id > ${after}`}
     ORDER BY id LIMIT ${limit} FOR UPDATE SKIP LOCKED`,
  )) as unknown as QueryResult<RowRead>[];
  const rows = replies[2]!.rows;
  return rows.map((r) => ({
    row: r.row,
    queue: r.queue,
    id: r.job_id,
    data: r.data,
    // outbox.add stores a job added without options as `{"id":...}` (outbox-job.ts): no parse, and
    // the queue's defaults as for an add without options. A row written by hand may hold any JSON.
    opts: r.opts === `{"id":${JSON.stringify(r.job_id)}}` ? undefined : (JSON.parse(r.opts) as JobOptions),
    attempts: r.attempts,
  }));
}

/** What became of one row in Redis. */
export type Move =
  /** In Redis (added, or there already): `partition` is where its mark is (StoredJobAdder.forget). */
  | { kind: 'added'; isNew: boolean; partition: number }
  /** Refused for good: marked failed in the outbox. */
  | { kind: 'failed'; error: SuretyError }
  /** Not added (Redis down or full, a parent not there yet): stays pending with the error recorded. */
  | { kind: 'deferred'; error: SuretyError };

export interface Moves {
  /** One entry per locked row, in order. */
  moves: Move[];
  /** The error that stopped the batch early (every row after it is deferred), if any. */
  stoppedBy?: SuretyError;
}

/** The relay's queue of a name; throws (a ValidationError for a name Redis cannot hold) when it cannot. */
export type QueueFor = (name: string) => StoredJobAdder;

/**
 * Moves the rows into Redis (step 2 above). Never throws: each row gets its Move. `autoPartitions`:
 * the relay reads the partition count from Redis, so a PartitionMismatchError only means its cached
 * Queue is stale (the queue was repartitioned) and the rows are tried again; with a fixed count it is
 * a refusal for good.
 */
export async function moveRows(
  rows: readonly LockedRow[],
  queueFor: QueueFor,
  forget: (name: string) => void,
  autoPartitions: boolean,
): Promise<Moves> {
  const moves: (Move | undefined)[] = new Array(rows.length);
  let stoppedBy: SuretyError | undefined;
  stages: for (const stage of stagesOf(rows)) {
    for (const [name, indexes] of stage) {
      let queue: StoredJobAdder;
      try {
        queue = queueFor(name);
      } catch (err) {
        const error = asSuretyError(err);
        if (!(error instanceof ValidationError)) {
          stoppedBy = error;
          break stages;
        }
        for (const i of indexes) moves[i] = { kind: 'failed', error };
        continue;
      }
      const group = indexes.map((i) => rows[i]!);
      const stop = await moveGroup(queue, group, (j, m) => {
        moves[indexes[j]!] = m;
      });
      if (stop instanceof PartitionMismatchError) forget(name);
      if (stop instanceof PartitionMismatchError && !autoPartitions) {
        for (const i of indexes) moves[i] = { kind: 'failed', error: stop };
      } else if (stop) {
        stoppedBy = stop;
        break stages;
      }
    }
  }
  // Made only when a row was left: an error captures a stack, and most batches leave none.
  let deferred: SuretyError | undefined;
  return {
    moves: rows.map((_, i) => {
      const move = moves[i];
      if (move) return move;
      deferred ??= stoppedBy ?? new ConnectionError('relay: the batch stopped early', null);
      return { kind: 'deferred', error: deferred };
    }),
    ...(stoppedBy ? { stoppedBy } : {}),
  };
}

/**
 * One queue's rows of a stage, one addBulk call. When Redis refuses the call because of a row (the
 * call writes nothing then), the rows are added one by one to find which. Returns the error that
 * must stop the batch (Redis unreachable or full, a queue-wide refusal), or undefined.
 */
async function moveGroup(
  queue: StoredJobAdder,
  group: readonly LockedRow[],
  set: (j: number, move: Move) => void,
): Promise<SuretyError | undefined> {
  try {
    const added = await queue.add(group);
    for (const [j, a] of added.entries()) set(j, { kind: 'added', isNew: a.isNew, partition: a.partition });
    return undefined;
  } catch (err) {
    const error = asSuretyError(err);
    if (!isRowRefusal(error)) return error;
  }
  for (const [j, r] of group.entries()) {
    try {
      const [a] = await queue.add([r]);
      set(j, { kind: 'added', isNew: a!.isNew, partition: a!.partition });
    } catch (err) {
      const error = asSuretyError(err);
      if (!isRowRefusal(error)) return error;
      const retry = error instanceof JobNotFoundError && r.attempts + 1 < PARENT_TRIES;
      set(j, { kind: retry ? 'deferred' : 'failed', error });
    }
  }
  return undefined;
}

/**
 * A refusal of the job itself, which adding it again would not change: options or data Redis refuses
 * (a ValidationError: a queue address, a CrossPartitionError...), a dependsOn parent that does not
 * exist. Everything else (connection lost, Redis over maxmemory, a partition count to re-read) says
 * nothing about the row and is tried again.
 */
function isRowRefusal(err: SuretyError): boolean {
  return err instanceof ValidationError || err instanceof JobNotFoundError;
}

function asSuretyError(err: unknown): SuretyError {
  if (err instanceof SuretyError) return err;
  return new ConnectionError(`relay: ${err instanceof Error ? err.message : String(err)}`, err);
}

/**
 * The rows cut into stages, each a map queue -> indexes of its rows in order. A row with a parent in
 * another queue (dependsOn `{ queue, id }`) starts a new stage, so every row before it, its parent
 * among them, is in Redis first. Within a stage each queue's rows go in one call, in row order.
 */
function stagesOf(rows: readonly LockedRow[]): Map<string, number[]>[] {
  const stages: Map<string, number[]>[] = [];
  let stage = new Map<string, number[]>();
  rows.forEach((r, i) => {
    if (stage.size > 0 && hasParentElsewhere(r.opts)) {
      stages.push(stage);
      stage = new Map();
    }
    const indexes = stage.get(r.queue);
    if (indexes) indexes.push(i);
    else stage.set(r.queue, [i]);
  });
  if (stage.size > 0) stages.push(stage);
  return stages;
}

function hasParentElsewhere(opts: JobOptions | undefined): boolean {
  // A row written by hand may hold any JSON as its options (the add refuses it then).
  const parents: unknown = (opts as { dependsOn?: unknown } | null)?.dependsOn;
  return Array.isArray(parents) && parents.some((p: string | CrossQueueParent) => typeof p === 'object');
}

/**
 * Step 3: deletes what Redis took, records the errors of the rest, and commits (in the batch's
 * transaction). When Redis took every row, the delete and the commit go in one round trip, the ids
 * written into the statement (`id::text` of the lock query: digits only).
 */
export async function settleRows(
  client: ClientBase,
  n: OutboxNames,
  rows: readonly LockedRow[],
  moves: readonly Move[],
): Promise<void> {
  const done = rows.filter((_, i) => moves[i]!.kind === 'added').map((r) => r.row);
  const kept = rows.flatMap((r, i) => {
    const m = moves[i]!;
    return m.kind === 'added'
      ? []
      : [{ row: r.row, state: m.kind === 'failed' ? 'failed' : 'pending', error: m.error }];
  });
  if (kept.length === 0) {
    if (!done.every((id) => DIGITS.test(id))) throw new RangeError('settleRows: a row id that is not digits');
    await client.query(`DELETE FROM ${n.rows} WHERE id = ANY('{${done.join(',')}}'::bigint[]); COMMIT`);
    return;
  }
  if (done.length > 0) {
    await client.query(`DELETE FROM ${n.rows} WHERE id = ANY($1::bigint[])`, [done]);
  }
  await client.query(
    `UPDATE ${n.rows} AS t
     SET state = x.state, attempts = t.attempts + 1, last_error = x.message, error_code = x.code, error_at = now()
     FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[]) AS x(id, state, message, code)
     WHERE t.id = x.id`,
    [
      kept.map((k) => k.row),
      kept.map((k) => k.state),
      kept.map((k) => k.error.message.slice(0, MAX_MESSAGE_CHARS)),
      kept.map((k) => k.error.code),
    ],
  );
  await client.query('COMMIT');
}

const DIGITS = /^\d+$/;
