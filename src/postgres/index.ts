/**
 * `surety/postgres`: Surety with a Postgres database (docs/postgres.md). The transactional outbox:
 * jobs written in your transaction, moved into Redis by relays once it commits.
 */
export {
  createOutbox,
  type Outbox,
  type OutboxCounts,
  type OutboxEntry,
  type OutboxOptions,
} from './outbox.js';
export type { Relay, RelayEvents, RelayOptions, RelayProgress, RelayStats } from './relay.js';
export type { MigrateResult } from './schema.js';
