/**
 * `surety/postgres`: Surety with PostgreSQL (docs/postgres.md): the transactional outbox (jobs written
 * in your transaction, moved into Redis by relays once it commits) and pgStep (a step's writes and its
 * record committed together). Needs the `pg` package (an optional peer dependency); Surety never loads
 * it itself, it uses the Pool you pass.
 */
export {
  createOutbox,
  type Outbox,
  type OutboxCounts,
  type OutboxEntry,
  type OutboxOptions,
} from './outbox.js';
export { type PgStepJob, type PgStepOptions, pgStep } from './pg-step.js';
export type { Relay, RelayEvents, RelayOptions, RelayProgress, RelayStats } from './relay.js';
export type { MigrateResult } from './schema.js';
export { DEFAULT_STEPS_TABLE, migrateSteps, pruneSteps, STEPS_SCHEMA_VERSION } from './steps-table.js';
