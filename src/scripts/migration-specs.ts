/**
 * The descriptions (see specs.ts) of the scripts that move jobs and schedulers in from a BullMQ queue
 * (src/migrate/): in one step when both live on one server (import-bullmq.lua), else copy here, take
 * out of BullMQ, and take the copy back if BullMQ kept the job. specs.ts joins them into `scripts`.
 */
import { define } from './call.js';
import { decodeCopy, decodeImport, decodeSchedulerDrop, decodeTake, decodeUndo } from './replies.js';

const IMPORT_ARGS = [
  'id',
  'state',
  'created',
  'due',
  'finished',
  'optionTail',
  'data',
  'attempts',
  'errors',
  'logs',
  'progress',
  'idFloor',
] as const;

const SURETY_WRITE_KEYS = [
  'jobs',
  'annex',
  'waiting',
  'prio',
  'seq',
  'delayed',
  'dead',
  'ids',
  'events',
  'meta',
] as const;

export const migrationScripts = {
  importBullmq: define(
    'import-bullmq',
    [...SURETY_WRITE_KEYS, 'bullSource', 'bullJob', 'bullLogs'],
    ['now', 'wakeChannel', 'eventsMaxLen', 'partitions', 'kind', 'fields', 'fingerprint', ...IMPORT_ARGS],
    [],
    decodeImport,
  ),
  importCopy: define(
    'import-copy',
    [...SURETY_WRITE_KEYS, 'imported'],
    ['now', 'wakeChannel', 'eventsMaxLen', 'partitions', 'fingerprint', ...IMPORT_ARGS],
    [],
    decodeCopy,
  ),
  bullmqTake: define(
    'bullmq-take',
    ['bullSource', 'bullJob', 'bullLogs'],
    ['kind', 'id', 'fields', 'fingerprint'],
    [],
    decodeTake,
  ),
  importUndo: define(
    'import-undo',
    ['jobs', 'annex', 'waiting', 'prio', 'delayed', 'dead', 'imported'],
    ['id', 'fingerprint', 'attempts'],
    [],
    decodeUndo,
  ),
  bullmqDropScheduler: define(
    'bullmq-drop-scheduler',
    ['bullRepeat', 'bullScheduler'],
    ['scheduler', 'millis'],
    [],
    decodeSchedulerDrop,
  ),
};
