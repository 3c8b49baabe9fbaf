/**
 * The descriptions (see specs.ts) of the scripts that move jobs and schedulers in from a BullMQ queue
 * (src/migrate/): in one step when both live on one server (import-bullmq.lua), else copy here, take
 * out of BullMQ, and take the copy back if BullMQ kept the job. specs.ts joins them into `scripts`.
 */
import { define } from './call.js';
import {
  decodeCopy,
  decodeImport,
  decodeRelease,
  decodeSchedulerDrop,
  decodeTake,
  decodeUndo,
} from './replies.js';

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
    ['jobs', 'annex', 'ids', 'meta', 'imported'],
    ['now', 'partitions', 'fingerprint', ...IMPORT_ARGS],
    [],
    decodeCopy,
  ),
  bullmqTake: define(
    'bullmq-take',
    ['bullSource', 'bullJob', 'bullLogs', 'bullTaken'],
    ['kind', 'id', 'fields', 'fingerprint'],
    [],
    decodeTake,
  ),
  importRelease: define(
    'import-release',
    ['jobs', 'waiting', 'prio', 'seq', 'delayed', 'dead', 'events', 'imported'],
    ['now', 'wakeChannel', 'eventsMaxLen', 'id', 'fingerprint'],
    [],
    decodeRelease,
  ),
  importUndo: define('import-undo', ['jobs', 'annex', 'imported'], ['id', 'fingerprint'], [], decodeUndo),
  bullmqDropScheduler: define(
    'bullmq-drop-scheduler',
    ['bullRepeat', 'bullScheduler'],
    ['scheduler', 'millis'],
    [],
    decodeSchedulerDrop,
  ),
};
