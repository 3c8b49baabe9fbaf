/**
 * Pieces of the chaos harness's verdict that decide whether an invariant applies (chaos/verdict.ts).
 * A wrong answer there is a false alarm in CI (random seeds) or a check that can never fire.
 */
import { describe, expect, it } from 'vitest';
import {
  type AccountView,
  type AddView,
  accountingViolations,
  type Begin,
  type CrossChildAdd,
  crossLeftoverViolations,
  crossOrderViolations,
  crossOutcomeViolations,
  crossParentViolations,
  dedupeViolations,
  eventResultViolations,
  expiryViolations,
  fifoViolations,
  type GroupSample,
  type JobView,
  keepLastViolations,
  lateCallViolations,
  okRunKey,
  type ParentView,
  parkedViolations,
  recordedBegins,
  stepViolations,
} from '../../chaos/features-verdict.js';
import { cutOffFaults, reachableMs } from '../../chaos/verdict.js';

describe('chaos verdict: time an oom fault leaves the workers able to reach Redis', () => {
  it('subtracts faults that cut every worker off, overlapping or not, clipped to the window', () => {
    expect(reachableMs(1_000, 5_000, [])).toBe(4_000);
    // An all-worker reset from before the oom until 0.3 s before its end (the seed 323567 case).
    expect(reachableMs(7_300, 9_700, [{ at: 5_800, until: 9_400 }])).toBe(300);
    // Two overlapping cut-offs count once; one outside the window not at all.
    expect(
      reachableMs(0, 10_000, [
        { at: 2_000, until: 4_000 },
        { at: 3_000, until: 5_000 },
        { at: 12_000, until: 13_000 },
      ]),
    ).toBe(7_000);
    expect(reachableMs(0, 1_000, [{ at: -5, until: 2_000 }])).toBe(0);
  });

  it('counts Redis down and every all-worker partition as cut off, whatever its detail says', () => {
    // Seed 796480: a replies-only black hole of all 6 workers covered a whole oom fault.
    const faults = [
      { kind: 'netBlackhole', everyWorker: true, detail: 'black hole (replies only) of 6 workers' },
      { kind: 'netBlackhole', detail: 'black hole (both ways) of worker slot 2 (pid 7)' },
      { kind: 'netReset', everyWorker: true, detail: 'resets of all 6 workers' },
      { kind: 'netReset', detail: 'resets of worker slot 1 (pid 8)' },
      { kind: 'redisKill', detail: 'redis down for 1000 ms' },
      { kind: 'stop', detail: 'pid 9' },
    ] as const;
    expect(cutOffFaults(faults).map((f) => f.detail)).toEqual([
      'black hole (replies only) of 6 workers',
      'resets of all 6 workers',
      'redis down for 1000 ms',
    ]);
  });
});

const T0 = 1_000_000;
const job = (over: Partial<JobView> & { id: string }): JobView => ({
  state: 'completed',
  data: { s: Number(over.id.replace(/\D/g, '')) || 1, k: 'n' },
  createdAt: T0,
  snoozes: 0,
  errors: [],
  ...over,
});
const begin = (id: string, s: number, a: number, at: number, pid = 1): Begin => ({ id, s, a, pid, at });

describe('chaos verdict: per-group FIFO at concurrency 1', () => {
  const a = job({ id: 'j1', group: 'g1', createdAt: T0 });
  const b = job({ id: 'j2', group: 'g1', createdAt: T0 + 10 });
  const none = new Map();

  it('passes jobs that start in the order they became due', () => {
    const begins = [begin('j1', 1, 1, T0 + 20), begin('j2', 2, 1, T0 + 30)];
    expect(fifoViolations('g1', [a, b], none, begins, [], T0)).toEqual([]);
  });

  it('fails a job that started before an earlier-due one (a delayed job due first counts first)', () => {
    const begins = [begin('j2', 2, 1, T0 + 20), begin('j1', 1, 1, T0 + 30)];
    expect(fifoViolations('g1', [a, b], none, begins, [], T0)).toHaveLength(1);
    // j3 was added first but delayed until T0 + 5: due before j2, so it must start before j2.
    const c = job({ id: 'j3', group: 'g1', createdAt: T0 - 100 });
    const adds = new Map([[3, { seq: 3, delayMs: 105 }]]);
    const late = [begin('j2', 2, 1, T0 + 20), begin('j3', 3, 1, T0 + 40)];
    expect(fifoViolations('g1', [b, c], adds, late, [], T0)).toHaveLength(1);
  });

  it('fails another job starting between a retry (or snooze) and the job it held the place for', () => {
    const failed = job({
      id: 'j1',
      group: 'g1',
      errors: [{ attempt: 1, name: 'Error', at: T0 + 25 }],
    });
    const ok = [begin('j1', 1, 1, T0 + 20), begin('j1', 1, 2, T0 + 80), begin('j2', 2, 1, T0 + 90)];
    expect(fifoViolations('g1', [failed, b], none, ok, [], T0)).toEqual([]);
    const cut = [begin('j1', 1, 1, T0 + 20), begin('j2', 2, 1, T0 + 40), begin('j1', 1, 2, T0 + 80)];
    expect(fifoViolations('g1', [failed, b], none, cut, [], T0)).toHaveLength(1);
    const snoozed = [{ id: 'j1', s: 1, at: T0 + 25 }];
    expect(fifoViolations('g1', [a, b], none, cut, snoozed, T0)).toHaveLength(1);
    // A lease lost is not a recorded retry: not judged here.
    const lost = job({
      id: 'j1',
      group: 'g1',
      errors: [{ attempt: 1, name: 'LeaseExpiredError', at: T0 + 25 }],
    });
    expect(fifoViolations('g1', [lost, b], none, cut, [], T0)).toEqual([]);
  });

  it('lets a job resumed after its park (woken first in its group) start between a retry and its job', () => {
    const failed = job({ id: 'j1', group: 'g1', errors: [{ attempt: 1, name: 'Error', at: T0 + 25 }] });
    const resumed = [
      begin('j1', 1, 1, T0 + 20),
      begin('j2', 2, 1, T0 + 21),
      begin('j2', 2, 2, T0 + 40),
      begin('j1', 1, 2, T0 + 80),
    ];
    expect(fifoViolations('g1', [failed, b], none, resumed, [], T0)).toHaveLength(1);
    const parks = [{ id: 'j2', s: 2, at: T0 + 23 }];
    expect(fifoViolations('g1', [failed, b], none, resumed, [], T0, parks)).toEqual([]);
  });
});

describe('chaos verdict: parked groups', () => {
  const sample = (g: GroupSample['groups'][number], at = T0): GroupSample => ({
    at,
    done: at + 5,
    groups: [g],
  });
  const limits = (concurrency: number | null, rateLimit: { max: number; durationMs: number } | null) => ({
    concurrency,
    rateLimit,
  });

  it('passes a group parked within its rate window or behind a retry', () => {
    const s = [
      sample({
        group: 'g4',
        waiting: 3,
        limits: limits(null, { max: 5, durationMs: 2_000 }),
        parkedUntil: T0 + 1_900,
      }),
      sample({ group: 'g1', waiting: 3, limits: limits(1, null), parkedUntil: T0 + 50 }),
    ];
    expect(parkedViolations(s, 50, 4_000, [], T0)).toEqual([]);
  });

  it('fails a group left parked once its rate limit was removed or raised', () => {
    const removed = sample({ group: 'g4', waiting: 3, limits: limits(null, null), parkedUntil: T0 + 1_900 });
    expect(parkedViolations([removed], 50, 4_000, [], T0)).toHaveLength(1);
    const raised = sample({
      group: 'g4',
      waiting: 3,
      limits: limits(null, { max: 1_000, durationMs: 2_000 }),
      parkedUntil: T0 + 1_900,
    });
    expect(parkedViolations([raised], 50, 4_000, [], T0)).toHaveLength(1);
  });

  it('fails a group left parked past its time with jobs waiting, unless every worker was cut off', () => {
    const stale = sample({ group: 'g3', waiting: 2, limits: limits(1, null), parkedUntil: T0 - 5_000 });
    expect(parkedViolations([stale], 50, 4_000, [], T0)).toHaveLength(1);
    expect(parkedViolations([stale], 50, 4_000, [{ at: T0 - 6_000, until: T0 }], T0)).toEqual([]);
  });
});

describe('chaos verdict: durable steps', () => {
  const line = (a: number, z: number, at: number, pid = 1) => ({
    id: 'j1',
    s: 1,
    a,
    z,
    name: 'charge',
    pid,
    at,
  });

  it('passes a step run again only when the earlier run never stored it', () => {
    // Attempt 1 ran the body and lost its lease before storing; attempt 2 ran it and stored it.
    const b = (a: number, at: number, pid = 1) => begin('j1', 1, a, at, pid);
    expect(
      stepViolations([line(1, 0, T0), line(2, 0, T0 + 500, 2)], [line(2, 0, T0 + 510, 2)], T0, [
        b(1, T0 - 5),
        b(2, T0 + 490, 2),
      ]),
    ).toEqual([]);
    // A stale attempt that began before the store runs its body late (its write is then refused).
    expect(
      stepViolations([line(2, 0, T0 + 500, 2), line(1, 0, T0 + 900)], [line(2, 0, T0 + 510, 2)], T0, [
        b(1, T0 - 5),
        b(2, T0 + 490, 2),
      ]),
    ).toEqual([]);
  });

  it('fails a step whose body runs again after a run stored it (a rewrite wiped it, or no replay)', () => {
    const runs = [line(1, 0, T0), { ...line(1, 1, T0 + 900), s: 7 }];
    const begins = [begin('j1', 1, 1, T0 - 5), begin('j1', 7, 1, T0 + 850)];
    expect(stepViolations(runs, [line(1, 0, T0 + 5)], T0, begins)).toHaveLength(1);
  });
});

describe('chaos verdict: expiring jobs', () => {
  const never = () => false;

  it('passes a job that started in time, and one that expired without starting', () => {
    const started = job({ id: 'j1', expireAt: T0 + 1_000, data: { s: 1, k: 'e' } });
    const expired = job({
      id: 'j2',
      state: 'dead',
      expireAt: T0 + 1_000,
      data: { s: 2, k: 'e' },
      errors: [{ attempt: 0, name: 'ExpiredError', at: T0 + 1_000 }],
    });
    expect(expiryViolations([started, expired], [begin('j1', 1, 1, T0 + 990)], 250, never, T0)).toEqual([]);
  });

  it('fails a job first started after its expiry, unless a fault on that process explains it', () => {
    const j = job({ id: 'j1', expireAt: T0 + 1_000, data: { s: 1, k: 'e' } });
    expect(expiryViolations([j], [begin('j1', 1, 1, T0 + 1_400)], 250, never, T0)).toHaveLength(1);
    expect(expiryViolations([j], [begin('j1', 1, 1, T0 + 1_400)], 250, () => true, T0)).toEqual([]);
  });

  it('fails a job that started (snoozed) and then ended dead by ExpiredError', () => {
    const j = job({
      id: 'j1',
      state: 'dead',
      expireAt: T0 + 1_000,
      snoozes: 1,
      data: { s: 1, k: 'e' },
      errors: [{ attempt: 1, name: 'ExpiredError', at: T0 + 3_000 }],
    });
    expect(expiryViolations([j], [begin('j1', 1, 1, T0 + 100)], 250, never, T0)).toHaveLength(1);
  });
});

describe('chaos verdict: dedupe', () => {
  const t = (id: string, s: number, over: Partial<JobView> = {}) =>
    job({ id, data: { s, k: 't', dk: 'k1' }, ...over });
  const add = (seq: number, over: Partial<AddView> = {}): AddView => ({
    seq,
    isNew: true,
    dedupe: { key: 'k1', mode: 'throttle' },
    ...over,
  });

  it('passes throttle jobs one per window, and adds answered by a holder still unfinished', () => {
    const jobs = [
      t('j1', 1, { finishedAt: T0 + 100 }),
      t('j2', 2, { createdAt: T0 + 150, finishedAt: T0 + 300 }),
    ];
    const adds = [
      add(1, { id: 'j1' }),
      add(2, { id: 'j2' }),
      add(3, { id: 'j1', isNew: false, sentAt: T0 + 50 }),
    ];
    expect(dedupeViolations(jobs, adds, [], null, T0)).toEqual([]);
  });

  it('fails a second throttle job created while the first held the key', () => {
    const jobs = [t('j1', 1, { finishedAt: T0 + 500 }), t('j2', 2, { createdAt: T0 + 150 })];
    expect(dedupeViolations(jobs, [add(1, { id: 'j1' }), add(2, { id: 'j2' })], [], null, T0)).toHaveLength(
      1,
    );
    // With a ttlMs window of 100 ms, the key was free at T0 + 100.
    const ttl = [
      add(1, { id: 'j1', dedupe: { key: 'k1', mode: 'throttle', ttlMs: 100 } }),
      add(2, { id: 'j2' }),
    ];
    expect(dedupeViolations(jobs, ttl, [], null, T0)).toEqual([]);
  });

  it('fails a throttle add that enqueued nothing after its holder finished, or answered completed wrongly', () => {
    const jobs = [t('j1', 1, { finishedAt: T0 + 100 })];
    const late = [add(1, { id: 'j1' }), add(2, { id: 'j1', isNew: false, sentAt: T0 + 200 })];
    expect(dedupeViolations(jobs, late, [], null, T0)).toHaveLength(1);
    const dead = [t('j1', 1, { state: 'dead', finishedAt: T0 + 100 })];
    const answered = [
      add(1, { id: 'j1' }),
      add(2, { id: 'j1', isNew: false, sentAt: T0 + 50, state: 'completed' }),
    ];
    expect(dedupeViolations(dead, answered, [], null, T0)).toHaveLength(1);
  });

  it('fails a debounce add that rewrote a job that had begun', () => {
    const w = job({ id: 'j1', data: { s: 2, k: 'w', dk: 'k1' } });
    const adds = [
      add(1, { id: 'j1', dedupe: { key: 'k1', mode: 'debounce' } }),
      add(2, { id: 'j1', isNew: false, sentAt: T0 + 300, dedupe: { key: 'k1', mode: 'debounce' } }),
    ];
    // Attempt 1 began and failed (its start recorded), the add rewrote the job before attempt 2.
    const begins = [begin('j1', 1, 1, T0 + 200), begin('j1', 2, 2, T0 + 900)];
    expect(dedupeViolations([w], adds, begins, null, T0)).toHaveLength(2);
    expect(dedupeViolations([w], adds, [begin('j1', 2, 1, T0 + 900)], null, T0)).toEqual([]);
  });

  it('passes a debounce rewrite after a begin whose start Redis never recorded (a free return)', () => {
    const w = job({ id: 'j1', data: { s: 2, k: 'w', dk: 'k1' } });
    const adds = [
      add(1, { id: 'j1', dedupe: { key: 'k1', mode: 'debounce' } }),
      add(2, { id: 'j1', isNew: false, sentAt: T0 + 300, dedupe: { key: 'k1', mode: 'debounce' } }),
    ];
    // Attempt 1 began, its lease was lost before the start mark landed, and it ran again as attempt 1:
    // for Redis the job had never started, so the add rightly rewrote it in between.
    const begins = [begin('j1', 1, 1, T0 + 200), begin('j1', 2, 1, T0 + 900)];
    expect(recordedBegins(begins)).toEqual([begins[1]]);
    expect(dedupeViolations([w], adds, begins, null, T0)).toEqual([]);
  });
});

describe('chaos verdict: dedupe keep last', () => {
  const l = (id: string, s: number, over: Partial<JobView> = {}) =>
    job({ id, data: { s, k: 'l', dk: 'k1' }, ...over });
  const keepLast = { key: 'k1', mode: 'debounce', keepLastIfActive: true } as const;
  const add = (seq: number, over: Partial<AddView> = {}): AddView => ({
    seq,
    isNew: true,
    dedupe: keepLast,
    ...over,
  });

  it('passes a successor that began after the job before it finished', () => {
    const jobs = [l('j1', 1, { finishedAt: T0 + 300 }), l('j2', 3, { createdAt: T0 + 100 })];
    const begins = [begin('j1', 1, 1, T0 + 10), begin('j2', 3, 1, T0 + 300)];
    expect(keepLastViolations(jobs, [], begins, 1, T0)).toEqual([]);
  });

  it('fails a job that began before the one created before it finished, or while it was unfinished', () => {
    const jobs = [l('j1', 1, { finishedAt: T0 + 300 }), l('j2', 3, { createdAt: T0 + 100 })];
    const overlap = [begin('j1', 1, 1, T0 + 10), begin('j2', 3, 1, T0 + 200)];
    expect(keepLastViolations(jobs, [], overlap, 1, T0)).toHaveLength(1);
    const running = [l('j1', 1, { state: 'active' }), l('j2', 3, { createdAt: T0 + 100 })];
    expect(keepLastViolations(running, [], overlap, 1, T0)).toHaveLength(1);
  });

  it('fails a job whose first run carries the data of an add answered before a later add was sent', () => {
    const jobs = [l('j2', 3)];
    const adds = [
      add(2, { id: 'j2', sentAt: T0, repliedAt: T0 + 5 }),
      add(3, { id: 'j2', isNew: false, sentAt: T0 + 10, repliedAt: T0 + 15 }),
    ];
    // It ran data #3: the last add's.
    expect(keepLastViolations(jobs, adds, [begin('j2', 3, 1, T0 + 50)], 1, T0)).toEqual([]);
    // It ran data #2, though #3 was applied after #2 and before the job began.
    expect(keepLastViolations(jobs, adds, [begin('j2', 2, 1, T0 + 50)], 1, T0)).toHaveLength(1);
    // #3 answered only after the job began: it may have come too late (a new successor, not judged here).
    expect(keepLastViolations(jobs, adds, [begin('j2', 2, 1, T0 + 12)], 1, T0)).toEqual([]);
  });
});

describe('chaos verdict: late sandbox calls', () => {
  it("fails a job holding another job's late data or step, not its own", () => {
    expect(
      lateCallViolations([job({ id: 'j1', data: { s: 1, k: 'n', late: 'j1' }, steps: { 'late:j1': 1 } })]),
    ).toEqual([]);
    expect(lateCallViolations([job({ id: 'j2', data: { s: 1, k: 'n', late: 'j1' } })])).toHaveLength(1);
    expect(lateCallViolations([job({ id: 'j2', steps: { 'late:j1': 1 } })])).toHaveLength(1);
  });
});

describe('chaos verdict: results of completed events (retention 0)', () => {
  const ran = new Set([okRunKey('j1', 1, 0, 7), okRunKey('j1', 2, 1, 8), okRunKey('j2', 3, undefined, 7)]);

  it('passes results of logged runs, an id completed twice included', () => {
    const results = new Map([
      [
        'j1',
        [
          { a: 1, p: 7, z: 0 },
          { a: 2, p: 8, z: 1, pad: 'xx' },
        ],
      ],
      ['j2', [{ a: 3, p: 7 }]],
    ]);
    expect(eventResultViolations(results, ran)).toEqual([]);
  });

  it('fails a missing result, one that is no chaos result, and one no logged run returned', () => {
    const results = new Map<string, unknown[]>([
      ['j1', [undefined, { a: 2, p: 7, z: 1 }]],
      ['j2', ['done']],
    ]);
    expect(eventResultViolations(results, ran)).toEqual([
      'j1: a completed event carries no result, not a chaos result',
      'j1: a completed event carries the result of attempt 2 in pid 7, which no logged run returned',
      'j2: a completed event carries "done", not a chaos result',
    ]);
  });
});

describe('chaos verdict: attempt accounting', () => {
  const acct = (over: Partial<AccountView>): AccountView => ({
    id: 'j1',
    state: 'dead',
    data: { s: 1 },
    attempts: 2,
    attemptsLeft: 0,
    maxAttempts: 2,
    snoozes: 0,
    errors: [
      { attempt: 1, name: 'Error', message: 'planned' },
      { attempt: 2, name: 'LeaseExpiredError', message: 'lease expired: stopped renewing it' },
    ],
    ...over,
  });
  const b = (a: number): Begin => ({ id: 'j1', s: 1, a, pid: 1, at: T0 + a });

  it('passes a job whose every counted start ran, whose budget is its starts less its snoozes', () => {
    expect(accountingViolations([acct({})], [b(1), b(2)])).toEqual([]);
    // A snooze: three starts, two charged; a lease lost unmarked ran attempt 2 twice (free return).
    const snoozed = acct({ attempts: 3, snoozes: 1, maxAttempts: 3, attemptsLeft: 1, state: 'waiting' });
    expect(accountingViolations([snoozed], [b(1), b(2), b(2), b(3)])).toEqual([]);
  });

  it('fails a start counted for no processor, a budget off by a refund, an error line too few', () => {
    expect(accountingViolations([acct({})], [b(1)])).toEqual([
      'j1: attempt(s) 2 counted as started, but no processor began them (dead, 0 snoozes, errors: 1 Error; 2 LeaseExpiredError)',
    ]);
    expect(accountingViolations([acct({ attemptsLeft: 1 })], [b(1), b(2)])).toHaveLength(1);
    expect(accountingViolations([acct({ errors: [] })], [b(1), b(2)])).toEqual([
      'j1 (dead): 0 error lines for 2 charged attempts that did not complete',
    ]);
  });

  it('counts a DependencyFailedError (a child a dead parent failed, never started) as no attempt', () => {
    const failed = acct({
      attempts: 0,
      attemptsLeft: 2,
      errors: [{ attempt: 0, name: 'DependencyFailedError', message: 'parent job "7" is dead' }],
    });
    expect(accountingViolations([failed], [])).toEqual([]);
    // One error line of a charged attempt is still owed.
    expect(accountingViolations([{ ...failed, attempts: 1, attemptsLeft: 1 }], [b(1)])).toHaveLength(1);
  });

  it('fails a lease loss charged with no begin, on a job with attempts left too', () => {
    // Recovery charges only marked starts: a charge no processor began is a job bounced unrun (chaos
    // seed 4 under load charged 90 such jobs, of which only the single-attempt one ended dead).
    const bounced = acct({
      state: 'waiting',
      attempts: 1,
      maxAttempts: 3,
      attemptsLeft: 2,
      errors: [{ attempt: 1, name: 'LeaseExpiredError', message: 'lease expired' }],
    });
    expect(accountingViolations([bounced], [])).toEqual([
      'j1: attempt(s) 1 counted as started, but no processor began them (waiting, 0 snoozes, errors: 1 LeaseExpiredError)',
    ]);
  });

  it("lets an active job's current start stand without a begin (confirmed, its processor not yet called)", () => {
    const confirming = acct({ state: 'active', attempts: 2, maxAttempts: 3, attemptsLeft: 1, errors: [] });
    expect(accountingViolations([confirming], [b(1)])).toEqual([]);
    // An earlier start of it with no begin still fails.
    expect(accountingViolations([confirming], [])).toEqual([
      'j1: attempt(s) 1 counted as started, but no processor began them (active, 0 snoozes, errors: none)',
    ]);
  });
});

describe('chaos verdict: dependencies across queues', () => {
  const parent = (id: string, state: string, finishedAt?: number): [string, ParentView] => [
    id,
    { id, state, ...(finishedAt === undefined ? {} : { finishedAt }) },
  ];
  const parents = new Map([parent('p1', 'completed', T0 + 100), parent('p2', 'dead', T0 + 200)]);
  const child = (id: string, seq: number, xdeps: string[], ignore = false): CrossChildAdd => ({
    seq,
    id,
    xdeps,
    ...(ignore ? { ignoreDep: true as const } : {}),
  });
  const depFailed = [{ attempt: 0, name: 'DependencyFailedError', at: T0 + 201 }];

  it('passes parents that all ended, and fails one lost or left unfinished', () => {
    expect(crossParentViolations(['p1', 'p2'], parents)).toEqual([]);
    const left = new Map([...parents, parent('p3', 'waiting'), parent('p4', 'blocked')]);
    const found = crossParentViolations(['p1', 'p2', 'p3', 'p9'], left);
    expect(found).toHaveLength(3);
    expect(found.join('\n')).toMatch(/p3: waiting/);
    expect(found.join('\n')).toMatch(/p9: accepted, but/);
    expect(found.join('\n')).toMatch(/p4 \(from an unknown add\): blocked/);
  });

  it('passes a child begun after its parents ended, fails one begun before or with a parent unfinished', () => {
    const c = child('c1', 11, ['p1', 'p2'], true);
    expect(crossOrderViolations([c], parents, [begin('c1', 11, 1, T0 + 200)], 1, T0)).toEqual([]);
    // A begin of an earlier job of the same id (another seq) is not this child's.
    expect(crossOrderViolations([c], parents, [begin('c1', 7, 1, T0 + 50)], 1, T0)).toEqual([]);
    expect(crossOrderViolations([c], parents, [begin('c1', 11, 1, T0 + 150)], 1, T0)).toEqual([
      expect.stringMatching(/c1: began at \+0\.150s, 50 ms before parent p2 ended dead/),
    ]);
    const pending = new Map([parent('p5', 'active')]);
    expect(crossOrderViolations([child('c2', 12, ['p5'])], pending, [begin('c2', 12, 1, T0)], 1, T0)).toEqual(
      [expect.stringMatching(/parent p5 is active/)],
    );
  });

  it('passes DependencyFailedError exactly where a parent died and the child does not ignore it', () => {
    const jobs = new Map<string, JobView>([
      ['c1', job({ id: 'c1', state: 'dead', errors: depFailed })],
      ['c2', job({ id: 'c2', state: 'completed' })],
      ['c3', job({ id: 'c3', state: 'completed' })],
    ]);
    const kids = [child('c1', 1, ['p1', 'p2']), child('c2', 2, ['p2'], true), child('c3', 3, ['p1'])];
    expect(crossOutcomeViolations(kids, parents, jobs, null)).toEqual([]);
  });

  it('fails a child of a dead parent that ran, and a DependencyFailedError with no dead parent', () => {
    const jobs = new Map<string, JobView>([
      ['c1', job({ id: 'c1', state: 'completed' })],
      ['c2', job({ id: 'c2', state: 'dead', errors: depFailed })],
      ['c3', job({ id: 'c3', state: 'dead', errors: depFailed })],
    ]);
    const kids = [child('c1', 1, ['p2']), child('c2', 2, ['p2'], true), child('c3', 3, ['p1'])];
    const found = crossOutcomeViolations(kids, parents, jobs, null);
    expect(found).toHaveLength(3);
    expect(found[0]).toMatch(/c1: parent p2 ended dead, but the child is completed/);
    expect(found[1]).toMatch(/c2: dead .*ignores dependency failure/);
    expect(found[2]).toMatch(/c3: dead .*every parent completed/);
    // Retention 0: a child deleted as it completed counts as completed.
    expect(crossOutcomeViolations([child('c4', 4, ['p2'])], parents, new Map(), new Set(['c4']))).toEqual([
      expect.stringMatching(/c4: parent p2 ended dead, but the child is completed/),
    ]);
  });

  it('fails any outbox or link entry left', () => {
    expect(crossLeftoverViolations([])).toEqual([]);
    expect(crossLeftoverViolations([{ key: '{q}:xnotify', count: 2, members: ['a', 'b'] }])).toEqual([
      expect.stringMatching(/\{q\}:xnotify: 2 entries left/),
    ]);
  });
});
