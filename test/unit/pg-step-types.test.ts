/** pgStep's types: the result is fn's, any Job fits, a Pool or a PoolClient does the talking. */
import type { Pool, PoolClient } from 'pg';
import { describe, expectTypeOf, it } from 'vitest';
import type { Job } from '../../src/index.js';
import { type PgStepJob, pgStep } from '../../src/postgres/index.js';

describe('pgStep types', () => {
  it('returns what fn returns, for any Job and either a Pool or a PoolClient', () => {
    // Checked by the compiler only: never called, so no connection is made.
    const inProcessor = (job: Job<{ orderId: string }>, pool: Pool, client: PoolClient) => {
      expectTypeOf(pgStep(job, 'charge', pool, async () => ({ paymentId: 'p1' }))).resolves.toEqualTypeOf<{
        paymentId: string;
      }>();
      expectTypeOf(pgStep(job, 'audit', client, () => undefined)).resolves.toEqualTypeOf<undefined>();
      expectTypeOf(pgStep<number>)
        .parameter(3)
        .parameter(0)
        .toEqualTypeOf<PoolClient>();
    };
    expectTypeOf<Job<{ orderId: string }>>().toMatchTypeOf<PgStepJob>();
    expectTypeOf<PgStepJob['checkLease']>().returns.toEqualTypeOf<Promise<void>>();
    void inProcessor;
  });
});
