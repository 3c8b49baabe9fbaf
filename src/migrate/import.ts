/**
 * importFromBullMQ: moves a BullMQ (6.x) queue's work into a Surety queue while BullMQ producers and
 * workers may still run. Schedulers first (move-schedulers.ts), then the jobs of each state
 * (move-jobs.ts): waiting, legacy paused, prioritized, delayed, then failed (as dead). Each job moves
 * in one atomic step, so it is never in both systems nor in neither; a job BullMQ holds active stays
 * there to finish, and the next pass (or the next run) takes whatever BullMQ puts back. Passes repeat
 * while they still move something, up to `passes`. Running it again moves only what is new.
 */
import { Cluster } from 'ioredis';
import { DEFAULT_PREFIX } from '../defaults.js';
import { ImportError, ValidationError } from '../errors.js';
import { resolveQueueOptions } from '../options/queue.js';
import { closestName, escapeGlob, scanKeys } from '../queue/discover.js';
import { type Layout, resolveLayout } from '../queue/partitions.js';
import { Queue } from '../queue/queue.js';
import type { ConnectionOption, RedisClient } from '../redis/client.js';
import { checkServer, closeConnection, connect } from '../redis/connection.js';
import { settling } from '../redis/in-flight.js';
import { callScript, scripts } from '../scripts/specs.js';
import {
  checkCallOptions,
  checkInt,
  checkPrefix,
  checkQueueName,
  hasControlChars,
  show,
} from '../validate.js';
import { type KeptReason, readJobs, type SourceState } from './bullmq-job.js';
import { type BullMQKeys, bullmqKeys, bullmqTakenKey } from './bullmq-keys.js';
import {
  emptyTally,
  type MoveContext,
  moveState,
  releaseCopy,
  type StateTally,
  takeUnchanged,
} from './move-jobs.js';
import { bullSchedulerIds, moveSchedulers, type SchedulerTally } from './move-schedulers.js';

export interface ImportFromBullMQOptions {
  /** The Redis server (or Cluster) of the Surety queue, and of the BullMQ queue unless `from.connection`. */
  connection: ConnectionOption;
  from: {
    /** The BullMQ queue's name. */
    queue: string;
    /** BullMQ's key prefix. Default 'bull'. */
    prefix?: string;
    /** BullMQ's server, when it is not the Surety queue's: jobs are then copied, then taken out of BullMQ. */
    connection?: ConnectionOption;
  };
  /** The Surety queue's name. */
  to: string;
  /** The Surety queue's prefix. Default 'surety'. */
  prefix?: string;
  /** Count and report what would move, and move nothing. Default false. */
  dryRun?: boolean;
  /** Move failed jobs (as dead). Default true. */
  failed?: boolean;
  /** Move job schedulers (to schedules). Default true. */
  schedulers?: boolean;
  /** Passes over the BullMQ states while a pass still moves something: 1-100, default 3. */
  passes?: number;
  onProgress?: (message: string) => void;
}

/** Jobs in each BullMQ state, as `getJobCounts` would count them. */
export interface BullMQCounts {
  waiting: number;
  paused: number;
  prioritized: number;
  delayed: number;
  failed: number;
  active: number;
  completed: number;
  waitingChildren: number;
  schedulers: number;
}

export interface ImportReport {
  from: { queue: string; prefix: string };
  to: string;
  dryRun: boolean;
  /** How the jobs moved: 'atomic' (one server: one script per job) or 'copy' (copy, then take out of BullMQ). */
  mode: 'atomic' | 'copy';
  /** Jobs moved (in a dry run: that would move), by the BullMQ state they came from; failed ones are dead here. */
  moved: Record<SourceState, number> & { total: number };
  /** Schedulers moved to schedules (their ids, which are the schedule keys). */
  schedulers: string[];
  /** Jobs and schedulers left in BullMQ, by reason, and the first 100 of them. */
  kept: {
    total: number;
    byReason: Partial<Record<KeptReason | 'ended', number>>;
    first: { id: string; what: 'job' | 'scheduler'; reason: KeptReason | 'ended'; detail: string }[];
  };
  /** BullMQ options with no Surety equivalent: how many moved jobs (or schedulers) had each. */
  droppedOptions: Record<string, number>;
  /** BullMQ's counts before and after. */
  before: BullMQCounts;
  after: BullMQCounts;
  passes: number;
  /** What a user should know: a paused BullMQ queue, jobs still active there. */
  notes: string[];
}

const STATES: readonly SourceState[] = ['waiting', 'paused', 'prioritized', 'delayed', 'failed'];
const SHOWN = 100;

export async function importFromBullMQ(opts: ImportFromBullMQOptions): Promise<ImportReport> {
  checkCallOptions('importFromBullMQ options', opts ?? null, [
    'connection',
    'from',
    'to',
    'prefix',
    'dryRun',
    'failed',
    'schedulers',
    'passes',
    'onProgress',
  ]);
  if (opts.connection === undefined) throw new ValidationError('importFromBullMQ needs a connection');
  checkCallOptions('from', opts.from ?? null, ['queue', 'prefix', 'connection']);
  const fromQueue = checkBullName('from.queue', opts.from.queue);
  const fromPrefix =
    opts.from.prefix === undefined ? 'bull' : checkBullName('from.prefix', opts.from.prefix, true);
  const to = checkQueueName(opts.to);
  const prefix = opts.prefix === undefined ? DEFAULT_PREFIX : checkPrefix(opts.prefix);
  const passes = checkInt('passes', opts.passes ?? 3, 1, 100);
  for (const flag of ['dryRun', 'failed', 'schedulers'] as const) {
    if (opts[flag] !== undefined && typeof opts[flag] !== 'boolean') {
      throw new ValidationError(`${flag} must be a boolean, got ${show(opts[flag])}`);
    }
  }
  if (opts.onProgress !== undefined && typeof opts.onProgress !== 'function') {
    throw new ValidationError(`onProgress must be a function, got ${show(opts.onProgress)}`);
  }
  const say = opts.onProgress ?? (() => {});
  const dryRun = opts.dryRun ?? false;

  const resolved = resolveQueueOptions({ connection: opts.connection, prefix, partitions: 'auto' });
  const sConn = connect(opts.connection, 'queue');
  const bConn = opts.from.connection === undefined ? sConn : connect(opts.from.connection, 'queue');
  const queue = new Queue(to, { connection: sConn.client, prefix, partitions: 'auto' });
  try {
    // A call whose reply is lost rejects (ConnectionError) instead of hanging: every step is safe to run again.
    const surety = settling(sConn.client);
    const bullmq = bConn === sConn ? surety : settling(bConn.client);
    await checkServer(sConn.client, resolved.strict, resolved.logger);
    const layout = await resolveLayout(surety, prefix, to, 0);
    const bull = bullmqKeys(fromPrefix, fromQueue);
    await checkSourceExists(bullmq, bull);
    const oneServer = bConn === sConn && !(sConn.client instanceof Cluster);
    const before = await countBullMQ(bullmq, bull);
    const report = emptyReport(fromQueue, fromPrefix, to, dryRun, oneServer, before);
    const jobTally = emptyTally();
    if (!oneServer && !dryRun)
      await settleCopies(surety, bullmq, bull, layout, resolved.eventsMaxLen, report, jobTally);

    const schedulerTally: SchedulerTally = { moved: [], kept: [], dropped: new Map() };
    const states = STATES.filter((s) => s !== 'failed' || opts.failed !== false);
    for (let pass = 1; pass <= (dryRun ? 1 : passes); pass++) {
      // What stays in BullMQ is judged afresh by each pass: only the last pass's verdicts are reported.
      jobTally.kept = [];
      schedulerTally.kept = [];
      const movedBefore = jobTally.moved + schedulerTally.moved.length;
      if (opts.schedulers !== false) {
        const before = schedulerTally.moved.length;
        await moveSchedulers({ bullmq, bull, queue, keys: layout.parts[0]!, dryRun }, schedulerTally);
        if (schedulerTally.moved.length > before)
          say(`pass ${pass}: ${schedulerTally.moved.length - before} scheduler(s) moved`);
      }
      const bullSchedulers = await bullSchedulerIds(bullmq, bull);
      // A dry run leaves the schedulers in BullMQ, but their pending occurrences would move as jobs.
      if (dryRun) for (const id of schedulerTally.moved) bullSchedulers.delete(id);
      const idFloor = (await bullmq.get(bull.id)) ?? '';
      const m: MoveContext = {
        surety,
        bullmq,
        oneServer,
        bull,
        layout,
        eventsMaxLen: resolved.eventsMaxLen,
        maxPayloadBytes: resolved.maxPayloadBytes,
        idFloor: /^\d+$/.test(idFloor) ? idFloor : '',
        dryRun,
        bullSchedulers,
      };
      for (const state of states) {
        const moved = jobTally.moved;
        const kept = jobTally.kept.length;
        await moveState(m, state, jobTally);
        report.moved[state] += jobTally.moved - moved;
        if (jobTally.moved > moved || jobTally.kept.length > kept) {
          say(
            `pass ${pass}: ${state}: ${jobTally.moved - moved} moved, ${jobTally.kept.length - kept} kept in BullMQ`,
          );
        }
      }
      report.passes = pass;
      if (jobTally.moved + schedulerTally.moved.length === movedBefore) break;
    }
    if ((await bullmq.hget(bull.meta, 'paused')) !== null) {
      report.notes.push(
        'the BullMQ queue is paused: its jobs arrived here ready to run (pause the Surety queue first to hold them)',
      );
    }
    finishReport(report, jobTally, schedulerTally, dryRun ? before : await countBullMQ(bullmq, bull));
    say(
      `${dryRun ? 'would move' : 'moved'} ${report.moved.total} job(s) and ${report.schedulers.length} scheduler(s); ${report.kept.total} kept in BullMQ`,
    );
    // The marks of the jobs that ran in both systems (copy mode) go once this report names them.
    return report;
  } finally {
    await queue.close();
    if (bConn !== sConn) await closeConnection(bConn);
    await closeConnection(sConn);
  }
}

/** BullMQ queue names and prefixes: no ':' in a name (BullMQ refuses them), no control characters. */
function checkBullName(what: string, value: unknown, colons = false): string {
  if (
    typeof value !== 'string' ||
    value.length === 0 ||
    value.length > 256 ||
    (!colons && value.includes(':')) ||
    hasControlChars(value)
  ) {
    throw new ValidationError(
      `${what} must be a BullMQ ${colons ? 'prefix' : 'queue name'} (1-256 characters${colons ? '' : ", no ':'"}, no control characters), got ${show(value)}`,
    );
  }
  return value;
}

/** A BullMQ queue leaves at least its meta hash or id counter: refuse a name that has neither. */
async function checkSourceExists(client: RedisClient, bull: BullMQKeys): Promise<void> {
  const present = await client.exists(
    bull.meta,
    bull.id,
    bull.wait,
    bull.delayed,
    bull.prioritized,
    bull.failed,
    bull.repeat,
  );
  if (present > 0) return;
  const known = await bullQueueNames(client, bull.prefix);
  const near = closestName(bull.queue, known);
  throw new ImportError(
    `no BullMQ queue ${bull.queue} under prefix ${bull.prefix}${near ? ` (did you mean ${near}?)` : known.length > 0 ? ` (found: ${known.slice(0, 10).join(', ')})` : ''}`,
  );
}

/** Names of the BullMQ queues under `prefix`, from their meta hashes (one SCAN). */
async function bullQueueNames(client: RedisClient, prefix: string): Promise<string[]> {
  const names = new Set<string>();
  await scanKeys(client, `${escapeGlob(prefix)}:*:meta`, (key) => {
    names.add(key.slice(prefix.length + 1, -':meta'.length));
  });
  return [...names].sort();
}

export async function countBullMQ(client: RedisClient, bull: BullMQKeys): Promise<BullMQCounts> {
  const [waiting, paused, prioritized, delayed, failed, active, completed, waitingChildren, schedulers] =
    await Promise.all([
      client.llen(bull.wait),
      client.llen(bull.paused),
      client.zcard(bull.prioritized),
      client.zcard(bull.delayed),
      client.zcard(bull.failed),
      client.llen(bull.active),
      client.zcard(bull.completed),
      client.zcard(bull.waitingChildren),
      client.zcard(bull.repeat),
    ]);
  return { waiting, paused, prioritized, delayed, failed, active, completed, waitingChildren, schedulers };
}

/**
 * Copy mode: held copies a run cut off between the steps left behind (src/scripts/import-copy.lua).
 * Where BullMQ's receipt says the take happened, the copy is released; where the original is still in
 * BullMQ as copied, it is taken now and the copy released; otherwise BullMQ took the job (it runs
 * there) and the held copy, which no worker could see, is deleted.
 */
async function settleCopies(
  surety: RedisClient,
  bullmq: RedisClient,
  bull: BullMQKeys,
  layout: Layout,
  eventsMaxLen: number,
  report: ImportReport,
  tally: StateTally,
): Promise<void> {
  for (const k of layout.parts) {
    const notes = await surety.hgetall(k.imported);
    for (const [id, fingerprint] of Object.entries(notes)) {
      // The take happened (its receipt names this copy): only the release is left.
      if ((await bullmq.get(bullmqTakenKey(bull, id))) === fingerprint) {
        await releaseCopy(surety, k, id, fingerprint, eventsMaxLen);
        continue;
      }
      // The original is still in BullMQ as copied: take it, then release the copy.
      const [raw] = await readJobs(bullmq, bull, [id]);
      const state = raw ? await takeUnchanged(bullmq, bull, k, raw, fingerprint) : null;
      if (state !== null) {
        await releaseCopy(surety, k, id, fingerprint, eventsMaxLen);
        report.moved[state]++;
        tally.moved++;
        continue;
      }
      // BullMQ took it (changed, active, or finished and removed): it runs there.
      await callScript(surety, scripts.importUndo, k, { id, fingerprint });
    }
  }
}

function zeroCounts(): Record<SourceState, number> & { total: number } {
  return { waiting: 0, paused: 0, prioritized: 0, delayed: 0, failed: 0, total: 0 };
}

function emptyReport(
  queue: string,
  prefix: string,
  to: string,
  dryRun: boolean,
  oneServer: boolean,
  before: BullMQCounts,
): ImportReport {
  return {
    from: { queue, prefix },
    to,
    dryRun,
    mode: oneServer ? 'atomic' : 'copy',
    moved: zeroCounts(),
    schedulers: [],
    kept: { total: 0, byReason: {}, first: [] },
    droppedOptions: {},
    before,
    after: before,
    passes: 0,
    notes: [],
  };
}

function finishReport(
  r: ImportReport,
  jobs: StateTally,
  schedulers: SchedulerTally,
  after: BullMQCounts,
): void {
  r.moved.total = STATES.reduce((n, s) => n + r.moved[s], 0);
  r.schedulers = schedulers.moved;
  const kept = [
    ...jobs.kept.map((k) => ({ ...k, what: 'job' as const })),
    ...schedulers.kept.map((k) => ({ ...k, what: 'scheduler' as const })),
  ];
  r.kept.total = kept.length;
  for (const k of kept) r.kept.byReason[k.reason] = (r.kept.byReason[k.reason] ?? 0) + 1;
  r.kept.first = kept.slice(0, SHOWN).map(({ id, what, reason, detail }) => ({ id, what, reason, detail }));
  for (const [name, n] of [...jobs.dropped, ...schedulers.dropped]) {
    r.droppedOptions[name] = (r.droppedOptions[name] ?? 0) + n;
  }
  r.after = after;
  if (after.active > 0) {
    r.notes.push(
      `${after.active} job(s) active in BullMQ finish there; run again to take what BullMQ puts back`,
    );
  }
  if (after.completed > 0)
    r.notes.push(`${after.completed} completed job(s) stay in BullMQ (history is not moved)`);
  if (after.waitingChildren > 0) {
    r.notes.push(
      `${after.waitingChildren} flow parent(s) wait for their children in BullMQ and finish there`,
    );
  }
}
