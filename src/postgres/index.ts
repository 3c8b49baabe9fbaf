/**
 * `surety/postgres`: effects in PostgreSQL tied to jobs (docs/postgres.md). Needs the `pg` package
 * (an optional peer dependency); Surety never loads it itself, it uses the Pool you pass.
 */
export { type PgStepJob, type PgStepOptions, pgStep } from './pg-step.js';
export { DEFAULT_STEPS_TABLE, migrateSteps, pruneSteps, STEPS_SCHEMA_VERSION } from './steps-table.js';
