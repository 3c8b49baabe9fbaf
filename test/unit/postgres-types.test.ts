/** The public types of surety/postgres (checked by the compiler; nothing here connects anywhere). */
import type { ClientBase, Pool, PoolClient } from 'pg';
import { describe, expectTypeOf, it } from 'vitest';
import type { JobOptions, SuretyError } from '../../src/index.js';
import type {
  createOutbox,
  Outbox,
  OutboxEntry,
  Relay,
  RelayProgress,
  RelayStats,
} from '../../src/postgres/index.js';

describe('surety/postgres types', () => {
  it('an outbox takes your Pool, adds with your transaction client, and returns ids', () => {
    expectTypeOf<Parameters<typeof createOutbox>[0]['pool']>().toEqualTypeOf<Pool>();
    expectTypeOf<Outbox['add']>().parameter(0).toEqualTypeOf<ClientBase>();
    expectTypeOf<PoolClient>().toMatchTypeOf<ClientBase>();
    expectTypeOf<Outbox['add']>().parameter(3).toEqualTypeOf<JobOptions | undefined>();
    expectTypeOf<Outbox['add']>().returns.resolves.toEqualTypeOf<{ id: string }>();
    expectTypeOf<Outbox['addBulk']>().returns.resolves.toEqualTypeOf<{ id: string }[]>();
    expectTypeOf<Outbox['failed']>().returns.resolves.toEqualTypeOf<OutboxEntry[]>();
    expectTypeOf<OutboxEntry['error']>().toEqualTypeOf<
      { code?: string; message: string; at: number } | undefined
    >();
    // The Pool is not a transaction's client (outbox.add also refuses it at run time).
    expectTypeOf<Pool>().not.toMatchTypeOf<ClientBase>();
  });

  it('relay events and stats are typed', () => {
    const listen = (r: Relay) => {
      r.on('progress', (p) => expectTypeOf(p).toEqualTypeOf<RelayProgress>());
      r.on('error', (err) => expectTypeOf(err).toEqualTypeOf<SuretyError>());
    };
    expectTypeOf(listen).toBeFunction();
    expectTypeOf<Relay['stats']>().returns.toEqualTypeOf<RelayStats>();
    expectTypeOf<Relay['close']>().returns.toEqualTypeOf<Promise<void>>();
  });
});
