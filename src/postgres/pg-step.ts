/**
 * pgStep: a durable step whose effects are writes to PostgreSQL, committed exactly once per job
 * (docs/postgres.md). job.step stores its result in Redis after `fn` returns, so a crash between the
 * two runs `fn` again; here `fn`'s writes and the step's record commit in one transaction, so they
 * exist together or not at all. Only types come from `pg`: the library never loads it.
 */
import type { PoolClient } from 'pg';
import { LeaseExpiredError, ValidationError } from '../errors.js';
import { checkCallOptions, hasControlChars, isWellFormed, show, toJson } from '../validate.js';
import { checkStepName } from '../worker/durable-steps.js';
import type { Job } from '../worker/job.js';
import { type Db, inTransaction, missingTable, stepsTable, withClient } from './steps-table.js';

/**
 * What pgStep reads of a job: a Job, or the job object of a sandboxed processor (which forwards
 * checkLease to the worker's Job).
 */
export type PgStepJob = Pick<Job<unknown>, 'queueName' | 'id' | 'createdAt' | 'attempt' | 'checkLease'>;

export interface PgStepOptions {
  /** The table of step records, as created by migrateSteps (default `surety_steps`). */
  table?: string;
}

/** Largest result a step stores (its JSON, UTF-8 bytes): job.step's limit per step. */
const MAX_RESULT_BYTES = 512 * 1024;

/**
 * A step name: job.step's rule (1-256 characters, no tab or newline, not `~sleep:`), and text that
 * PostgreSQL stores as given (no NUL or other control character, no unpaired UTF-16 surrogate, which
 * UTF-8 would turn into U+FFFD, making two names one).
 */
function checkPgStepName(name: unknown): string {
  const checked = checkStepName(name);
  if (hasControlChars(checked) || !isWellFormed(checked))
    throw new ValidationError(
      `a pgStep name must have no control characters or unpaired UTF-16 surrogates, got ${show(name)}`,
    );
  return checked;
}

/**
 * Runs `fn` once per job for step `name`, in a PostgreSQL transaction that also records the step and
 * its result: `fn`'s writes (through the client it is given) and the record commit together. If an
 * earlier attempt of the job committed the step, `fn` is not run and its stored result is returned.
 *
 * - `db`: a Pool (a client is taken and released) or a PoolClient not inside a transaction (pgStep
 *   begins and ends its own; the client stays the caller's). `fn` must not COMMIT or ROLLBACK.
 * - Fenced start: an attempt that no longer holds its job's lease gets LeaseExpiredError before any
 *   connection is taken. The lease is checked again just before COMMIT: a worker that lost it while
 *   `fn` ran rolls back (a narrow race remains between that check and the COMMIT; the record's key
 *   still lets only one attempt commit).
 * - Two attempts at once (a stale worker and a new one): the record is inserted before `fn` runs, so
 *   the second attempt's insert waits on the first's row until that transaction ends; then it finds
 *   the committed record (and returns its result), or, after a rollback, runs `fn` itself.
 * - The result must be JSON (as job.step's; `undefined` is kept), at most 512 KiB: otherwise
 *   NotSerializableError or PayloadTooLargeError, and the transaction rolls back.
 * - Missing table (migrateSteps never run): PostgresSchemaError.
 */
export async function pgStep<T>(
  job: PgStepJob,
  name: string,
  db: Db,
  fn: (client: PoolClient) => Promise<T> | T,
  opts?: PgStepOptions,
): Promise<T> {
  const step = checkPgStepName(name);
  checkCallOptions('pgStep options', opts, ['table']);
  const t = stepsTable(opts?.table);
  if (typeof fn !== 'function') throw new ValidationError(`pgStep fn must be a function, got ${show(fn)}`);
  await job.checkLease();
  const key = [job.queueName, job.id, job.createdAt, step];
  const where = 'queue = $1 AND job_id = $2 AND job_created_at = $3 AND step = $4';
  return withClient(db, (client) =>
    inTransaction(client, async () => {
      // Claimed, or the committed record found. A record pruned between the two statements is
      // claimed again: each further round needs yet another attempt to have committed the step.
      for (;;) {
        const inserted = await client
          .query(
            `INSERT INTO ${t.sql} (queue, job_id, job_created_at, step, attempt) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (queue, job_id, job_created_at, step) DO NOTHING`,
            [...key, job.attempt],
          )
          .catch((err: unknown) => {
            throw missingTable(err, t);
          });
        if (inserted.rowCount === 1) break;
        // An attempt committed this step (the insert waited for its transaction, if it was open).
        const found = await client.query<{ result: string | null }>(
          `SELECT result FROM ${t.sql} WHERE ${where}`,
          key,
        );
        const row = found.rows[0];
        if (row) return (row.result === null ? undefined : JSON.parse(row.result)) as T;
      }
      const value = await fn(client);
      const json =
        value === undefined
          ? null
          : toJson(`result of pgStep ${step} of job ${job.id}`, value, MAX_RESULT_BYTES);
      await client.query(`UPDATE ${t.sql} SET result = $5 WHERE ${where}`, [...key, json]);
      await job.checkLease().catch((err: unknown) => {
        if (!(err instanceof LeaseExpiredError)) throw err;
        throw new LeaseExpiredError(
          `job ${job.id}: the lease of attempt ${job.attempt} was lost while pgStep ${step} ran; its transaction was rolled back`,
        );
      });
      return value;
    }),
  );
}
