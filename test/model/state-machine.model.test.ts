/**
 * Model-based test: random sequences of operations run against the real scripts (on a private Redis,
 * with an injected clock) and against the in-memory model of the state machine in helpers/model.ts.
 * After every step, every job (state, attempts, errors, timestamps, data, result, options), the counts,
 * the waiting order and the scores of every sorted set must agree, and so must every call's reply.
 *
 * Expiring jobs (ttlMs, expireAt), the expiry sweep and dedupe keys (throttle, debounce) are among the
 * operations; besides the comparison, invariants are checked on Redis's state alone (a job that expired
 * never started, a held dedupe key makes no second job, a started job is never rewritten).
 *
 * Imports from BullMQ are among them too (import-bullmq.lua; copy mode: import-copy.lua, bullmq-take.lua,
 * import-release.lua, import-undo.lua): a fake BullMQ job is seeded under `bullmodel:<queue>:` (hash,
 * log, a place in its wait list or its prioritized, delayed or failed zset), sometimes changed, deleted
 * or taken there, and brought in waiting, delayed or dead with attempts already charged; the imported
 * job then meets every other operation. After each import the BullMQ side must have lost exactly the
 * job moved, or nothing. A copy is held (its record only, in no list or set: no claim gets it) until
 * it is released or undone, sometimes only by a later operation (a run cut off after the take).
 *
 * Three simulated workers claim jobs and keep the claims they hold until they send an outcome for them,
 * so after a recovery they send stale tokens, as a stalled worker would; they also re-send outcomes, as
 * a worker does after a lost reply. A failing run throws with the trace of resolved calls and replies.
 * Sequences found by the property are kept below as named examples.
 *
 * Soak it with more runs: MODEL_RUNS=5000 npx vitest run test/model/state-machine.model.test.ts
 */
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { type ChainableCommander, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { DEFAULT_LEASE_MS, DEFAULT_MAX_ATTEMPTS, FREE_RETURNS } from '../../src/defaults.js';
import { Queue } from '../../src/index.js';
import { fingerprint } from '../../src/migrate/bullmq-job.js';
import { LIBRARY_JOB_DEFAULTS, resolveAddOptions } from '../../src/options/job.js';
import { MAX_PENDING_SIGNALS } from '../../src/queue/signals.js';
import {
  type ArgValue,
  runScript,
  type ScriptKeys,
  type ScriptSpec,
  scripts,
} from '../../src/scripts/specs.js';
import { decodeClaimed, encodeOptionTail } from '../../src/store/job-record.js';
import { dedupeKey, dedupeNextKey, handoffChannel, queueKeys } from '../../src/store/keys.js';
import type { JobInfo, JobOptions } from '../../src/types.js';
import { NO_HANDOFF } from '../helpers/claim-args.js';
import {
  type AdminReply,
  type BullTake,
  type FailKind,
  type Held,
  type ModelConfig,
  type ModelDedupe,
  type ModelError,
  type ModelImport,
  QueueModel,
  STATE_NAMES,
  type WaitSignalReply,
} from '../helpers/model.js';
import { uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();

const T0 = 1_700_000_000_000;
const LEASE = 1_000;
const LIMIT = 1_000;
// At most 3: the model predicts prune_claims, which samples 4 fields of `claims` (one handoff record
// per worker, and worker 0's claim ticket).
const WORKERS = 3;
/** The one worker whose claims carry a ticket (claimer `mw0.0`): its lost replies are sent again. */
const TICKETED = 0;
/** How long a claim's registration for a handoff lasts (ticks move time by up to 3 s). */
const REGISTER_MS = 2_000;
/** Runs of the main property (the focused ones do half); about 8 ms each. */
const RUNS = Number(process.env.MODEL_RUNS ?? 400);
/**
 * A property's time follows the machine's load (on 2 busy cores a run can take several times as
 * long): its timeout must not decide its verdict, so it is set far above any run (and grows with RUNS).
 */
const PROPERTY_TIMEOUT_MS = 300_000 * Math.max(1, RUNS / 400);
/** Ids callers pick; '3' collides with generated ids, which must then skip it. */
const POOL = ['a', 'b', '3'] as const;
/** Dedupe keys adds pick from: few, so adds meet a held key often. */
const DEDUPE_KEYS = ['k1', 'k2'] as const;
/**
 * The ttl a dedupe key gets in Redis. Redis expires keys on its own clock, which the model cannot
 * move: the harness ends a window on the model's clock by deleting the key (what Redis's expiry does),
 * and gives the key a ttl no run outlives, so the scripts see a key with a ttl while it lasts.
 */
const REDIS_WINDOW_MS = 3_600_000;
const RESULT = 'done';
const ERROR_JSON = `{"name":"Error","message":"boom","code":"E_MODEL"}`;
/** The code of the error lines a job brings from BullMQ (the migration maps its stack traces to lines). */
const BULL_ERROR_CODE = 'E_BULL';
/** What every fake BullMQ job logged and reported (not in the model: checked once it is written here). */
const BULL_LOGS = ['log one', 'log twö'];
const BULL_PROGRESS = 50;
/** Signal names: 'g' is a prefix of 'go', so a name must match whole. */
const SIGNAL_NAMES = ['go', 'g', 'stop'] as const;
/** Payloads of signals: undefined, a few constants, and (index 3) one numbered object per send. */
const SIGNAL_PAYLOADS = [undefined, 0, 'x', 'numbered'] as const;
/**
 * The most signals a job keeps unconsumed in the random runs, low so that 'full' comes up (the named
 * example sends MAX_PENDING_SIGNALS, the library's cap).
 */
const SIGNAL_CAP = 3;
/** Wait timeouts: none (parked without end), or within the range of the ticks. */
const WAIT_TIMEOUTS = [0, 500, 500, 1_500] as const;

// ---- operations ----------------------------------------------------------------------------------

type Target = { pool: number } | { known: number };
interface AddOpts {
  priority: number;
  maxAttempts?: number | undefined;
  leaseMs?: number | undefined;
  /** Last in, first out (docs/data-layout.md): the front of its line each time it becomes waiting. */
  lifo?: boolean | undefined;
}
/** An expiry (docs/job-control.md): `ttlMs`, or `expireAt` this long after the add (on the model's clock). */
type Expiry = { ttlMs: number } | { expireAtIn: number };
interface Later {
  id: number | null;
  delayMs?: number;
  runAtIn?: number;
  expiry?: Expiry | undefined;
}

type Op =
  | ({ op: 'add'; id: number | null } & AddOpts)
  | { op: 'bulk'; items: { id: number | null; priority: number; lifo?: boolean | undefined }[] }
  | ({ op: 'addLater' } & Later & AddOpts)
  /**
   * An outbox relay's add (add.lua with its mark `<row>:<id>`): a job whose mark is there but which is
   * gone (run and deleted, removed) answers as existing, letter `g`, and is not created again.
   */
  | ({ op: 'outbox'; row: number } & Later & AddOpts)
  /** The relay forgetting a mark once its row's delete committed (add.lua with no job). */
  | { op: 'forget'; row: number; id: number }
  | ({
      op: 'dedupe';
      /** Index into DEDUPE_KEYS. */
      key: number;
      /** k: debounce with keepLastIfActive (never with a window). */
      mode: 't' | 'd' | 'k';
      windowMs?: number | undefined;
    } & Later &
      AddOpts)
  | { op: 'expire' }
  | {
      op: 'claim';
      w: number;
      count: number;
      freeSlots?: number | undefined;
      register?: boolean | undefined;
      units?: number | undefined;
      /** Worker 0 only: the reply is lost, so its next claim sends this one again (same ticket). */
      lost?: boolean | undefined;
    }
  | { op: 'gone'; w: number }
  | { op: 'start'; w: number }
  | { op: 'complete'; w: number; pick: number | 'all'; marks?: boolean | undefined }
  | { op: 'fail'; w: number; pick: number | 'all'; retryDelayMs: number; as?: FailKind }
  | { op: 'resend'; w: number }
  | { op: 'extend'; w: number }
  | { op: 'release'; w: number }
  | { op: 'tick'; ms: number }
  | { op: 'recover' }
  | { op: 'retry' | 'remove' | 'promote' | 'cancel'; target: Target }
  | { op: 'changeDelay'; target: Target; delayMs: number }
  /** queue.signal: to a known job, a pool id, or one no job has; `count` sends (only examples send many). */
  | { op: 'signal'; target: Target | { unknown: true }; name: number; payload: number; count?: number }
  /**
   * job.waitForSignal by a worker: the n-th wait of a job it holds (`old`: a claim from any time in
   * the run, which may be stale), as the client sends it (it replays a wait whose result is stored).
   */
  | { op: 'waitSignal'; w: number; pick: number; old: boolean; name: number; n: number; timeoutMs: number }
  /** A worker sends its last wait again, as after a lost reply. */
  | { op: 'resendWait'; w: number }
  | { op: 'pause' | 'resume' }
  | ({ op: 'import'; tamper: BullTamper } & BullJob)
  | ({
      op: 'importCopy';
      /** The copy is sent twice (its reply lost): the second answers 'copied' for its own copy. */
      resend: boolean;
      /**
       * Between copy and take: nothing, a claim by worker `w`, or a claim and its start mark (the claim
       * must not get the held copy).
       */
      between: 'none' | 'claim' | 'start';
      w: number;
      /** What the take out of BullMQ finds: the job as read, taken by a BullMQ worker, or changed. */
      bull: 'as-read' | 'taken' | 'changed';
      /**
       * After the take: the release (or the undo) sent once; sent twice (its reply lost: the second
       * finds no note, 'absent'); or the run cut off there, the copy left held among the operations
       * that follow until a `settle` (only ids 'q' and 'r', which no add and no admin call touch).
       */
      end: 'once' | 'twice' | 'cut';
    } & BullJob)
  /** A later import run settles the copies a cut-off run left held: released after a take, else undone. */
  | { op: 'settle' };

/**
 * A job in the fake BullMQ queue (fields and structures as BullMQ keeps them, under `bullmodel:`), and
 * the arguments the migration (src/migrate/bullmq-job.ts mapJob) would send for it.
 */
interface BullJob {
  /** Index into IMPORT_IDS. */
  id: number;
  /** Waiting (BullMQ wait list, or prioritized zset), delayed, or dead (failed zset). */
  state: 'w' | 'd' | 'x';
  maxAttempts: number;
  /** Attempts made: this modulo maxAttempts (w, d) or maxAttempts + 1 (x, where all may be spent). */
  attemptsPick: number;
  priority: number;
  lifo: boolean;
  /** Error lines: 0..2 (BullMQ's stack traces, the latest with its failedReason). */
  errors: number;
  /** BullMQ's timestamp, this long before now (ties of due times go by creation). */
  createdAgo: number;
  /** Delayed: due this long after now (<= 0: due already, so it arrives waiting). */
  dueIn: number;
  /** Dead: finished this long before now (retention may take it at the next trim). */
  finishedAgo: number;
  /** Data over 512 bytes (kept in the annex). */
  big: boolean;
  /** BullMQ's id counter sent as idFloor: null = '' (leave the counter), else the setup's counter + this. */
  idFloor: number | null;
}

/**
 * What happens to the BullMQ job between the read and the import: nothing, a value changed (same
 * length), a field added or dropped, two values that still concatenate the same (the fingerprint's
 * length prefixes tell them apart), the hash deleted, a fingerprint of an earlier read sent, or the
 * job taken out of the structure it was read in by a BullMQ worker.
 */
type BullTamper = 'none' | 'value' | 'extra' | 'missing' | 'shift' | 'deleted' | 'stale' | 'taken';

interface Setup {
  keepCount: number;
  keepAgeMs: number;
  /** Counters seeded where long use leaves them (0 = a new queue): generated ids, priority order. */
  ids?: number;
  seq?: number;
}

const optsArb = fc.record(
  {
    priority: fc.constantFrom(0, 0, 0, -2, -1, 1, 4),
    maxAttempts: fc.constantFrom(undefined, 1, 2),
    leaseMs: fc.constantFrom(undefined, undefined, 2_500),
    lifo: fc.constantFrom(undefined, undefined, true, false),
  },
  { requiredKeys: ['priority'] },
);
const poolIdArb = fc.option(fc.nat({ max: POOL.length - 1 }), { nil: null, freq: 2 });
const workerArb = fc.nat({ max: WORKERS - 1 });
const pickArb = fc.oneof(fc.nat({ max: 3 }), fc.constant('all' as const));
const targetArb: fc.Arbitrary<Target> = fc.oneof(
  fc.record({ pool: fc.nat({ max: POOL.length - 1 }) }),
  fc.record({ known: fc.nat({ max: 7 }) }),
);

/**
 * Expiries in the range of the ticks (up to 3 s), so jobs expire waiting, delayed, leased and after a
 * free return; expireAt 0 ms after the add is due at once.
 */
const expiryArb: fc.Arbitrary<Expiry | undefined> = fc.option(
  fc.oneof(
    fc.record({ ttlMs: fc.constantFrom(250, 1_000, 2_500) }),
    fc.record({ expireAtIn: fc.constantFrom(0, 500, 1_500, 4_000) }),
  ),
  { nil: undefined, freq: 2 },
);

/**
 * Adds with a dedupe key: throttle (with and without a window), debounce (often delayed) and debounce
 * with keepLastIfActive, on the same few keys, so the modes meet each other's keys too.
 */
const dedupeArb: fc.Arbitrary<Op> = fc
  .record(
    {
      op: fc.constant('dedupe' as const),
      id: fc.option(fc.nat({ max: POOL.length - 1 }), { nil: null, freq: 4 }),
      key: fc.nat({ max: DEDUPE_KEYS.length - 1 }),
      mode: fc.constantFrom<'t' | 'd' | 'k'>('t', 't', 'd', 'd', 'k', 'k'),
      windowMs: fc.constantFrom(undefined, undefined, 1_000, 4_000),
      delayMs: fc.constantFrom(0, 500, 1_500),
      expiry: expiryArb,
    },
    { requiredKeys: ['op', 'id', 'key', 'mode'] },
  )
  .map((o) => (o.mode === 'k' ? { ...o, windowMs: undefined } : o))
  .chain(withOpts);

/** Explicit ids of a bulk that generated ids would take ('1', '2' on a new queue) next to the pool's. */
const bulkIdArb = fc.option(fc.constantFrom(0, 1, 2, 3, 4), { nil: null, freq: 2 });
const BULK_IDS = ['a', 'b', '3', '1', '2'] as const;
/**
 * Ids of jobs brought in from BullMQ: the pool's and those generated ids take first (taken here often:
 * the import answers 'exists'), and two only imports use (taken only by an earlier import).
 */
const IMPORT_IDS = [...BULK_IDS, 'q', 'r'] as const;

/** A completion of some held jobs, start marks of the others riding on it or not. */
const completeArb: fc.Arbitrary<Op> = fc.record(
  { op: fc.constant('complete' as const), w: workerArb, pick: pickArb, marks: fc.boolean() },
  { requiredKeys: ['op', 'w', 'pick'] },
);

const bullJobArb: fc.Arbitrary<BullJob> = fc.record({
  id: fc.constantFrom(0, 1, 2, 3, 4, 5, 5, 6, 6),
  state: fc.constantFrom<'w' | 'd' | 'x'>('w', 'w', 'd', 'd', 'x'),
  maxAttempts: fc.constantFrom(1, 2, 3),
  attemptsPick: fc.nat({ max: 5 }),
  priority: fc.constantFrom(0, 0, 0, -1, 1, 4),
  lifo: fc.constantFrom(false, false, false, true),
  errors: fc.constantFrom(0, 0, 1, 2),
  createdAgo: fc.constantFrom(0, 250, 3_000, 86_400_000),
  dueIn: fc.constantFrom(-1_000, 0, 500, 1_000, 2_500),
  finishedAgo: fc.constantFrom(0, 500, 2_000, 60_000),
  big: fc.constantFrom(false, false, false, true),
  idFloor: fc.constantFrom(null, null, 2, 5),
});

/** Imports from the fake BullMQ queue: mostly the job as read, else each way a take fails. */
const importArb: fc.Arbitrary<Op> = bullJobArb.chain((j) =>
  fc
    .constantFrom<BullTamper>(
      'none',
      'none',
      'none',
      'none',
      'none',
      'none',
      'value',
      'extra',
      'missing',
      'shift',
      'deleted',
      'stale',
      'taken',
      'taken',
    )
    .map((tamper) => ({ op: 'import' as const, tamper, ...j })),
);

/**
 * Copy mode: copy (sent once or twice), maybe a claim and a start mark, the take, then release or undo
 * (sent once or twice), or the run cut off before them (the copy stays held, on 'q' or 'r').
 */
const importCopyArb: fc.Arbitrary<Op> = bullJobArb.chain((j) =>
  fc
    .record({
      resend: fc.constantFrom(false, false, true),
      between: fc.constantFrom<'none' | 'claim' | 'start'>('none', 'claim', 'start'),
      w: workerArb,
      bull: fc.constantFrom<'as-read' | 'taken' | 'changed'>('as-read', 'taken', 'taken', 'changed'),
      end: fc.constantFrom<'once' | 'twice' | 'cut'>('once', 'once', 'twice', 'cut'),
    })
    .map((o) => ({
      op: 'importCopy' as const,
      ...o,
      ...j,
      id: o.end === 'cut' && j.id < 5 ? 5 + (j.id % 2) : j.id,
    })),
);

const signalArb: fc.Arbitrary<Op> = fc.record({
  op: fc.constant('signal' as const),
  target: fc.oneof(
    { weight: 6, arbitrary: fc.record({ known: fc.nat({ max: 7 }) }) },
    { weight: 2, arbitrary: fc.record({ pool: fc.nat({ max: POOL.length - 1 }) }) },
    { weight: 1, arbitrary: fc.constant({ unknown: true as const }) },
  ),
  name: fc.constantFrom(0, 0, 0, 1, 2),
  payload: fc.nat({ max: SIGNAL_PAYLOADS.length - 1 }),
});
const waitSignalArb: fc.Arbitrary<Op> = fc.record({
  op: fc.constant('waitSignal' as const),
  w: workerArb,
  pick: fc.nat({ max: 7 }),
  old: fc.constantFrom(false, false, false, false, true),
  name: fc.constantFrom(0, 0, 0, 1, 2),
  n: fc.constantFrom(0, 0, 1),
  timeoutMs: fc.constantFrom(...WAIT_TIMEOUTS),
});
const changeDelayArb: fc.Arbitrary<Op> = fc.record({
  op: fc.constant('changeDelay' as const),
  target: fc.record({ known: fc.nat({ max: 7 }) }),
  delayMs: fc.constantFrom(0, 0, 500, 1_500),
});

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('add' as const), id: poolIdArb }).chain(withOpts) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('bulk' as const),
      items: fc.array(
        fc.record(
          { id: bulkIdArb, priority: fc.constantFrom(0, 0, -1, 4), lifo: fc.constantFrom(undefined, true) },
          { requiredKeys: ['id', 'priority'] },
        ),
        { minLength: 1, maxLength: 6 },
      ),
    }),
  },
  {
    weight: 2,
    arbitrary: fc
      .record({
        op: fc.constant('addLater' as const),
        id: poolIdArb,
        when: fc.oneof(
          fc.record({ delayMs: fc.constantFrom(0, 500, 1_000, 2_500) }),
          fc.record({ runAtIn: fc.constantFrom(-500, 0, 1_000) }),
        ),
        expiry: expiryArb,
      })
      .chain(({ when, ...rest }) => withOpts({ ...rest, ...when })),
  },
  // A plain job due now that expires: never handed off, ended by a claim or the sweep if not started.
  {
    weight: 2,
    arbitrary: fc
      .record({
        op: fc.constant('addLater' as const),
        id: poolIdArb,
        runAtIn: fc.constant(0),
        expiry: expiryArb.filter((e) => e !== undefined),
      })
      .chain(withOpts)
      .map((o) => ({ ...o, priority: 0 })),
  },
  { weight: 4, arbitrary: dedupeArb },
  // The recovery pass's expiry sweep (expire.lua).
  { weight: 2, arbitrary: fc.constant({ op: 'expire' as const }) },
  // A plain job due now, on the model's clock: what a handoff can take (add-one.lua).
  {
    weight: 6,
    arbitrary: fc
      .record({ op: fc.constant('addLater' as const), id: poolIdArb, runAtIn: fc.constant(0) })
      .chain(withOpts)
      .map((o) => ({ ...o, priority: 0 })),
  },
  {
    weight: 4,
    arbitrary: fc.record(
      {
        op: fc.constant('claim' as const),
        w: workerArb,
        count: fc.integer({ min: 1, max: 3 }),
        // The worker's free slots (they size a handoff registration). Absent: count.
        freeSlots: fc.nat({ max: 3 }),
        // Left with free slots, the fetcher registers for a handoff (add-one.lua).
        register: fc.boolean(),
        // The most jobs a registration may be handed (the worker's free slots).
        units: fc.integer({ min: 1, max: 3 }),
        lost: fc.boolean(),
      },
      { requiredKeys: ['op', 'w', 'count'] },
    ),
  },
  // A worker whose subscriber is gone: a handoff to it finds no receiver.
  { weight: 1, arbitrary: fc.record({ op: fc.constant('gone' as const), w: workerArb }) },
  // Start marks: alone (start.lua), or riding on a completion (complete.lua's `starts`).
  { weight: 2, arbitrary: fc.record({ op: fc.constant('start' as const), w: workerArb }) },
  { weight: 2, arbitrary: completeArb },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('fail' as const),
      w: workerArb,
      pick: pickArb,
      retryDelayMs: fc.constantFrom(0, 0, 500, 2_000, -1),
      // A failure, or a SnoozeError (S) / RateLimitError (R), which fail.lua takes as no failure.
      as: fc.constantFrom<FailKind>('E', 'E', 'E', 'S', 'R'),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('resend' as const), w: workerArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('extend' as const), w: workerArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('release' as const), w: workerArb }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('tick' as const),
      ms: fc.integer({ min: 0, max: 12 }).map((x) => x * 250),
    }),
  },
  { weight: 3, arbitrary: fc.constant({ op: 'recover' as const }) },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constantFrom('retry' as const, 'remove' as const, 'promote' as const, 'cancel' as const),
      target: targetArb,
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constantFrom('pause' as const, 'resume' as const, 'resume' as const) }),
  },
  // Jobs brought in from a fake BullMQ queue (import-bullmq.lua), and in copy mode (import-copy.lua,
  // bullmq-take.lua, import-release.lua, import-undo.lua).
  { weight: 3, arbitrary: importArb },
  { weight: 2, arbitrary: importCopyArb },
  { weight: 1, arbitrary: fc.constant({ op: 'settle' as const }) },
  // Signals (docs/workflows.md#signals): sends, waits that take, time out or park, re-sent waits.
  { weight: 2, arbitrary: signalArb },
  { weight: 2, arbitrary: waitSignalArb },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('resendWait' as const), w: workerArb }) },
  { weight: 1, arbitrary: changeDelayArb },
);

/**
 * Signals among the transitions around a wait: adds (some delayed), claims, start marks, waits (with
 * the holder's token or a stale one), signals to known, pool and unknown ids, re-sent waits, outcomes
 * (snoozes too), recoveries, the clock moving past deadlines, and the admin calls that move a parked
 * job (promote, changeDelay, cancel, remove, retry).
 */
const signalOpArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc
      .record({
        op: fc.constant('addLater' as const),
        id: poolIdArb,
        delayMs: fc.constantFrom(0, 0, 0, 500),
      })
      .chain(withOpts),
  },
  {
    weight: 8,
    arbitrary: fc.record({
      op: fc.constant('claim' as const),
      w: workerArb,
      count: fc.integer({ min: 1, max: 3 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('start' as const), w: workerArb }) },
  { weight: 10, arbitrary: waitSignalArb },
  { weight: 4, arbitrary: signalArb },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('resendWait' as const), w: workerArb }) },
  { weight: 1, arbitrary: completeArb },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('fail' as const),
      w: workerArb,
      pick: pickArb,
      retryDelayMs: fc.constantFrom(0, 500, 1_500, -1),
      as: fc.constantFrom<FailKind>('E', 'S', 'S'),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('tick' as const),
      ms: fc.integer({ min: 1, max: 8 }).map((x) => x * 250),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ op: 'recover' as const }) },
  { weight: 2, arbitrary: changeDelayArb },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constantFrom('retry' as const, 'remove' as const, 'promote' as const, 'cancel' as const),
      target: fc.record({ known: fc.nat({ max: 7 }) }),
    }),
  },
);

/** Few kinds of operations on one id: it is often removed or trimmed and added anew while stale workers hold it. */
const reuseOpArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({ op: fc.constant('add' as const), id: fc.constant(0), priority: fc.constant(0) }),
  },
  {
    weight: 3,
    arbitrary: fc.record(
      {
        op: fc.constant('claim' as const),
        w: workerArb,
        count: fc.constant(1),
        freeSlots: fc.nat({ max: 1 }),
      },
      { requiredKeys: ['op', 'w', 'count'] },
    ),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('start' as const), w: workerArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('complete' as const), w: workerArb, pick: pickArb }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('fail' as const),
      w: workerArb,
      pick: pickArb,
      retryDelayMs: fc.constantFrom(0, -1),
    }),
  },
  { weight: 2, arbitrary: fc.constant({ op: 'tick' as const, ms: 1_500 }) },
  { weight: 2, arbitrary: fc.constant({ op: 'recover' as const }) },
  { weight: 2, arbitrary: fc.constant({ op: 'remove' as const, target: { pool: 0 } }) },
  { weight: 1, arbitrary: fc.constant({ op: 'cancel' as const, target: { pool: 0 } }) },
  // The outbox relay: its adds (ids fixed, two rows that may carry the same id) and its forgets.
  {
    weight: 2,
    arbitrary: fc
      .record({
        op: fc.constant('outbox' as const),
        id: fc.nat({ max: POOL.length - 1 }),
        row: fc.nat({ max: 1 }),
        runAtIn: fc.constant(0),
      })
      .chain(withOpts),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('forget' as const),
      id: fc.nat({ max: POOL.length - 1 }),
      row: fc.nat({ max: 1 }),
    }),
  },
  // The id brought in from BullMQ (waiting, delayed or dead, attempts charged) while stale workers hold it.
  {
    weight: 1,
    arbitrary: bullJobArb.map((j) => ({ op: 'import' as const, tamper: 'none' as const, ...j, id: 0 })),
  },
);

/**
 * Expiring jobs and dedupe keys among the transitions that decide them: claims (which end expired jobs
 * they take), start marks, outcomes (a snooze or rate limit keeps a job started), recoveries (a free
 * return keeps it unstarted), sweeps, and the admin calls that give a window back or clear an expiry.
 */
const featureOpArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: dedupeArb },
  {
    weight: 3,
    arbitrary: fc
      .record({
        op: fc.constant('addLater' as const),
        id: poolIdArb,
        delayMs: fc.constantFrom(0, 0, 500, 2_000),
        expiry: expiryArb.filter((e) => e !== undefined),
      })
      .chain(withOpts),
  },
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constant('claim' as const),
      w: workerArb,
      count: fc.integer({ min: 1, max: 2 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('start' as const), w: workerArb }) },
  // A prefetched job handed back unstarted (release.lua): it keeps its expiry, for the next claim.
  { weight: 1, arbitrary: fc.record({ op: fc.constant('release' as const), w: workerArb }) },
  { weight: 2, arbitrary: completeArb },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('fail' as const),
      w: workerArb,
      pick: pickArb,
      retryDelayMs: fc.constantFrom(0, 500, 1_500, -1),
      as: fc.constantFrom<FailKind>('E', 'S', 'S', 'R'),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('tick' as const),
      ms: fc.integer({ min: 1, max: 12 }).map((x) => x * 250),
    }),
  },
  { weight: 2, arbitrary: fc.constant({ op: 'recover' as const }) },
  { weight: 3, arbitrary: fc.constant({ op: 'expire' as const }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constantFrom('retry' as const, 'remove' as const, 'cancel' as const, 'promote' as const),
      target: fc.record({ known: fc.nat({ max: 7 }) }),
    }),
  },
);

/**
 * Dedupe with keepLastIfActive around the transitions that end or keep a running job: adds on one key
 * (sometimes a plain debounce add, with or without a window, meeting it), claims, start marks,
 * completions, failures with and without a retry, snoozes, recoveries (free returns, charged losses),
 * releases, expiries, and cancel or remove of the running job or of its pending successor.
 */
const keepLastOpArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .record(
        {
          op: fc.constant('dedupe' as const),
          id: fc.constant(null),
          key: fc.constantFrom(0, 0, 0, 1),
          mode: fc.constantFrom<'d' | 'k'>('k', 'k', 'k', 'k', 'd'),
          windowMs: fc.constantFrom(undefined, undefined, 1_000),
          delayMs: fc.constantFrom(0, 0, 500),
          expiry: fc.option(fc.record({ ttlMs: fc.constantFrom(250, 2_500) }), { nil: undefined, freq: 4 }),
        },
        { requiredKeys: ['op', 'id', 'key', 'mode'] },
      )
      .map((o) => (o.mode === 'k' ? { ...o, windowMs: undefined } : o))
      .chain(withOpts),
  },
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constant('claim' as const),
      w: workerArb,
      count: fc.integer({ min: 1, max: 2 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('start' as const), w: workerArb }) },
  { weight: 3, arbitrary: completeArb },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('fail' as const),
      w: workerArb,
      pick: pickArb,
      retryDelayMs: fc.constantFrom(0, 500, -1),
      as: fc.constantFrom<FailKind>('E', 'E', 'S'),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('release' as const), w: workerArb }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('tick' as const),
      ms: fc.integer({ min: 1, max: 6 }).map((x) => x * 250),
    }),
  },
  { weight: 2, arbitrary: fc.constant({ op: 'recover' as const }) },
  { weight: 1, arbitrary: fc.constant({ op: 'expire' as const }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constantFrom('remove' as const, 'cancel' as const, 'retry' as const),
      target: fc.record({ known: fc.nat({ max: 7 }) }),
    }),
  },
);

function withOpts<T extends object>(base: T): fc.Arbitrary<T & AddOpts> {
  return optsArb.map((o) => ({ ...base, ...o }));
}

/** Counters near the points where 32-bit arithmetic (or a % 2^31) would wrap. */
const counterArb = fc.constantFrom(0, 0, 2 ** 31 - 3, 2 ** 32 - 3);
const setupArb: fc.Arbitrary<Setup> = fc
  .tuple(
    fc.oneof(
      fc.constant({ keepCount: 1_000_000, keepAgeMs: 1_000_000_000 }),
      fc.record({ keepCount: fc.integer({ min: 0, max: 3 }), keepAgeMs: fc.constantFrom(1_500, 4_000) }),
    ),
    counterArb,
    counterArb,
  )
  .map(([keep, ids, seq]) => ({ ...keep, ids, seq }));

// ---- the real queue, driven with an injected clock ------------------------------------------------

/** A claim as a worker holds it: what the model knows of it, plus the real token. */
interface Claimed extends Held {
  token: string;
}

interface SimWorker {
  /** Its fetcher id, for handoffs: registrations in `idle`, its channel. */
  fetcher: string;
  /** Claims it sent (their nonces), and the one whose registration may stand (its next claim withdraws it). */
  nonces: number;
  registered: { nonce: string; units: number; received: number } | null;
  /** A claim whose reply was lost (its ticket's nonce, its count, the tokens it gave): sent again next. */
  lost: { nonce: string; count: number; freeSlots: number | undefined; tokens: Map<string, string> } | null;
  held: Claimed[];
  last: { kind: 'complete' | 'fail'; rows: Claimed[]; retryDelayMs: number; as: FailKind } | null;
  /** Its last wait for a signal sent to Redis, for a re-send. */
  lastWait: { claim: Claimed; name: string; n: number; timeoutMs: number } | null;
}

class Divergence extends Error {}

type BullSeed = ReturnType<Harness['bullJob']>;
/** A fake BullMQ job as Redis holds it: its hash, its log, and the structure it was read in. */
interface BullState {
  hash: Record<string, string>;
  logs: string[];
  members: string[];
}

class Harness {
  readonly name = uniqueName('model');
  readonly keys = queueKeys('surety', this.name);
  /** The fake BullMQ queue imports take jobs from: a namespace of its own, read by no other script. */
  private readonly bull = `bullmodel:${this.name}`;
  readonly queue = new Queue(this.name, { connection: fx.redis });
  readonly model: QueueModel;
  readonly workers: SimWorker[] = Array.from({ length: WORKERS }, (_, i) => ({
    fetcher: `mw${i}`,
    nonces: 0,
    registered: null,
    lost: null,
    held: [],
    last: null,
    lastWait: null,
  }));
  /** Every claim a worker received in this run (stale ones too), for waits sent with an old token. */
  private readonly claims: Claimed[] = [];
  /** Numbers the numbered signal payloads, so a payload taken twice or swapped shows. */
  private signals = 0;
  /** The most signals a job keeps unconsumed (SIGNAL_CAP in random runs). */
  signalCap = SIGNAL_CAP;
  /** Listens on every worker's handoff channel (so a handoff has a receiver) until the worker is `gone`. */
  private readonly subscriber = new Redis(fx.url);
  readonly trace: string[] = [];
  /** Every token a claim returned in this run. */
  private readonly tokens = new Set<string>();
  /** The reply of the last dedupe add (id, isNew, state letter), for the fixed examples. */
  lastReply: [string, number, string] | null = null;
  /** Numbers the data of each add, so a record that loses or swaps its data shows. */
  private adds = 0;
  /** Copies a cut-off run left held after the take (importCopy, end 'cut'), for a later `settle`. */
  private readonly cutOff: { s: BullSeed; taken: BullTake }[] = [];
  private readonly cfg: ModelConfig;

  constructor(readonly setup: Setup) {
    const { ids, seq, ...keep } = setup;
    this.cfg = {
      now: T0,
      defaultLeaseMs: LEASE,
      defaultMaxAttempts: 3,
      ...keep,
      idStart: ids ?? 0,
    };
    this.model = new QueueModel(this.cfg);
    this.trace.push(
      `setup keepCount=${setup.keepCount} keepAgeMs=${setup.keepAgeMs} ids=${ids ?? 0} seq=${seq ?? 0}`,
    );
  }

  /** Seeds the counters where the setup says (before the first step). */
  async seed(): Promise<void> {
    await this.subscriber.ssubscribe(...this.workers.map((w) => handoffChannel(this.keys, w.fetcher)));
    if (this.setup.ids) await fx.redis.set(this.keys.ids, this.setup.ids);
    if (this.setup.seq) await fx.redis.set(this.keys.seq, this.setup.seq);
  }

  get now(): number {
    return this.model.now;
  }

  private log(line: string): void {
    this.trace.push(`${at(this.now)} ${line}`);
  }

  private agree(what: string, actual: unknown, expected: unknown): void {
    if (isDeepStrictEqual(actual, expected)) return;
    throw new Divergence(
      `${what}\n  scripts: ${JSON.stringify(actual)}\n  model:   ${JSON.stringify(expected)}\ntrace:\n  ${this.trace.join('\n  ')}`,
    );
  }

  /** An invariant on what the scripts wrote, checked without the model. */
  private check(what: string, actual: unknown, expected: unknown): void {
    if (isDeepStrictEqual(actual, expected)) return;
    throw new Divergence(
      `invariant: ${what}\n  got:      ${JSON.stringify(actual)}\n  expected: ${JSON.stringify(expected)}\ntrace:\n  ${this.trace.join('\n  ')}`,
    );
  }

  private target(t: Target): string {
    if ('pool' in t) return POOL[t.pool]!;
    // Not a held copy: an admin call on one is outside what the copy mode covers (see importCopy).
    const ids = [...this.model.jobs.keys()].filter((id) => !this.model.heldCopies.has(id)).sort();
    return ids.length === 0 ? 'none' : ids[t.known % ids.length]!;
  }

  /** The `n`th (modulo) of the workers that `can` do the operation, or null when none can. */
  private workerFor(n: number, can: (w: SimWorker) => boolean): number | null {
    const able = this.workers.flatMap((w, i) => (can(w) ? [i] : []));
    return able.length === 0 ? null : able[n % able.length]!;
  }

  private pick(w: SimWorker, pick: number | 'all'): Claimed[] {
    if (w.held.length === 0) return [];
    const rows = pick === 'all' ? w.held.splice(0) : w.held.splice(pick % w.held.length, 1);
    return rows;
  }

  /**
   * Runs a script with the injected clock, taking every argument it declares by name from the
   * harness's settings (so a script that gains an argument fails here by name, not by position).
   */
  private run<A extends string, R extends string>(
    spec: ScriptSpec<A, R>,
    extra: Record<string, ArgValue>,
    rows: readonly Record<R, ArgValue>[] = [],
    keys: ScriptKeys = this.keys,
  ): Promise<unknown> {
    const values: Record<string, ArgValue> = {
      now: this.now,
      defaultLeaseMs: LEASE,
      defaultMaxAttempts: this.cfg.defaultMaxAttempts,
      limit: LIMIT,
      keepCount: this.setup.keepCount,
      keepAgeMs: this.setup.keepAgeMs,
      wakeChannel: this.keys.wakeChannel,
      doneChannel: this.keys.doneChannel,
      rateMax: 0, // no rate limit
      rateWindowMs: 0,
      eventsMaxLen: 100, // events on, so their cost in the scripts is exercised
      partitions: 1,
      idSuffix: '',
      checkOnly: '',
      batch: '', // no batches here (test/behaviour/batches.test.ts)
      cbId: '',
      cbPriority: 0,
      cbDelayMs: '',
      cbRunAt: '',
      cbTail: '',
      cbData: '',
      outboxMarks: '', // the outbox relay's marks: test/behaviour/outbox.test.ts
      outboxForget: '',
      claimer: '', // claims keep no record here (test/processes/network-blip.test.ts covers claim retries)
      nonce: '',
      freeSlots: '',
      starts: '', // no start marks ride on a completion unless a complete op says so (below)
      // No fetcher registers for a handoff unless a claim op says so (below).
      ...NO_HANDOFF,
      leaseMs: DEFAULT_LEASE_MS,
      ...extra,
    };
    const args = {} as Record<A, ArgValue>;
    for (const a of spec.args) {
      const v = values[a];
      if (v === undefined)
        throw new Error(`model.test.ts has no value for argument ${a} of ${spec.name}.lua`);
      args[a] = v;
    }
    return runScript(fx.redis, spec, keys, args, rows);
  }

  async step(op: Op): Promise<void> {
    switch (op.op) {
      case 'add': {
        const id = op.id === null ? null : POOL[op.id]!;
        const jobOpts: JobOptions = {
          priority: op.priority,
          maxAttempts: op.maxAttempts,
          leaseMs: op.leaseMs,
          lifo: op.lifo,
        };
        if (id !== null) jobOpts.id = id;
        const data = { n: ++this.adds };
        const got = await this.queue.add(data, clean(jobOpts));
        // A plain job goes by add-one.lua on Redis's clock, years past the model's: any registration
        // is stale to it, so it drops them all (handoffs are exercised by addLater, on the model's clock).
        const { handedTo, ...want } = this.model.add(
          id,
          op,
          null,
          data,
          undefined,
          op.priority === 0 ? DEFAULT_LEASE_MS : undefined,
          Number.MAX_SAFE_INTEGER,
        );
        if (want.isNew) await this.takeCreatedAt([want.id]);
        this.log(`add(${fmtOpts(op, id)}) -> ${got.id} ${got.isNew ? 'new' : 'exists'} ${got.state}`);
        this.agree('add reply', got, { ...want, state: STATE_NAMES[want.state] });
        if (handedTo) await this.handedOff(handedTo, data.n);
        break;
      }
      case 'bulk': {
        const items = op.items.map((it) => ({
          id: it.id === null ? null : BULK_IDS[it.id]!,
          opts: { priority: it.priority, lifo: it.lifo },
          data: { n: ++this.adds },
        }));
        const got = await this.queue.addBulk(
          items.map((it) => ({
            data: it.data,
            opts: clean({ id: it.id ?? undefined, priority: it.opts.priority, lifo: it.opts.lifo }),
          })),
        );
        // queue.addBulk runs on Redis's clock, years past the model's: every delayed job is due to it.
        const want = this.model
          .addBulk(items, Number.MAX_SAFE_INTEGER)
          .map((w) => ({ ...w, state: STATE_NAMES[w.state] }));
        await this.takeCreatedAt(want.filter((w) => w.isNew).map((w) => w.id));
        this.log(
          `addBulk([${items.map((it) => fmtOpts(it.opts, it.id)).join('; ')}]) -> ${got.map((g) => `${g.id} ${g.isNew ? 'new' : 'exists'}`).join(', ')}`,
        );
        this.agree('addBulk reply', got, want);
        break;
      }
      case 'addLater':
        await this.addLater(op);
        break;
      case 'outbox':
        await this.addFromOutbox(op);
        break;
      case 'forget': {
        const mark = `${op.row}:${POOL[op.id]}`;
        await this.run(scripts.add, { outboxForget: mark });
        this.outboxMarks.delete(mark);
        this.log(`forget outbox mark ${mark}`);
        break;
      }
      case 'dedupe':
        await this.addDeduped(op);
        break;
      case 'expire': {
        const got = (await this.run(scripts.expire, {})) as string[];
        const want = this.model.expire();
        this.log(`expire -> ended ${JSON.stringify(got)}`);
        this.agree('expire reply (jobs ended by expiry, in index order)', got, want);
        break;
      }
      case 'gone': {
        const w = this.workers[op.w]!;
        if (this.model.gone.has(w.fetcher)) break;
        await this.subscriber.sunsubscribe(handoffChannel(this.keys, w.fetcher));
        this.model.gone.add(w.fetcher);
        this.log(`w${op.w} gone: nobody listens on its handoff channel`);
        break;
      }
      case 'claim': {
        const sim = this.workers[op.w]!;
        // A worker whose claim reply was lost sends that claim again, with the same ticket, before any
        // other; a claim is lost only where nothing else rides on it (no registration to withdraw or make).
        const retry = sim.lost;
        const lose = op.w === TICKETED && op.lost === true && !retry && !sim.registered && !op.register;
        const count = retry?.count ?? op.count;
        const freeSlots = retry ? retry.freeSlots : op.freeSlots;
        const handoff = {
          fetcher: sim.fetcher,
          nonce: retry?.nonce ?? String(++sim.nonces),
          withdraw: sim.registered?.nonce ?? null,
          registerMs: op.register && !retry ? REGISTER_MS : 0,
          registerUnits: op.units ?? 1,
          withdrawUnits: sim.registered?.units ?? 0,
          received: sim.registered?.received ?? 0,
        };
        const ticket =
          op.w === TICKETED
            ? { claimer: `${sim.fetcher}.0`, nonce: retry ? `r${retry.nonce}` : handoff.nonce }
            : undefined;
        const r = (await this.run(scripts.claim, {
          count,
          freeSlots: freeSlots ?? '',
          ...handoff,
          withdraw: handoff.withdraw ?? '',
          ...ticket,
        })) as (string | number)[];
        // { now, nextDue, paused, ...more fields, id1, record1, ... }: claimed pairs start at the first record.
        // { now, nextDue, paused, limitedMs, registered, replayed, id1, record1, ... }: the last
        // `replayed` pairs are handoffs of the withdrawn registration.
        const pairs: { id: string; attempt: number; token: string }[] = [];
        for (let i = 6; i < r.length; i += 2) {
          const c = decodeClaimed(String(r[i + 1]));
          pairs.push({ id: String(r[i]), attempt: c.attempts, token: c.token });
        }
        const units = Number(r[4]);
        const replayedGot = pairs.splice(pairs.length - Number(r[5]));
        const got = pairs;
        const want = this.model.claim(count, freeSlots, handoff, ticket);
        const nextDue = r[1] === '' ? null : Number(r[1]);
        const starts = `${freeSlots === undefined ? '' : `, freeSlots=${freeSlots}`}${ticket ? ` ticket ${ticket.nonce}` : ''}`;
        const flag = `${r[2] === 1 ? ' paused' : ''}${units > 0 ? ` registered for ${units}` : ''}${replayedGot.length > 0 ? ` replayed [${replayedGot.map(fmtHeld).join(', ')}]` : ''}`;
        const withdrew = handoff.withdraw
          ? ` withdraw=${handoff.withdraw}(${handoff.withdrawUnits}, received ${handoff.received})`
          : '';
        const reg = `${withdrew}${op.register ? ` register#${handoff.nonce}(<=${handoff.registerUnits})` : ''}`;
        this.log(
          `w${op.w}.claim(${count}${starts}${reg}) -> [${got.map(fmtHeld).join(', ')}] nextDue=${at(nextDue ?? undefined)}${flag}${lose ? ' (reply lost)' : ''}${want.retried ? ' (replay)' : ''}`,
        );
        this.agree(
          'claim reply: jobs (id#attempt) in claim order, nextDue, paused, registered, replayed handoffs',
          [
            got.map((g) => `${g.id}#${g.attempt}`),
            nextDue,
            r[2] === 1,
            units,
            replayedGot.map((g) => `${g.id}#${g.attempt}`),
            Number(r[0]),
          ],
          [
            want.held.map((h) => `${h.id}#${h.attempt}`),
            want.nextDue,
            want.paused,
            want.registered,
            want.replayed.map((h) => `${h.id}#${h.attempt}`),
            this.now,
          ],
        );
        sim.registered =
          want.registered > 0 ? { nonce: handoff.nonce, units: want.registered, received: 0 } : null;
        sim.lost = null;
        if (want.retried) {
          // The lost claim's jobs still under its leases, each with the very token that claim gave it.
          for (const g of got) this.agree(`token of replayed ${g.id}`, g.token, retry!.tokens.get(g.id));
        } else
          for (const g of got) {
            this.agree(
              `token of ${g.id}#${g.attempt} is new in the queue's history`,
              this.tokens.has(g.token),
              false,
            );
            this.tokens.add(g.token);
          }
        if (lose) {
          sim.lost = {
            nonce: handoff.nonce,
            count,
            freeSlots,
            tokens: new Map(got.map((g) => [g.id, g.token])),
          };
          break; // the worker never learns of these jobs until its retry
        }
        const fresh = want.held.map((h, i) => ({ ...h, token: got[i]!.token }));
        this.workers[op.w]!.held.push(...fresh);
        this.claims.push(...fresh);
        // Replayed handoffs: the worker keeps those whose message it did not take (the fetcher's dedupe).
        for (const [i, h] of want.replayed.entries()) {
          const token = replayedGot[i]!.token;
          if (sim.held.some((x) => x.id === h.id && x.token === token)) continue;
          this.agree(
            `token of replayed ${h.id}#${h.attempt} is new to its worker`,
            this.tokens.has(token),
            false,
          );
          this.tokens.add(token);
          sim.held.push({ ...h, token });
          this.claims.push({ ...h, token });
        }
        break;
      }
      case 'complete':
      case 'fail':
      case 'resend': {
        const wi = this.workerFor(op.w, (w) => (op.op === 'resend' ? w.last !== null : w.held.length > 0));
        if (wi === null)
          return this.log(`${op.op}: no worker ${op.op === 'resend' ? 'sent anything yet' : 'holds a job'}`);
        const w = this.workers[wi]!;
        let kind: 'complete' | 'fail';
        let rows: Claimed[];
        let retryDelayMs = 0;
        let as: FailKind = 'E';
        if (op.op === 'resend') {
          ({ kind, rows, retryDelayMs, as } = w.last!);
        } else {
          kind = op.op;
          rows = this.pick(w, op.pick);
          if (op.op === 'fail') {
            retryDelayMs = op.retryDelayMs;
            as = op.as ?? 'E';
          }
          w.last = { kind, rows, retryDelayMs, as };
        }
        const verb = `w${wi}.${op.op === 'resend' ? 'resend ' : ''}${kind}`;
        if (kind === 'complete') {
          // Marks of the jobs the worker still holds ride on the call (a resend carries none).
          const marks = op.op === 'complete' && op.marks ? [...w.held] : [];
          const got = pairs(await this.completeScript(rows, marks));
          const want = this.model.complete(rows, marks);
          const with_ = marks.length > 0 ? `, starts [${marks.map(fmtHeld).join(', ')}]` : '';
          this.log(`${verb}([${rows.map(fmtHeld).join(', ')}]${with_}) -> refused ${JSON.stringify(got)}`);
          this.agree(`${kind} reply (refused rows)`, got, want);
        } else {
          const got = pairs(await this.failScript(rows, retryDelayMs, as));
          const want = this.model.fail(rows, retryDelayMs, as);
          this.log(
            `${verb}([${rows.map(fmtHeld).join(', ')}], retryDelayMs=${retryDelayMs}${as === 'E' ? '' : `, ${as}`}) -> ${JSON.stringify(got)}`,
          );
          this.agree(`${kind} reply`, got, want);
        }
        break;
      }
      case 'extend': {
        const wi = this.workerFor(op.w, (w) => w.held.length > 0);
        if (wi === null) return this.log('extend: no worker holds a job');
        const rows = this.workers[wi]!.held;
        const got = (await this.run(
          scripts.extend,
          {},
          rows.map((h) => ({ id: h.id, token: h.token })),
        )) as string[];
        const want = this.model.extend(rows);
        this.log(`w${wi}.extend([${rows.map(fmtHeld).join(', ')}]) -> lost ${JSON.stringify(got)}`);
        this.agree('extend reply (lost ids)', got, want);
        break;
      }
      case 'release': {
        // The worker sends every job it holds; the script hands back those it never started (as the
        // worker's own bookkeeping would pick them) and the worker keeps the others.
        const wi = this.workerFor(op.w, (w) => w.held.length > 0);
        if (wi === null) return this.log('release: no worker holds a job');
        const w = this.workers[wi]!;
        const rows = [...w.held];
        const got = (await this.run(
          scripts.release,
          {},
          rows.map((h) => ({ id: h.id, token: h.token })),
        )) as string[];
        // release.lua reads Redis's clock, years past the model's: every delayed job is due to it.
        const want = this.model.release(rows, Number.MAX_SAFE_INTEGER);
        this.log(`w${wi}.release([${rows.map(fmtHeld).join(', ')}]) -> ${JSON.stringify(got)}`);
        this.agree('release reply (jobs handed back)', [...got].sort(), want.map((h) => h.id).sort());
        w.held = w.held.filter((h) => !want.includes(h));
        break;
      }
      case 'start': {
        const wi = this.workerFor(op.w, (w) => w.held.length > 0);
        if (wi === null) return this.log('start: no worker holds a job');
        const rows = this.workers[wi]!.held;
        const got = (await this.run(
          scripts.start,
          {},
          rows.map((h) => ({ id: h.id, token: h.token })),
        )) as string[];
        const want = this.model.start(rows);
        this.log(`w${wi}.start([${rows.map(fmtHeld).join(', ')}]) -> lost ${JSON.stringify(got)}`);
        this.agree('start reply (lost ids)', got, want);
        break;
      }
      case 'tick': {
        this.model.now += op.ms;
        // Dedupe windows that ended on the model's clock: their keys expire (see REDIS_WINDOW_MS).
        const ended = this.model.endWindows();
        if (ended.length > 0) await fx.redis.del(...ended.map((key) => dedupeKey(this.keys, key)));
        this.log(`tick ${op.ms}${ended.length > 0 ? ` (dedupe windows ended: ${ended.join(', ')})` : ''}`);
        return;
      }
      case 'recover': {
        const [requeued, dead] = (await this.run(scripts.recover, {})) as [string[], string[]];
        const want = this.model.recover();
        this.log(`recover -> requeued ${JSON.stringify(requeued)} dead ${JSON.stringify(dead)}`);
        // The reply's order is not specified; the waiting order is checked below.
        this.agree(
          'recover reply (requeued, dead)',
          [[...requeued].sort(), [...dead].sort()],
          [[...want.requeued].sort(), [...want.dead].sort()],
        );
        break;
      }
      case 'retry':
      case 'remove':
      case 'promote': {
        // The scripts are called directly, on the model's clock (what they promote first depends on it).
        const id = this.target(op.target);
        const got = await this.run(scripts[op.op], { id });
        const want: AdminReply = this.model[op.op](id);
        this.log(`${op.op}(${id}) -> ${got}`);
        this.agree(`${op.op} reply`, got, want);
        break;
      }
      case 'cancel': {
        // Queue.cancel() uses the Redis clock; the script is called directly to inject ours.
        const id = this.target(op.target);
        const got = await this.run(scripts.cancel, { id });
        const want = this.model.cancel(id);
        this.log(`cancel(${id}) -> ${got}`);
        this.agree('cancel reply', got, want);
        break;
      }
      case 'changeDelay': {
        // The script is called directly, on the model's clock (queue.changeDelay uses Redis's).
        const id = this.target(op.target);
        const got = await this.run(scripts.changeDelay, { id, delayMs: op.delayMs });
        const want = this.model.changeDelay(id, op.delayMs);
        this.log(`changeDelay(${id}, ${op.delayMs}) -> ${got}`);
        this.agree('changeDelay reply', got, want);
        break;
      }
      case 'signal':
        for (let i = 0; i < (op.count ?? 1); i++) await this.signal(op);
        break;
      case 'waitSignal': {
        const wi = this.workerFor(op.w, (w) => op.old || w.held.length > 0);
        if (wi === null || (op.old && this.claims.length === 0))
          return this.log('waitSignal: no worker holds a job');
        const w = this.workers[wi]!;
        const claim = op.old ? this.claims[op.pick % this.claims.length]! : w.held[op.pick % w.held.length]!;
        const name = SIGNAL_NAMES[op.name]!;
        // The client replays a wait whose result is stored (src/worker/signal-wait.ts) and calls no script.
        const steps = (await fx.redis.hget(this.keys.annex, `${claim.id}\x01s`)) ?? '';
        if (`\n${steps}`.includes(`\n~signal:${op.n}\t`)) {
          this.log(`w${wi}.waitSignal(${fmtHeld(claim)}, ${name}, n=${op.n}) -> replayed from its step`);
          break;
        }
        await this.waitSignal(wi, { claim, name, n: op.n, timeoutMs: op.timeoutMs });
        break;
      }
      case 'resendWait': {
        const wi = this.workerFor(op.w, (w) => w.lastWait !== null);
        if (wi === null) return this.log('resendWait: no worker waited yet');
        await this.waitSignal(wi, this.workers[wi]!.lastWait!, true);
        break;
      }
      case 'import':
        await this.importOne(op);
        break;
      case 'importCopy':
        await this.importCopy(op);
        break;
      case 'settle':
        await this.settle();
        break;
      case 'pause':
      case 'resume':
        await this.queue[op.op]();
        this.model.paused = op.op === 'pause';
        if (op.op === 'resume') this.model.limitedUntil = 0; // resume also lifts a RateLimitError pause
        this.log(op.op);
        break;
    }
    await this.compareState();
  }

  /** The fake BullMQ structure a job is read in: wait list, or the prioritized, delayed or failed zset. */
  private bullSource(b: BullJob): { key: string; kind: 'list' | 'zset' } {
    const name =
      b.state === 'x' ? 'failed' : b.state === 'd' ? 'delayed' : b.priority !== 0 ? 'prioritized' : 'wait';
    return { key: `${this.bull}:${name}`, kind: name === 'wait' ? 'list' : 'zset' };
  }

  /**
   * Job `b` as the fake BullMQ queue will hold it (its hash and log), the arguments the migration
   * would send for it (mapJob's mapping, src/migrate/bullmq-job.ts), and what the model is told.
   */
  private bullJob(b: BullJob) {
    const id = IMPORT_IDS[b.id]!;
    const now = this.now;
    const attempts = b.attemptsPick % (b.state === 'x' ? b.maxAttempts + 1 : b.maxAttempts);
    const created = now - b.createdAgo;
    const due = b.state === 'd' ? now + b.dueIn : undefined;
    const finished = b.state === 'x' ? now - b.finishedAgo : undefined;
    const data = { n: ++this.adds, from: 'bullmq é', ...(b.big ? { pad: 'x'.repeat(600) } : {}) };
    const errors: ModelError[] = Array.from({ length: b.errors }, (_, i) => ({
      at: finished ?? created,
      attempt: Math.max(1, attempts - (b.errors - 1 - i)),
      code: BULL_ERROR_CODE,
    }));
    const stack = 'Error: bull\n    at work (job.js:1:1)';
    const bullOpts = {
      attempts: b.maxAttempts,
      ...(b.priority !== 0 ? { priority: b.priority } : {}),
      ...(b.lifo ? { lifo: true } : {}),
      ...(due !== undefined ? { delay: due - created } : {}),
    };
    const values: Record<string, string> = {
      name: 'jöb',
      data: JSON.stringify(data),
      opts: JSON.stringify(bullOpts),
      timestamp: String(created),
      delay: String(due === undefined ? 0 : due - created),
      priority: String(b.priority),
      atm: String(attempts),
      progress: String(BULL_PROGRESS),
    };
    if (b.errors > 0) {
      values.failedReason = 'bull';
      values.stacktrace = JSON.stringify(errors.map(() => stack));
    }
    if (finished !== undefined) values.finishedOn = String(finished);
    const fields = Object.keys(values);
    const source = this.bullSource(b);
    const keys = {
      bullSource: source.key,
      bullJob: `${this.bull}:${id}`,
      bullLogs: `${this.bull}:${id}:logs`,
      bullTaken: `${this.bull}:${id}:surety-taken`,
    };
    const o = resolveAddOptions(
      clean({
        id,
        name: 'jöb',
        maxAttempts: b.maxAttempts,
        backoff: { type: 'fixed', delayMs: 0 },
        priority: b.priority === 0 ? undefined : b.priority,
        lifo: b.lifo ? true : undefined,
      }),
      LIBRARY_JOB_DEFAULTS,
    );
    const model: ModelImport = {
      state: b.state,
      created,
      due,
      finished,
      priority: b.priority,
      maxAttempts: b.maxAttempts,
      lifo: b.lifo,
      attempts,
      errors,
      data,
      idFloor: b.idFloor === null ? undefined : (this.setup.ids ?? 0) + b.idFloor,
    };
    const args = {
      kind: source.kind,
      fields: fields.join('\n'),
      fingerprint: fingerprint(fields.map((f) => Buffer.from(values[f]!))),
      id,
      state: b.state,
      created,
      due: due ?? '',
      finished: finished ?? '',
      optionTail: encodeOptionTail(o, { name: o.name, keep: o.keep, lifo: o.lifo }),
      data: JSON.stringify(data),
      attempts,
      errors: errors
        .map(
          (e) =>
            `${e.at}|${e.attempt}|${JSON.stringify({ name: 'Error', message: 'bull', code: e.code, stack })}`,
        )
        .join('\n'),
      logs: BULL_LOGS.map((l) => JSON.stringify(l)).join('\n'),
      progress: String(BULL_PROGRESS),
      idFloor: model.idFloor ?? '',
    };
    const when =
      due !== undefined ? ` due=${at(due)}` : finished !== undefined ? ` finished=${at(finished)}` : '';
    const fmt = [
      `${id} ${b.state}${when} attempts=${attempts}/${b.maxAttempts}`,
      b.priority !== 0 ? `priority=${b.priority}` : '',
      b.lifo ? 'lifo' : '',
      b.errors > 0 ? `errors=${b.errors}` : '',
      `created=${at(created)}`,
      b.big ? 'big' : '',
      model.idFloor !== undefined ? `idFloor=${model.idFloor}` : '',
      `from ${source.kind} ${source.key.slice(this.bull.length + 1)}`,
    ]
      .filter((x) => x !== '')
      .join(' ');
    return { id, n: data.n, values, source, keys, args, model, fmt };
  }

  /**
   * Runs `write` on the fake BullMQ queue and reads job `s` there (its hash, its log, the structure it
   * was read in), in one MULTI.
   */
  private async onBull(s: BullSeed, write: (m: ChainableCommander) => void): Promise<BullState> {
    const m = fx.redis.multi();
    write(m);
    m.hgetall(s.keys.bullJob);
    m.lrange(s.keys.bullLogs, 0, -1);
    if (s.source.kind === 'list') m.lrange(s.source.key, 0, -1);
    else m.zrange(s.source.key, 0, -1, 'WITHSCORES');
    const replies = (await m.exec())!.map(([err, r]) => {
      if (err) throw err;
      return r;
    });
    const [hash, logs, members] = replies.slice(-3) as [Record<string, string>, string[], string[]];
    return { hash, logs, members };
  }

  /**
   * Seeds job `s` in the fake BullMQ queue (its hash, its log, its place in its structure behind a
   * newer job), after clearing whatever an earlier step left of that id there; `more` changes it
   * further. Returns the job as seeded.
   */
  private seedBull(s: BullSeed, more: (m: ChainableCommander) => void = () => {}): Promise<BullState> {
    return this.onBull(s, (m) => {
      m.del(s.keys.bullJob, s.keys.bullLogs);
      m.lrem(`${this.bull}:wait`, 0, s.id);
      m.lrem(`${this.bull}:active`, 0, s.id);
      for (const z of ['prioritized', 'delayed', 'failed']) m.zrem(`${this.bull}:${z}`, s.id);
      m.hset(s.keys.bullJob, s.values);
      m.rpush(s.keys.bullLogs, ...BULL_LOGS);
      // Older jobs nearer the tail (BullMQ takes from there), as the migration moves them.
      if (s.source.kind === 'list') m.lpush(s.source.key, s.id, `f${s.n}`);
      else {
        const score = s.model.due ?? s.model.finished ?? 0;
        m.zadd(s.source.key, score, s.id, score + 1, `f${s.n}`);
      }
      more(m);
    });
  }

  /** A BullMQ worker takes job `s`: it leaves the structure it was read in for the active list. */
  private takenInBull(m: ChainableCommander, s: BullSeed): void {
    if (s.source.kind === 'list') m.lrem(s.source.key, 0, s.id);
    else m.zrem(s.source.key, s.id);
    m.lpush(`${this.bull}:active`, s.id);
  }

  /**
   * After a script: a job moved out of BullMQ has no hash, no log and no place in its structure there
   * (every other member stays); a job not moved is exactly as it was. A job written here keeps its log
   * lines and progress (the model does not follow them).
   */
  private async checkBull(s: BullSeed, before: BullState, moved: boolean, written: boolean): Promise<void> {
    const [after, annex] = await Promise.all([
      this.onBull(s, () => {}),
      written ? fx.redis.hmget(this.keys.annex, `${s.id}\x01l`, `${s.id}\x01p`) : null,
    ]);
    if (annex)
      this.check(`imported ${s.id} keeps its log and progress`, annex, [s.args.logs, s.args.progress]);
    if (!moved) return this.check(`the BullMQ job ${s.id} is left as it was`, after, before);
    const members =
      s.source.kind === 'list'
        ? before.members.filter((m) => m !== s.id)
        : pairs(before.members)
            .filter(([m]) => m !== s.id)
            .flat();
    this.check(`the BullMQ job ${s.id} moved: gone from BullMQ, and only it`, after, {
      hash: {},
      logs: [],
      members,
    });
  }

  /**
   * import-bullmq.lua: a job seeded in the fake BullMQ queue (then changed or taken there, as `tamper`
   * says) is brought in; the model predicts the reply and the job, and the BullMQ side is checked.
   */
  private async importOne(op: Extract<Op, { op: 'import' }>): Promise<void> {
    const s = this.bullJob(op);
    const args = { ...s.args };
    if (op.tamper === 'stale') {
      // The caller read an earlier version of the hash.
      args.fingerprint = fingerprint(
        Object.values({ ...s.values, atm: `${s.values.atm}0` }).map((v) => Buffer.from(v)),
      );
    }
    const before = await this.seedBull(s, (m) => {
      switch (op.tamper) {
        case 'value': // same length: only the bytes differ
          m.hset(s.keys.bullJob, 'atm', String((Number(s.values.atm) + 1) % 10));
          break;
        case 'extra': // a BullMQ worker took it and wrote processedOn (then gave it back)
          m.hset(s.keys.bullJob, 'processedOn', String(this.now));
          break;
        case 'missing':
          m.hdel(s.keys.bullJob, 'opts');
          break;
        case 'shift': // name + data concatenate as before: only the length prefixes tell the hashes apart
          m.hset(
            s.keys.bullJob,
            'name',
            s.values.name!.slice(0, -1),
            'data',
            s.values.name!.slice(-1) + s.values.data,
          );
          break;
        case 'deleted': // finished and removed in BullMQ
          m.del(s.keys.bullJob, s.keys.bullLogs);
          if (s.source.kind === 'list') m.lrem(s.source.key, 0, s.id);
          else m.zrem(s.source.key, s.id);
          break;
        case 'taken':
          this.takenInBull(m, s);
          break;
      }
    });
    const take: BullTake = op.tamper === 'none' ? 'moved' : op.tamper === 'taken' ? 'gone' : 'changed';
    const got = await this.run(scripts.importBullmq, args, [], { ...this.keys, ...s.keys });
    const want = this.model.importJob(s.id, s.model, take);
    this.log(`import(${s.fmt}${op.tamper === 'none' ? '' : `, BullMQ: ${op.tamper}`}) -> ${got}`);
    this.agree('import reply', got, want);
    await this.checkBull(s, before, got === 'moved', got === 'moved');
  }

  /**
   * Copy mode (import-copy.lua, bullmq-take.lua, import-release.lua, import-undo.lua, as
   * importFromBullMQ runs them across servers): the copy, sent again when `resend`, held in no list or
   * set; then maybe a claim of the queue's next job (never the held copy) and its start mark; then the
   * take out of BullMQ, which leaves a receipt when it moves the job; then the release of the copy
   * after a take, or its undo when BullMQ kept the job, sent twice when `end` says so, or left to a
   * later `settle` when the run is cut off.
   */
  private async importCopy(op: Extract<Op, { op: 'importCopy' }>): Promise<void> {
    const s = this.bullJob(op);
    const seeded = await this.seedBull(s);
    let copied = '';
    for (let i = 0; i < (op.resend ? 2 : 1); i++) {
      const got = String(await this.run(scripts.importCopy, s.args));
      const want = this.model.importCopy(s.id, s.model, s.args.fingerprint);
      this.log(`importCopy(${s.fmt})${i > 0 ? ' sent again' : ''} -> ${got}`);
      this.agree('importCopy reply', got, want);
      if (i === 0) copied = got;
    }
    // A copy never touches BullMQ; with the id taken here, the move stops (there is nothing to undo).
    await this.checkBull(s, seeded, false, copied === 'copied');
    if (copied === 'exists') return;
    await this.compareState();
    await this.checkHeld(s.id);
    // No receipt of an earlier move of this id (no copy of it is held: it was not in the jobs hash).
    await fx.redis.del(s.keys.bullTaken);
    if (op.between !== 'none') {
      const sim = this.workers[op.w]!;
      const before = sim.held.length;
      await this.step({ op: 'claim', w: op.w, count: 1 });
      this.check(
        `a claim never gets the held copy ${s.id}`,
        sim.held.slice(before).some((h) => h.id === s.id),
        false,
      );
    }
    if (op.between === 'start') await this.step({ op: 'start', w: op.w });
    await this.checkHeld(s.id);
    const before = await this.onBull(s, (m) => {
      if (op.bull === 'taken') this.takenInBull(m, s);
      else if (op.bull === 'changed') m.hset(s.keys.bullJob, 'atm', String((Number(s.values.atm) + 1) % 10));
    });
    const taken = (await this.run(scripts.bullmqTake, s.args, [], { ...this.keys, ...s.keys })) as BullTake;
    const wantTake: BullTake = op.bull === 'as-read' ? 'moved' : op.bull === 'taken' ? 'gone' : 'changed';
    this.log(`  bullmqTake(${s.id}${op.bull === 'as-read' ? '' : `, BullMQ: ${op.bull}`}) -> ${taken}`);
    this.agree('bullmqTake reply', taken, wantTake);
    await this.checkBull(s, before, taken === 'moved', false);
    await this.checkReceipt(s, taken);
    if (op.end === 'cut') {
      this.cutOff.push({ s, taken });
      this.log(`  cut off: ${s.id} left held, noted`);
      return;
    }
    await this.endCopy(s, taken);
    if (op.end === 'twice') await this.endCopy(s, taken, true);
  }

  /** The release of a held copy after a take, or its undo when BullMQ kept the job. */
  private async endCopy(s: BullSeed, taken: BullTake, again = false): Promise<void> {
    const { id, fingerprint } = s.args;
    const how = again ? ' sent again' : '';
    if (taken === 'moved') {
      const got = await this.run(scripts.importRelease, { id, fingerprint });
      const want = this.model.importRelease(id, fingerprint);
      this.log(`  importRelease(${id})${how} -> ${got}`);
      this.agree('importRelease reply', got, want);
    } else {
      const got = await this.run(scripts.importUndo, { id, fingerprint });
      const want = this.model.importUndo(id, fingerprint);
      this.log(`  importUndo(${id})${how} -> ${got}`);
      this.agree('importUndo reply', got, want);
    }
    await this.compareState();
  }

  /**
   * A later run settles the copies cut-off runs left held (src/migrate/import.ts settleCopies): where
   * BullMQ's receipt names the copy, the take happened and the copy is released; else it is undone.
   */
  private async settle(): Promise<void> {
    if (this.cutOff.length === 0) return this.log('settle: no copy left held');
    for (const { s, taken } of this.cutOff.splice(0)) {
      const receipt = await fx.redis.get(s.keys.bullTaken);
      this.log(`settle ${s.id}: receipt ${receipt === s.args.fingerprint ? 'names it' : 'absent'}`);
      this.check(
        `the receipt of ${s.id} outlives the cut-off`,
        receipt === s.args.fingerprint,
        taken === 'moved',
      );
      await this.endCopy(s, receipt === s.args.fingerprint ? 'moved' : taken);
    }
  }

  /** A held copy (in the model's `heldCopies`) is in no list or sorted set: no worker can see it. */
  private async checkHeld(id: string): Promise<void> {
    if (!this.model.heldCopies.has(id)) return;
    const k = this.keys;
    const [waiting, ...scores] = await Promise.all([
      fx.redis.lpos(k.waiting, id),
      ...[k.prio, k.delayed, k.active, k.completed, k.dead].map((z) => fx.redis.zscore(z, id)),
    ]);
    this.check(
      `the held copy ${id} is in no list or set`,
      [waiting, ...scores],
      [null, null, null, null, null, null],
    );
  }

  /** bullmq-take.lua leaves a receipt (the fingerprint, for a week) when it moves the job, else none. */
  private async checkReceipt(s: BullSeed, taken: BullTake): Promise<void> {
    const [value, ttl] = await Promise.all([fx.redis.get(s.keys.bullTaken), fx.redis.pttl(s.keys.bullTaken)]);
    const week = 604_800_000;
    this.check(
      `the receipt of ${s.id} after '${taken}'`,
      [value, value === null ? null : ttl > week - 60_000 && ttl <= week],
      taken === 'moved' ? [s.args.fingerprint, true] : [null, null],
    );
  }

  /** The pending signals of job `id` (annex `\x01g`), its steps (`\x01s`) and its record. */
  private async signalState(
    id: string,
  ): Promise<{ pending: string[]; steps: string; record: string | null }> {
    const [[pending, steps], record] = await Promise.all([
      fx.redis.hmget(this.keys.annex, `${id}\x01g`, `${id}\x01s`),
      fx.redis.hget(this.keys.jobs, id),
    ]);
    return { pending: pending == null ? [] : pending.split('\n'), steps: steps ?? '', record };
  }

  /**
   * queue.signal (signal.lua, on the model's clock). Besides the model: a signal kept is appended to
   * the job's pending signals and nothing else of them changes; one not kept leaves them as they were.
   */
  private async signal(op: Extract<Op, { op: 'signal' }>): Promise<void> {
    const id = 'unknown' in op.target ? 'zz' : this.target(op.target);
    const name = SIGNAL_NAMES[op.name]!;
    const p = SIGNAL_PAYLOADS[op.payload];
    const json = p === undefined ? '' : JSON.stringify(p === 'numbered' ? { s: ++this.signals } : p);
    const before = await this.signalState(id);
    const got = await this.run(scripts.signal, {
      id,
      name,
      payload: json,
      maxPending: this.signalCap,
    });
    const want = this.model.signal(id, name, json, this.signalCap);
    if (this.signalCap === SIGNAL_CAP || want[0] !== 'kept')
      this.log(`signal(${id}, ${name}, ${json || 'undefined'}) -> ${JSON.stringify(got)}`);
    const after = await this.signalState(id);
    const kept = (got as string[])[0] === 'kept' || (got as string[])[0] === 'woke';
    this.check(
      `signal ${name} to ${id}: the pending signals gain exactly it when kept, else nothing`,
      after.pending,
      kept ? [...before.pending, `${name}\t${json}`] : before.pending,
    );
    this.agree('signal reply', got, want);
  }

  /**
   * job.waitForSignal's script (wait-signal.lua) for `call`. Besides the model: a signal taken is the
   * oldest pending of its name and leaves the pending signals, and only it; nothing else takes one; a
   * stale token changes nothing at all (record, steps, signals); a park re-sent changes nothing.
   */
  private async waitSignal(
    wi: number,
    call: NonNullable<SimWorker['lastWait']>,
    again = false,
  ): Promise<void> {
    const w = this.workers[wi]!;
    const { claim, name, n, timeoutMs } = call;
    const before = await this.signalState(claim.id);
    const got = (await this.run(scripts.waitSignal, {
      id: claim.id,
      token: claim.token,
      name,
      n,
      timeoutMs,
      maxBytes: 1_048_576,
    })) as WaitSignalReply;
    const want = this.model.waitSignal(claim, name, n, timeoutMs);
    this.log(
      `w${wi}.${again ? 'resend ' : ''}waitSignal(${fmtHeld(claim)}, ${name}, n=${n}, timeoutMs=${timeoutMs}) -> ${JSON.stringify(got)}`,
    );
    const after = await this.signalState(claim.id);
    const first = before.pending.findIndex((l) => l.startsWith(`${name}\t`));
    if (got[0] === 'taken') {
      this.check(
        `a wait for ${name} takes the oldest pending signal of that name, once`,
        [got[1], after.pending],
        [before.pending[first]?.slice(name.length + 1), before.pending.filter((_, i) => i !== first)],
      );
    } else {
      this.check(
        `a wait that took nothing leaves the pending signals of ${claim.id}`,
        after.pending,
        before.pending,
      );
    }
    if (got[0] === 'stale' || (got[0] === 'parked' && before.record?.[0] !== 'a'))
      this.check(`a ${got[0]} wait changes nothing of ${claim.id}`, after, before);
    this.agree('waitSignal reply', got, want);
    w.lastWait = call;
    // A parked job leaves its worker (ParkedError); the others go on running.
    if (got[0] === 'parked') w.held = w.held.filter((h) => h !== claim);
  }

  /** The script arguments of an add on the model's clock (add-one.lua's; add.lua's row adds the rest). */
  private laterArgs(op: Later & AddOpts, dedupe?: string) {
    const id = op.id === null ? null : POOL[op.id]!;
    const jobOpts: JobOptions = {
      priority: op.priority,
      maxAttempts: op.maxAttempts,
      leaseMs: op.leaseMs,
      lifo: op.lifo,
    };
    if (id !== null) jobOpts.id = id;
    if (op.delayMs !== undefined) jobOpts.delayMs = op.delayMs;
    if (op.runAtIn !== undefined) jobOpts.runAt = this.now + op.runAtIn;
    if (op.expiry && 'ttlMs' in op.expiry) jobOpts.ttlMs = op.expiry.ttlMs;
    if (op.expiry && 'expireAtIn' in op.expiry) jobOpts.expireAt = this.now + op.expiry.expireAtIn;
    const o = resolveAddOptions(clean(jobOpts), LIBRARY_JOB_DEFAULTS);
    const data = { n: ++this.adds };
    // The record names its dedupe key and its expireAt (a ttlMs is turned into one by the script).
    const args = {
      id: o.id,
      delayMs: o.delayMs,
      runAt: o.runAt,
      optionTail: encodeOptionTail(o, { dedupe, expireAt: o.expireAt, lifo: o.lifo }),
      data: JSON.stringify(data),
      ttlMs: o.ttlMs,
    };
    const expireAt = op.expiry
      ? this.now + ('ttlMs' in op.expiry ? op.expiry.ttlMs : op.expiry.expireAtIn)
      : undefined;
    const due = this.now + (op.delayMs ?? op.runAtIn ?? 0);
    const when = op.delayMs !== undefined ? `delayMs=${op.delayMs}` : `runAt=t+${due - T0}`;
    const expiry = expireAt === undefined ? '' : `, expireAt=${at(expireAt)}`;
    return {
      id,
      o,
      data,
      args,
      due,
      modelOpts: { ...op, expireAt },
      fmt: `${fmtOpts(op, id)}, ${when}${expiry}`,
    };
  }

  /** add.lua's row for one job: no parents or group; a dedupe key when given. */
  private addRow(a: ReturnType<Harness['laterArgs']>, d?: ModelDedupe) {
    return {
      ...a.args,
      priority: a.o.priority,
      dependsOn: '',
      depMode: '',
      group: '',
      dedupeKey: d?.key ?? '',
      dedupeMode: d?.mode ?? '',
      dedupeTtlMs: d?.windowMs === undefined ? '' : REDIS_WINDOW_MS,
      xDependsOn: '',
      waiter: '',
    };
  }

  private async addLater(op: Later & AddOpts): Promise<void> {
    const a = this.laterArgs(op);
    // A plain job (priority 0) goes by add-one.lua, as queue.add sends it; the others by add.lua.
    const reply = (
      a.o.priority === 0
        ? await this.run(scripts.addOne, a.args)
        : await this.run(scripts.add, {}, [this.addRow(a)])
    ) as [string, number, string];
    const { handedTo, ...want } = this.model.add(
      a.id,
      a.modelOpts,
      a.due,
      a.data,
      undefined,
      a.o.priority === 0 ? DEFAULT_LEASE_MS : undefined,
    );
    this.log(`add(${a.fmt}) -> ${reply.join(' ')}`);
    this.agree('add reply', reply, [want.id, want.isNew ? 1 : 0, want.state]);
    if (handedTo) await this.handedOff(handedTo, a.data.n);
  }

  /** The relay's marks the model expects in `outboxed` (none expires within a run: 7 days). */
  private readonly outboxMarks = new Set<string>();

  /** An outbox relay's add: add.lua with the job's mark, on the model's clock. */
  private async addFromOutbox(op: Extract<Op, { op: 'outbox' }>): Promise<void> {
    const a = this.laterArgs(op);
    const id = a.id!;
    const mark = `${op.row}:${id}`;
    const reply = (await this.run(scripts.add, { outboxMarks: mark }, [this.addRow(a)])) as [
      string,
      number,
      string,
    ];
    let want: [string, number, string];
    if (!this.model.jobs.has(id) && this.outboxMarks.has(mark)) {
      want = [id, 0, 'g'];
    } else {
      const w = this.model.add(a.id, a.modelOpts, a.due, a.data);
      want = [w.id, w.isNew ? 1 : 0, w.state];
    }
    this.outboxMarks.add(mark);
    this.log(`outbox add(${a.fmt}, mark ${mark}) -> ${reply.join(' ')}`);
    this.agree('outbox add reply', reply, want);
  }

  /**
   * An add with a dedupe key (add.lua, on the model's clock). Besides the model's prediction, what
   * Redis held before the add is checked against the reply: the key names the job the add answered;
   * a throttle add meeting an unfinished holder, or a debounce add meeting an unstarted waiting or
   * delayed holder, creates no job; and a holder that had started is left exactly as it was. With
   * keepLastIfActive, an add meeting a holder that runs or has started (and has not finished) answers
   * a job blocked behind it, the pending successor if there was one, and the key stays with the holder.
   */
  private async addDeduped(op: Extract<Op, { op: 'dedupe' }>): Promise<void> {
    const d: ModelDedupe = { key: DEDUPE_KEYS[op.key]!, mode: op.mode, windowMs: op.windowMs };
    const a = this.laterArgs(op, d.key);
    const redisKey = dedupeKey(this.keys, d.key);
    const nextKey = dedupeNextKey(this.keys, d.key);
    const [exists, holder, next] = await Promise.all([
      a.id === null ? 0 : fx.redis.hexists(this.keys.jobs, a.id),
      fx.redis.get(redisKey),
      fx.redis.get(nextKey),
    ]);
    const before = holder === null ? null : await this.queue.getJob(holder);
    const pendingNext = next === null ? null : await this.queue.getJob(next);
    const reply = (await this.run(scripts.add, {}, [this.addRow(a, d)])) as [string, number, string];
    this.lastReply = reply;
    const want = this.model.addDedupe(a.id, a.modelOpts, a.due, a.data, d);
    const window = d.windowMs === undefined ? '' : ` window=${d.windowMs}`;
    const mode = d.mode === 't' ? 'throttle' : d.mode === 'd' ? 'debounce' : 'debounce keepLastIfActive';
    this.log(`add(${a.fmt}, dedupe ${d.key} ${mode}${window}) -> ${reply.join(' ')}`);
    // The invariants first: they say what went wrong more plainly than a diff with the model.
    if (exists === 0) {
      const [id, isNew, state] = reply;
      const after = await Promise.all([
        fx.redis.get(redisKey),
        holder === null ? null : this.queue.getJob(holder),
        fx.redis.get(nextKey),
        this.queue.getJob(id),
      ]);
      if (state === 'b') {
        this.check(
          `a pending successor leaves the key with the job it waits behind (${d.key} after the add)`,
          [after[0], after[2], after[3]?.dependsOn],
          [holder, id, [holder]],
        );
      } else {
        this.check(`a dedupe key names the job its add answered (${d.key} after the add)`, after[0], id);
      }
      // The key's pending successor before the add (keepLastIfActive): blocked behind the holder.
      const successor =
        d.mode === 'k' && pendingNext?.state === 'blocked' && pendingNext.dependsOn.join() === holder
          ? pendingNext
          : null;
      if (before !== null && d.mode === 'k') {
        const running =
          before.state === 'active' ||
          ((before.state === 'waiting' || before.state === 'delayed') &&
            (before.attempts > 0 || before.startedAt !== undefined));
        if (running || successor) {
          this.check(
            `keepLastIfActive never starts a job beside the key's running job (${d.key} held by ${holder}, ${before.state})`,
            [state, after[3]?.dependsOn, successor ? [id, isNew] : null],
            ['b', [holder], successor ? [successor.id, 0] : null],
          );
        }
      }
      if (before !== null) {
        const pending = before.state === 'waiting' || before.state === 'delayed';
        const started = before.attempts > 0 || before.startedAt !== undefined;
        const held =
          d.mode === 't'
            ? before.state !== 'completed' && before.state !== 'dead'
            : pending && !started && successor === null;
        if (held) {
          this.check(
            `a held dedupe key makes no second job (${d.key} held by ${holder}, ${before.state})`,
            [id, isNew],
            [holder, 0],
          );
        }
        if (started) {
          const facts = (j: JobInfo | null) =>
            j && { data: j.data, createdAt: j.createdAt, attempts: j.attempts, errors: j.errors.length };
          this.check(
            `a started job is never rewritten by a dedupe add (${holder})`,
            facts(after[1]),
            facts(before),
          );
        }
      }
    }
    this.agree('dedupe add reply', reply, [want.id, want.isNew ? 1 : 0, want.state]);
  }

  /** Jobs added on Redis's clock: the model takes their createdAt from the records (ties follow it). */
  private async takeCreatedAt(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    const recs = await fx.redis.hmget(this.keys.jobs, ...ids);
    ids.forEach((id, i) => {
      const j = this.model.jobs.get(id);
      if (j && recs[i]) j.createdAt = decodeClaimed(recs[i]!).createdAt;
    });
  }

  private completeScript(rows: Claimed[], marks: Claimed[] = []): Promise<unknown> {
    return this.run(
      scripts.complete,
      { starts: marks.map((h) => `${h.id}\n${h.token}`).join('\n') },
      rows.map((h) => ({ id: h.id, token: h.token, result: JSON.stringify(RESULT) })),
    );
  }

  private failScript(rows: Claimed[], retryDelayMs: number, as: FailKind = 'E'): Promise<unknown> {
    return this.run(
      scripts.fail,
      {},
      rows.map((h) => ({ id: h.id, token: h.token, retryDelayMs, error: as === 'E' ? ERROR_JSON : as })),
    );
  }

  /** Every job, the counts, the waiting order, and the scores of every sorted set. */
  /**
   * A plain add leased its job to a fetcher. Every other job its worker takes from the message (counted
   * as received by its registration, which stands no more once every unit arrived); the others it
   * leaves to the withdrawing claim's reply, as when the message is lost.
   */
  private async handedOff(to: { fetcher: string; held: Held }, n: number): Promise<void> {
    const w = this.workers.find((x) => x.fetcher === to.fetcher)!;
    if (n % 2 === 1) return this.log(`  handed off to ${to.fetcher}: message lost`);
    const token = decodeClaimed((await fx.redis.hget(this.keys.jobs, to.held.id))!).token;
    this.agree(
      `token of handed-off ${to.held.id} is new in the queue's history`,
      this.tokens.has(token),
      false,
    );
    this.tokens.add(token);
    w.held.push({ ...to.held, token });
    this.claims.push({ ...to.held, token });
    if (w.registered && ++w.registered.received >= w.registered.units) w.registered = null;
    this.log(`  handed off to ${to.fetcher}: taken from the message`);
  }

  async compareState(): Promise<void> {
    const m = this.model;
    const k = this.keys;
    const ids = [...m.jobs.keys()].sort();
    const [
      stored,
      errorIds,
      counts,
      paused,
      waiting,
      active,
      delayed,
      completed,
      dead,
      infos,
      expiring,
      held,
      nexts,
      notes,
    ] = await Promise.all([
      fx.redis.hkeys(k.jobs),
      fx.redis.hkeys(k.annex),
      this.queue.counts(),
      this.queue.isPaused(),
      this.queue.getJobs('waiting', { limit: 10_000 }),
      fx.redis.zrangebyscore(k.active, '-inf', '(+inf', 'WITHSCORES'), // below +inf: not the sentinel
      fx.redis.zrange(k.delayed, 0, -1, 'WITHSCORES'),
      fx.redis.zrange(k.completed, 0, -1, 'WITHSCORES'),
      fx.redis.zrange(k.dead, 0, -1, 'WITHSCORES'),
      Promise.all(ids.map((id) => this.queue.getJob(id))),
      fx.redis.zrange(k.expiring, 0, -1, 'WITHSCORES'),
      Promise.all(
        DEDUPE_KEYS.map(async (key) => {
          const rk = dedupeKey(k, key);
          const [holder, ttl] = await Promise.all([fx.redis.get(rk), fx.redis.pttl(rk)]);
          return holder === null ? null : { holder, window: ttl > 0 };
        }),
      ),
      Promise.all(DEDUPE_KEYS.map((key) => fx.redis.get(dedupeNextKey(k, key)))),
      fx.redis.hgetall(k.imported),
    ]);
    const signalFields =
      ids.length === 0
        ? []
        : await fx.redis.hmget(k.annex, ...ids.flatMap((id) => [`${id}\x01g`, `${id}\x01s`]));
    // Only a job that never started expires (docs/job-control.md), whatever the model says. (A retry
    // clears the expiry, so a dead job whose last error is an expiry died of it.)
    for (const info of infos) {
      const last = info?.errors.at(-1);
      if (info?.state === 'dead' && last?.code === 'ERR_EXPIRED') {
        this.check(
          `a job that expired never started (${info.id})`,
          [info.attempts, info.startedAt, last.attempt],
          [0, undefined, 0],
        );
      }
    }
    this.agree('job ids in the jobs hash', stored.sort(), ids);
    this.agree(
      'imported: notes of copies not yet taken out of BullMQ',
      notes,
      Object.fromEntries(m.imported),
    );
    // Annex fields of other parts (a successor's parent: `id\x01d`) belong to jobs that exist.
    this.agree(
      'job ids in the errors hash',
      errorIds.filter((f) => !f.includes('\x01')).sort(),
      ids.filter((id) => m.jobs.get(id)!.errors.length > 0),
    );
    this.agree(
      'annex parts of jobs that exist',
      errorIds.filter((f) => f.includes('\x01') && !m.jobs.has(f.slice(0, f.indexOf('\x01')))),
      [],
    );
    ids.forEach((id, i) => {
      const info = infos[i];
      const j = m.jobs.get(id)!;
      this.agree(
        `job ${id}`,
        info && {
          state: info.state,
          attempts: info.attempts,
          attemptsLeft: info.attemptsLeft,
          snoozes: info.snoozes,
          errors: info.errors.map((e) => `${e.attempt}@${at(e.at)}:${e.code}`),
          startedAt: at(info.startedAt),
          finishedAt: at(info.finishedAt),
          data: info.data,
          result: info.result,
          options: [info.priority, info.maxAttempts, info.leaseMs, info.lifo === true],
          expireAt: at(info.expireAt),
        },
        {
          state: STATE_NAMES[j.state],
          attempts: j.attempts,
          snoozes: j.snoozes,
          attemptsLeft: Math.max(0, (j.maxAttempts ?? DEFAULT_MAX_ATTEMPTS) - (j.attempts - j.base)),
          errors: j.errors.map((e) => `${e.attempt}@${at(e.at)}:${e.code}`),
          startedAt: at(j.startedAt),
          finishedAt: at(j.finishedAt),
          data: j.data,
          result: j.state === 'c' ? RESULT : undefined,
          options: [j.priority, j.maxAttempts ?? DEFAULT_MAX_ATTEMPTS, j.leaseMs ?? DEFAULT_LEASE_MS, j.lifo],
          expireAt: at(j.expireAt),
        },
      );
      if (j.state === 'd') this.agree(`runAt of delayed job ${id}`, at(info?.runAt), at(j.dueAt));
      this.agree(
        `signals of job ${id}: pending (name, payload JSON), the waits' steps, the wait it is parked in`,
        [signalFields[2 * i], signalFields[2 * i + 1], info?.waitingForSignal ?? null],
        [
          j.signals.length === 0 ? null : j.signals.map((g) => `${g.name}\t${g.json}`).join('\n'),
          j.steps.length === 0 ? null : j.steps.map(([name, v]) => `${name}\t${v}`).join('\n'),
          j.parked && {
            name: j.parked.name,
            ...(j.parked.deadline === null ? {} : { deadline: j.parked.deadline }),
          },
        ],
      );
    });
    this.agree('counts', counts, m.counts());
    this.agree('paused', paused, m.paused);
    this.agree(
      'waiting order',
      waiting.map((j) => j.id),
      m.waitingOrder(),
    );
    this.agree('active: lease deadlines', zpairs(active), m.scored('a'));
    this.agree(
      'idle: registrations for a handoff',
      zpairs(await fx.redis.zrange(k.idle, 0, -1, 'WITHSCORES')),
      m.registrations
        .map((r): [string, number] => [r.member, r.deadline])
        .sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)),
    );
    this.agree('delayed: due times', zpairs(delayed), m.scored('d'));
    this.agree('completed: finish times', zpairs(completed), m.scored('c'));
    this.agree('dead: finish times', zpairs(dead), m.scored('x'));
    this.agree(
      'expiring: expiry index',
      zpairs(expiring),
      [...m.expiring].sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)),
    );
    this.agree(
      `dedupe keys (${DEDUPE_KEYS.join(', ')}): holder, and whether a window lasts`,
      held,
      DEDUPE_KEYS.map((key) => {
        const d = m.dedupeKeys.get(key);
        return d ? { holder: d.holder, window: d.until !== null } : null;
      }),
    );
    this.agree(
      `dedupe successors (${DEDUPE_KEYS.join(', ')}): the id each key's dn: string names`,
      nexts,
      DEDUPE_KEYS.map((key) => m.dedupeNext.get(key) ?? null),
    );
  }

  async close(): Promise<void> {
    this.subscriber.disconnect();
    await this.queue.close();
  }
}

// ---- small helpers -------------------------------------------------------------------------------

function clean(o: JobOptions): JobOptions {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as JobOptions;
}

/** Times in traces and diffs, relative to the start of the run. */
function at(ms: number | undefined): string {
  return ms === undefined ? '-' : `t+${ms - T0}`;
}

function pairs(flat: unknown): [string, string][] {
  const a = flat as string[];
  const out: [string, string][] = [];
  for (let i = 0; i < a.length; i += 2) out.push([a[i]!, a[i + 1]!]);
  return out;
}

function zpairs(flat: string[]): [string, number][] {
  const out: [string, number][] = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i]!, Number(flat[i + 1])]);
  return out;
}

/** `id#attempt~token` */
function fmtHeld(h: { id: string; attempt: number; token: string }): string {
  return `${h.id}#${h.attempt}~${h.token}`;
}

function fmtOpts(o: AddOpts, id: string | null): string {
  const parts = [id === null ? 'id=gen' : `id=${id}`];
  if (o.priority !== 0) parts.push(`priority=${o.priority}`);
  if (o.maxAttempts !== undefined) parts.push(`maxAttempts=${o.maxAttempts}`);
  if (o.leaseMs !== undefined) parts.push(`leaseMs=${o.leaseMs}`);
  if (o.lifo) parts.push('lifo');
  return parts.join(' ');
}

/** Runs one sequence on a fresh queue. */
async function runSequence(
  setup: Setup,
  ops: readonly Op[],
  signalCap = SIGNAL_CAP,
): Promise<Harness['lastReply']> {
  const h = new Harness(setup);
  h.signalCap = signalCap;
  try {
    await h.seed();
    for (const op of ops) await h.step(op);
    return h.lastReply;
  } finally {
    if (process.env.MODEL_TRACE) console.log(h.trace.join('\n')); // MODEL_TRACE=1: print every run's trace
    await h.close();
  }
}

const KEEP_ALL: Setup = { keepCount: 1_000_000, keepAgeMs: 1_000_000_000 };

/** Runs `runs` random sequences of `ops` (at least `minLength` each) against the scripts and the model. */
function agreeOn(ops: fc.Arbitrary<Op>, minLength: number, runs: number): () => Promise<void> {
  return () =>
    fc.assert(
      fc.asyncProperty(
        setupArb,
        fc.array(ops, { minLength, maxLength: 40, size: 'max' }),
        async (setup, seq) => {
          await runSequence(setup, seq);
        },
      ),
      { numRuns: runs },
    );
}

describe('the scripts agree with the state-machine model', () => {
  it(
    'on random sequences of adds, claims, outcomes (stale ones too), recoveries and admin calls',
    agreeOn(opArb, 5, RUNS),
    PROPERTY_TIMEOUT_MS,
  );

  it(
    'when an id is removed or trimmed and added again while stale workers still hold it',
    agreeOn(reuseOpArb, 10, Math.ceil(RUNS / 2)),
    PROPERTY_TIMEOUT_MS,
  );
});

describe('signals agree with the model', () => {
  it(
    'on random sequences of signals and waits (fresh and stale tokens, re-sent) among claims, outcomes, recoveries, ticks past deadlines and admin calls',
    agreeOn(signalOpArb, 20, Math.ceil(RUNS / 4)),
    PROPERTY_TIMEOUT_MS,
  );
});

describe('expiring jobs and dedupe keys agree with the model', () => {
  it(
    'on random sequences of expiring and deduplicated adds among claims, outcomes, recoveries, sweeps and admin calls',
    agreeOn(featureOpArb, 5, Math.ceil(RUNS / 2)),
    PROPERTY_TIMEOUT_MS,
  );

  it(
    'on random sequences of keepLastIfActive adds around the running job: outcomes, retries, recoveries, cancels and removes',
    agreeOn(keepLastOpArb, 8, Math.ceil(RUNS / 2)),
    PROPERTY_TIMEOUT_MS,
  );
});

// Sequences the properties found, kept so they run on every seed.
describe('counterexamples found by the model', () => {
  const job = { op: 'add', id: null, priority: 0 } as const;
  const claim = (w: number, count = 1) => ({ op: 'claim', w, count }) as const;
  const tick = (ms: number) => ({ op: 'tick', ms }) as const;
  const recover = { op: 'recover' } as const;
  const settle = { op: 'settle' } as const;

  it('a bulk of mixed explicit and generated ids above the chunk limits keeps every job and FIFO', () => {
    // 2 100 jobs: explicit ids that generated ones would take, before and after them in the call.
    const items = Array.from({ length: 2_100 }, (_, i) => ({
      id: i % 7 === 0 ? 4 - (i % 2) : null,
      priority: i % 11 === 0 ? 4 : 0,
    }));
    return runSequence(KEEP_ALL, [
      { op: 'bulk', items },
      claim(0, 3),
      { op: 'bulk', items: items.slice(0, 1_001) },
    ]);
  });

  it('generated ids and priority FIFO hold with the counters started near 2^31 and 2^32', () =>
    runSequence({ ...KEEP_ALL, ids: 2 ** 32 - 2, seq: 2 ** 31 - 2 }, [
      { op: 'bulk', items: Array.from({ length: 6 }, () => ({ id: null, priority: 4 })) },
      { ...job, priority: 4 },
      claim(0, 2),
      {
        op: 'bulk',
        items: [
          { id: null, priority: 4 },
          { id: 1, priority: 0 },
        ],
      },
      claim(1, 4),
    ]));

  it("a worker's failure sent after its lease was recovered is refused as stale, not taken as a re-send", () =>
    runSequence(KEEP_ALL, [
      job,
      claim(0),
      tick(1_250),
      recover,
      { op: 'fail', w: 0, pick: 0, retryDelayMs: 0 }, // STALE:w:1, and no error line added
    ]));

  it('a stale token from before a remove cannot complete the job added again under the same id', () =>
    runSequence(KEEP_ALL, [
      { op: 'add', id: 0, priority: 0 },
      claim(0), // w0 holds a, attempt 1
      tick(1_500),
      recover,
      { op: 'remove', target: { pool: 0 } },
      { op: 'add', id: 0, priority: 0 },
      claim(1), // w1 holds the new a, also attempt 1
      { op: 'complete', w: 0, pick: 0 }, // w0's stale completion: STALE:a:1
    ]));

  it('a withdrawn handoff replays only jobs still under their handoff, not a later lease of the same ms', () =>
    runSequence({ keepCount: 0, keepAgeMs: 1_500 }, [
      { op: 'claim', w: 0, count: 1, freeSlots: 2, register: true, units: 2 },
      { op: 'addLater', id: 0, delayMs: 0, priority: 0 }, // a: handed off to w0, message lost
      { op: 'addLater', id: null, runAtIn: 0, priority: 0 }, // 1: handed off to w0, received
      { op: 'fail', w: 0, pick: 0, retryDelayMs: 0, as: 'E' }, // 1 waits again
      claim(1), // w1 leases 1 in the same millisecond
      { op: 'addLater', id: null, runAtIn: 0, priority: 0 },
      claim(0), // withdraws: a comes back, 1 (now w1's) must not
    ]));

  it('an outbox row added again after its job was removed is not created again; another row or a forgotten mark is', () =>
    runSequence(KEEP_ALL, [
      { op: 'outbox', id: 0, row: 0, runAtIn: 0, priority: 0 }, // a, new
      { op: 'outbox', id: 0, row: 0, runAtIn: 0, priority: 0 }, // a exists
      { op: 'remove', target: { pool: 0 } },
      { op: 'outbox', id: 0, row: 0, runAtIn: 0, priority: 0 }, // gone: g, nothing created
      { op: 'outbox', id: 0, row: 1, runAtIn: 0, priority: 0 }, // another row of id a: a new job
      { op: 'remove', target: { pool: 0 } },
      { op: 'forget', id: 0, row: 0 },
      { op: 'outbox', id: 0, row: 1, runAtIn: 0, priority: 0 }, // row 1's mark still there: g
      { op: 'outbox', id: 0, row: 0, runAtIn: 0, priority: 0 }, // forgotten: a new job
    ]));

  it('a retried claim returns its own leases only, not a later lease of the same job in the same ms', () =>
    runSequence(KEEP_ALL, [
      { op: 'add', id: 0, priority: 0 },
      { op: 'claim', w: 0, count: 1, lost: true }, // w0 leases a, the reply is lost
      { op: 'cancel', target: { pool: 0 } }, // its lease is revoked
      { op: 'retry', target: { pool: 0 } },
      claim(1), // w1 leases a again in the same millisecond
      claim(0), // w0 sends the lost claim again: nothing of it is still under its lease
    ]));

  it('recovered jobs with a priority go back to the front of their priority, oldest lease first', () =>
    runSequence(KEEP_ALL, [
      { ...job, priority: 1 },
      { ...job, priority: 1 },
      { ...job, priority: 1 },
      claim(0), // 1, lease until t+1000
      tick(250),
      claim(0), // 2, lease until t+1250
      tick(1_250),
      recover, // waiting: 1, 2, 3
    ]));

  it('a job whose start was never marked goes back free, even with maxAttempts 1; a marked one is charged', () =>
    runSequence(KEEP_ALL, [
      { ...job, maxAttempts: 1 },
      claim(0), // leased: attempts 0, no startedAt
      tick(1_250),
      recover, // back to waiting, no error, one free return
      claim(1),
      { op: 'start', w: 0 }, // the old lease: lost
      { op: 'start', w: 1 }, // attempt 1 counted now
      { op: 'start', w: 1 }, // sent again: nothing changes
      tick(1_250),
      recover, // marked: charged, dead (maxAttempts 1) with its LeaseExpiredError
    ]));

  it(`an unmarked loss is never charged, past ${FREE_RETURNS} free returns too`, () =>
    runSequence(KEEP_ALL, [
      { ...job, maxAttempts: 1 },
      ...Array.from({ length: FREE_RETURNS + 2 }, () => [claim(0), tick(1_250), recover]).flat(),
    ]));

  it('a start mark riding on a completion counts before the completions; a completion implies its start', () =>
    runSequence(KEEP_ALL, [
      job,
      job,
      claim(0, 2),
      { op: 'complete', w: 0, pick: 0, marks: true }, // 1 completes (implied start), 2's mark counts
      tick(1_250),
      recover, // 2 was marked: charged
    ]));

  it('retention keeps a finished job exactly keepAgeMs old (it deletes jobs older than that)', () =>
    runSequence({ keepCount: 10, keepAgeMs: 1_500 }, [
      job,
      claim(0),
      { op: 'complete', w: 0, pick: 0 }, // 1 completed at t+0
      tick(1_500),
      job,
      claim(0),
      { op: 'complete', w: 0, pick: 0 }, // 1 is 1500 ms old: kept
    ]));

  it('retention keeps at most keepCount even when the same call deleted jobs by age', () =>
    runSequence({ keepCount: 1, keepAgeMs: 1_500 }, [
      job,
      claim(0),
      { op: 'complete', w: 0, pick: 0 }, // 1 completed at t+0
      tick(1_750),
      job,
      job,
      claim(0, 2),
      { op: 'complete', w: 0, pick: 'all' }, // 1 is too old, and of 2 and 3 only the newest (3) is kept
    ]));

  // Expiry and dedupe: the rules of docs/job-control.md and docs/groups.md as fixed sequences, so each
  // runs on every seed (the properties found no divergence to keep).
  const expiring = (expiry: Expiry, delayMs = 0) =>
    ({ op: 'addLater', id: null, priority: 0, delayMs, expiry }) as const;
  const dedupe = (key: number, mode: 't' | 'd', more: Partial<Extract<Op, { op: 'dedupe' }>> = {}): Op => ({
    op: 'dedupe',
    id: null,
    priority: 0,
    key,
    mode,
    ...more,
  });
  const expire = { op: 'expire' } as const;

  it('a job that started is not expired after its snooze, by the sweep or a claim', () =>
    runSequence(KEEP_ALL, [
      expiring({ ttlMs: 1_000 }),
      claim(0),
      { op: 'fail', w: 0, pick: 0, retryDelayMs: 1_500, as: 'S' }, // the snooze counts the start
      tick(1_500),
      expire, // its index entry is dropped: it started
      claim(0), // claimed, not ended
    ]));

  it('the sweep leaves a leased unstarted job to its worker; a claim ends it after a free return', () =>
    runSequence(KEEP_ALL, [
      expiring({ expireAtIn: 500 }),
      expiring({ expireAtIn: 500 }),
      claim(0, 2),
      tick(750),
      expire, // both expired, leased, not started: left alone
      { op: 'start', w: 0 }, // marked now: they started in time and run
      { op: 'complete', w: 0, pick: 'all' },
      expiring({ ttlMs: 250 }),
      claim(1),
      tick(1_250),
      expire, // leased: left
      recover, // a free return: waiting, still unstarted
      claim(2), // ends it dead with an ExpiredError; nextDue now
    ]));

  it('a debounce add rewrites an unstarted pending job, and makes a new one once it has started', () =>
    runSequence(KEEP_ALL, [
      dedupe(0, 'd', { delayMs: 1_500 }),
      dedupe(0, 'd', { delayMs: 1_500, expiry: { ttlMs: 2_500 } }), // 1 rewritten: new data, due, expiry
      tick(1_500),
      claim(0),
      { op: 'fail', w: 0, pick: 0, retryDelayMs: 1_500, as: 'S' }, // started, delayed
      dedupe(0, 'd', { delayMs: 500 }), // 1 has started: a new job takes the key
    ]));

  it('a throttle window outlives its job, but a job cancelled before it started gives it back', () =>
    runSequence(KEEP_ALL, [
      dedupe(0, 't', { windowMs: 4_000 }), // 1
      claim(0),
      { op: 'complete', w: 0, pick: 0 },
      dedupe(0, 't'), // the window lasts: 1, completed
      dedupe(1, 't', { windowMs: 4_000 }), // 3 (2 was drawn by the add that answered 1)
      { op: 'cancel', target: { known: 1 } }, // 3, never started: its window is given back
      dedupe(1, 't'), // a new job
      tick(3_000),
      tick(1_250), // k1's window ended
      dedupe(0, 't'), // a new job
    ]));

  // An expired job never ran: it gives its throttle window back (expire_jobs.lua), as a job removed
  // before it started does. It kept it, and once retention deleted the job the next add answered
  // `completed` for a job that never ran (the symptom issue 33 item 10 names for a removed job).
  it('an expired job gives its throttle window back: it never ran', async () => {
    const reply = await runSequence({ keepCount: 0, keepAgeMs: 1_500 }, [
      dedupe(0, 't', { windowMs: 4_000, expiry: { ttlMs: 250 } }), // 1
      tick(500),
      expire, // 1 ends dead, expired, and retention deletes it (keepCount 0)
      dedupe(0, 't'), // a new job, not ['1', 0, 'c']
    ]);
    expect(reply?.slice(1)).toEqual([1, 'w']);
  });

  // Signals (docs/workflows.md#signals): the rules of wait-signal.lua and signal.lua as fixed sequences.
  const wait = (w: number, name: number, timeoutMs = 0, n = 0, old = false): Op => ({
    op: 'waitSignal',
    w,
    pick: 0,
    old,
    name,
    n,
    timeoutMs,
  });
  const signal = (target: Target | { unknown: true }, name: number, payload = 3, count?: number): Op => ({
    op: 'signal',
    target,
    name,
    payload,
    ...(count === undefined ? {} : { count }),
  });
  const GO = 0;
  const STOP = 2;

  it('a parked job wakes first in its line when its signal comes, and its re-run takes it; a re-sent park stands', () =>
    runSequence(KEEP_ALL, [
      job, // 1
      job, // 2
      claim(0), // 1
      wait(0, GO), // parked without end (never due): budget given back, its start counted
      { op: 'resendWait', w: 0 }, // the same park again: 'parked', nothing changes
      signal({ known: 0 }, 1), // 'g' is not 'go': kept, still parked
      signal({ known: 0 }, GO), // woke: waiting, before 2
      { op: 'resendWait', w: 0 }, // no longer parked: stale
      claim(1), // 1 again
      wait(1, GO), // takes the 'go' (the 'g' stays)
      wait(1, GO), // replayed from its step: no script call
      { op: 'complete', w: 1, pick: 0 },
      signal({ known: 0 }, GO), // ended: nothing kept
      signal({ unknown: true }, GO), // missing
    ]));

  it('a wait past its deadline times out on the re-run; one signal taken even when late; a stale token takes none', () =>
    runSequence(KEEP_ALL, [
      job, // 1
      claim(0),
      wait(0, GO, 500), // parked until t+500
      tick(500),
      signal({ known: 0 }, STOP), // kept: parked for 'go', not 'stop'
      claim(1), // promoted (due) and claimed
      wait(0, GO, 0, 0, true), // w0's old token: stale, takes nothing
      wait(1, GO, 1_500), // the deadline stays t+500: timeout
      wait(1, STOP, 500, 1), // a second wait of the run takes 'stop' at once
      tick(1_250),
      recover, // the lease is lost
      signal({ known: 0 }, GO), // kept
      wait(1, GO, 0, 2), // stale: takes nothing
      { op: 'complete', w: 1, pick: 0 }, // refused: stale
      claim(2),
      wait(2, GO, 500, 2), // the re-run replays waits 0 and 1; the third takes 'go'
    ]));

  // A parked job woken by promote kept the note of its wait (`\1w`); fail.lua's snooze or retry, or
  // change-delay.lua, that delayed it until exactly the wait's deadline made signal.lua take it for
  // parked and wake it (and getJob show it waiting for the signal). Both now drop the note.
  it('a job delayed otherwise at its old wait deadline is not parked: a signal is only kept', () =>
    runSequence(KEEP_ALL, [
      job, // 1
      job, // 2
      claim(0, 2),
      wait(0, GO, 1_500), // 1 parked until t+1500
      { op: 'promote', target: { known: 0 } }, // woken otherwise: waiting
      claim(1),
      { op: 'fail', w: 1, pick: 0, retryDelayMs: 1_500, as: 'S' }, // snoozed until t+1500
      signal({ known: 0 }, GO), // kept, not woken
      { op: 'waitSignal', w: 0, pick: 0, old: false, name: STOP, n: 0, timeoutMs: 500 }, // 2 parked until t+500
      { op: 'changeDelay', target: { known: 1 }, delayMs: 1_000 }, // parked no more
      { op: 'changeDelay', target: { known: 1 }, delayMs: 500 }, // at the deadline again: still not parked
      signal({ known: 1 }, STOP), // kept, not woken
    ]));

  it(`a job keeps at most ${MAX_PENDING_SIGNALS} signals unconsumed; a take makes room for one`, () =>
    runSequence(
      KEEP_ALL,
      [
        job, // 1
        signal({ known: 0 }, GO, 3, MAX_PENDING_SIGNALS), // all kept
        signal({ known: 0 }, STOP), // full: nothing kept
        claim(0),
        wait(0, GO), // takes the first
        signal({ known: 0 }, STOP), // kept
        signal({ known: 0 }, GO), // full
      ],
      MAX_PENDING_SIGNALS,
    ));

  // Jobs brought in from BullMQ (import-bullmq.lua, and copy mode): the rules of write_imported.lua
  // and bullmq_take.lua as fixed sequences (the properties found no divergence to keep).
  const bull = (more: Partial<BullJob> = {}): BullJob => ({
    id: 5, // q
    state: 'w',
    maxAttempts: 2,
    attemptsPick: 0,
    priority: 0,
    lifo: false,
    errors: 0,
    createdAgo: 3_000,
    dueIn: 0,
    finishedAgo: 0,
    big: false,
    idFloor: null,
    ...more,
  });
  const imported = (more: Partial<BullJob> = {}, tamper: BullTamper = 'none'): Op => ({
    op: 'import',
    tamper,
    ...bull(more),
  });
  const fail = (w: number, retryDelayMs = 0) => ({ op: 'fail', w, pick: 0, retryDelayMs }) as const;

  it('an imported job with its last attempt left dies on its next failure; retried, its budget is fresh', () =>
    runSequence(KEEP_ALL, [
      imported({ attemptsPick: 1, errors: 1 }), // q: 1 of 2 attempts made in BullMQ, its error line kept
      claim(0), // q#1
      fail(0), // attempt 2 of 2: dead
      { op: 'retry', target: { known: 0 } },
      claim(0), // q#2
      fail(0), // attempt 3, the first of the fresh budget: waiting
      claim(0),
      fail(0), // the fresh budget spent: dead
    ]));

  it('an imported dead job is retried with a fresh budget; one older than keepAgeMs stays until a trim', () =>
    runSequence({ keepCount: 10, keepAgeMs: 1_500 }, [
      imported({ state: 'x', attemptsPick: 2, errors: 2, finishedAgo: 2_000 }), // q: both attempts spent
      imported({ id: 6, state: 'x', finishedAgo: 2_000 }), // r: dead since t-2000, too old, yet no trim runs
      { op: 'retry', target: { known: 0 } }, // q waits, with a fresh budget
      claim(1),
      fail(1), // attempt 3, the first of the fresh budget: waiting
      claim(1),
      fail(1, -1), // q dies: the trim takes r (too old) and keeps q
    ]));

  it('a delayed job imported already due waits at once, behind the jobs it promotes (in front if lifo)', () =>
    runSequence(KEEP_ALL, [
      { op: 'addLater', id: null, delayMs: 500, priority: 0 }, // 1
      { op: 'addLater', id: null, delayMs: 500, priority: 0, lifo: true }, // 2
      tick(500),
      imported({ state: 'd', dueIn: -1_000 }), // q, due before 1 and 2: promotes them (2 first), then the back
      imported({ id: 6, state: 'd', dueIn: 0, lifo: true }), // r, due now: the front
      { op: 'addLater', id: 0, delayMs: 500, priority: 0 }, // a, due t+1000
      imported({ id: 1, state: 'd', dueIn: 500, createdAgo: 86_400_000 }), // b, due then too, created first
      tick(500),
      claim(0, 6), // promotes b before a (created first): r, 2, 1, q, b, a
    ]));

  it('an import writes nothing when the id is taken here or BullMQ changed or moved the job', () =>
    runSequence(KEEP_ALL, [
      { op: 'add', id: 0, priority: 0 },
      imported({ id: 0 }), // exists: BullMQ keeps a
      imported({}, 'value'), // changed (same length)
      imported({}, 'shift'), // changed: the values concatenate as before, the length prefixes differ
      imported({}, 'missing'),
      imported({}, 'deleted'),
      imported({}, 'stale'),
      imported({ priority: 4 }, 'taken'), // gone: a BullMQ worker took it
      imported({ idFloor: 5 }), // moved: generated ids now start above 5
      job, // 6
    ]));

  it('in copy mode no claim gets a held copy; released after the take, else undone; twice: absent', () =>
    runSequence(KEEP_ALL, [
      { op: 'add', id: 0, priority: 0 }, // a
      // q held; w0's claim between copy and take gets a, never q; BullMQ changed q: undone, note gone
      { op: 'importCopy', resend: true, between: 'claim', w: 0, bull: 'changed', end: 'once', ...bull() },
      // q held again; w1's claim gets nothing; BullMQ took q first: undone, then 'absent'
      { op: 'importCopy', resend: false, between: 'claim', w: 1, bull: 'taken', end: 'twice', ...bull() },
      // r held, lifo; w2's claim and start mark touch nothing; taken out of BullMQ (receipt): released
      // at the front, as a one-server import places it; sent again: 'absent'
      {
        op: 'importCopy',
        resend: false,
        between: 'start',
        w: 2,
        bull: 'as-read',
        end: 'twice',
        ...bull({ id: 6, lifo: true }),
      },
      // q delayed, taken, then the run cut off: held past its due time, no claim gets it
      {
        op: 'importCopy',
        resend: false,
        between: 'none',
        w: 0,
        bull: 'as-read',
        end: 'cut',
        ...bull({ state: 'd', dueIn: 500 }),
      },
      tick(1_000),
      claim(1, 3), // r only
      settle, // the receipt names q's copy: released into delayed, already due
      claim(2, 3), // q, promoted
      { op: 'complete', w: 0, pick: 'all' },
      { op: 'complete', w: 1, pick: 'all' },
      { op: 'complete', w: 2, pick: 'all' },
    ]));

  it('a copy cut off before BullMQ moved it is undone by the next run, record and annex gone', () =>
    runSequence(KEEP_ALL, [
      // BullMQ took r (gone): no receipt; the run is cut off before the undo
      {
        op: 'importCopy',
        resend: false,
        between: 'none',
        w: 0,
        bull: 'taken',
        end: 'cut',
        ...bull({ id: 6, errors: 2, big: true }),
      },
      { op: 'add', id: null, priority: 0 }, // 1
      claim(0, 2), // 1 only: never the held r
      settle, // undone: the record, its error lines, log, progress and body go
      settle, // nothing left held
    ]));
});
