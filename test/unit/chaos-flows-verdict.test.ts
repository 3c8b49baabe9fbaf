/**
 * The chaos harness's verdicts on flows (chaos/flows-verdict.ts) and the plans the producer draws
 * (chaos/flow-plan.ts): each verdict passes a run that kept the contract and fails one that did not.
 */
import { describe, expect, it } from 'vitest';
import { type AccountView, accountingViolations } from '../../chaos/features-verdict.js';
import { childJobs, planFlow } from '../../chaos/flow-plan.js';
import {
  type AckLine,
  canonical,
  type DeletedChild,
  deadChildNamed,
  type FlowAddView,
  type FlowBegin,
  type FlowJobView,
  type FlowLine,
  flowChildOnceViolations,
  flowEndViolations,
  flowParkBounds,
  flowResultViolations,
  flowResumeViolations,
} from '../../chaos/flows-verdict.js';
import { Rng } from '../../chaos/rng.js';
import { DependencyFailedError } from '../../src/index.js';

const T0 = 1_000_000;
const Q = 'main';
const Q2 = 'second';
/** flow-1: c0 in this queue (completes), c1 in the second queue (dies, ignored), c2 in this queue (dies). */
const add = (over: Partial<FlowAddView> = {}): FlowAddView => ({
  seq: 1,
  id: 'flow-1',
  queue: Q,
  children: [{ m: 'ok' }, { q: Q2, m: 'dead', ig: 1 }, { m: 'dead' }],
  ...over,
});
const r0 = { a: 1, p: 9, z: 0 };
const job = (queue: string, id: string, over: Partial<FlowJobView> = {}): FlowJobView => ({
  id,
  queue,
  state: 'completed',
  createdAt: T0 + 40,
  finishedAt: T0 + 200,
  errors: [],
  data: { s: 1 },
  ...over,
});
const childDead = `job "flow-1": child job ${JSON.stringify('flow-1-c2')} is dead`;
/** A healthy flow: the parent parked, then died of c2 (not ignored), which really died. */
const world = (over: Record<string, Partial<FlowJobView>> = {}): Map<string, FlowJobView> => {
  const list = [
    job(Q, 'flow-1', {
      state: 'dead',
      createdAt: T0,
      finishedAt: T0 + 600,
      data: { s: 1 },
      errors: [{ attempt: 2, name: 'DependencyFailedError', message: childDead }],
      children: [
        { queue: Q, id: 'flow-1-c0', ended: 'completed' },
        { queue: Q2, id: 'flow-1-c1', ended: 'dead' },
        { queue: Q, id: 'flow-1-c2', ended: 'dead' },
      ],
      ...over['flow-1'],
    }),
    job(Q, 'flow-1-c0', {
      result: r0,
      data: { s: 1, fp: 'flow-1', ci: 0 },
      parent: { queue: Q, id: 'flow-1' },
      ...over['flow-1-c0'],
    }),
    job(Q2, 'flow-1-c1', {
      state: 'dead',
      finishedAt: T0 + 300,
      data: { fp: 'flow-1', ci: 1 },
      parent: { queue: Q, id: 'flow-1' },
      ...over['flow-1-c1'],
    }),
    job(Q, 'flow-1-c2', {
      state: 'dead',
      finishedAt: T0 + 400,
      data: { s: 1, fp: 'flow-1', ci: 2 },
      parent: { queue: Q, id: 'flow-1' },
      ...over['flow-1-c2'],
    }),
  ];
  return new Map(list.map((j) => [`${j.queue}\t${j.id}`, j]));
};
const refs = ['main:flow-1-c0', 'second:flow-1-c1', 'main:flow-1-c2'];
const yline = (
  call: FlowLine['call'],
  o: FlowLine['o'],
  at: number,
  over: Partial<FlowLine> = {},
): FlowLine => ({
  id: 'flow-1',
  s: 1,
  a: 1,
  z: 0,
  pid: 9,
  call,
  from: at - 1,
  at,
  o,
  ...(o === 'added' ? { refs } : {}),
  ...over,
});
const begin = (a: number, at: number, over: Partial<FlowBegin> = {}): FlowBegin => ({
  id: 'flow-1',
  s: 1,
  a,
  pid: 9,
  at,
  ...over,
});
/** Run 1 adds and parks; run 2 (after every child ended) throws DependencyFailedError for c2. */
const lines = [
  yline('add', 'added', T0 + 50),
  yline('wait', 'parked', T0 + 60),
  yline('add', 'added', T0 + 510, { a: 2 }),
  yline('wait', 'depfail', T0 + 520, { a: 2, child: 'flow-1-c2' }),
];
const begins = [begin(1, T0 + 10), begin(2, T0 + 500)];
const none = new Map<string, DeletedChild>();

describe('chaos flow plans', () => {
  it('plans 2 to 4 children over both queues, sig children only in the parent queue, ids from the parent', () => {
    const rng = new Rng(11);
    const seen = new Set<string>();
    for (let i = 0; i < 1_000; i++) {
      const { children, sends } = planFlow(rng, 4_000, Q2);
      expect(children.length).toBeGreaterThanOrEqual(2);
      expect(children.length).toBeLessThanOrEqual(4);
      children.forEach((c, n) => {
        seen.add(`${c.q ?? Q}:${c.m}${c.ig ? ':ig' : ''}`);
        expect(c.m === 'sig').toBe(sends[n] !== undefined);
        if (c.q !== undefined) expect(c.m).not.toBe('sig');
      });
    }
    for (const k of [
      'main:ok',
      'main:dead',
      'main:sig',
      'main:dead:ig',
      'second:ok',
      'second:dead',
      'second:dead:ig',
    ])
      expect(seen).toContain(k);
    const jobs = childJobs('flow-7', 7, { children: [...add().children], lease: 1_500, backoff: 50 });
    expect(jobs.map((j) => [j.queue, j.opts?.id, j.opts?.ignoreDependencyFailure])).toEqual([
      [undefined, 'flow-7-c0', undefined],
      [Q2, 'flow-7-c1', true],
      [undefined, 'flow-7-c2', undefined],
    ]);
    expect(jobs[0]!.data).toEqual({ s: 7, k: 'n', fp: 'flow-7', ci: 0 });
  });

  it('reads the dead child a DependencyFailedError names, as the library words it', () => {
    expect(deadChildNamed(new DependencyFailedError('flow-1', 'second:flow-1-c1', 'child').message)).toBe(
      'second:flow-1-c1',
    );
    expect(deadChildNamed(new DependencyFailedError('x', 'p').message)).toBeUndefined();
    expect(canonical({ b: 1, a: [{ d: 1, c: 2 }] })).toBe(canonical({ a: [{ c: 2, d: 1 }], b: 1 }));
  });
});

describe('chaos verdict: flow ends', () => {
  it('passes a parent dead of a child it does not ignore that died, and a completed one', () => {
    expect(flowEndViolations([add()], world(), none)).toEqual([]);
    const ok = add({ children: [{ m: 'ok' }, { q: Q2, m: 'dead', ig: 1 }] });
    const w = world({ 'flow-1': { state: 'completed', errors: [] } });
    w.delete(`${Q}\tflow-1-c2`);
    expect(flowEndViolations([ok], w, none)).toEqual([]);
  });

  it('fails a parent dead of an ignored or living child, one completed over a dead child, one left parked', () => {
    const ignored = `job "flow-1": child job ${JSON.stringify('second:flow-1-c1')} is dead`;
    expect(
      flowEndViolations(
        [add()],
        world({ 'flow-1': { errors: [{ attempt: 2, name: 'DependencyFailedError', message: ignored }] } }),
        none,
      ),
    ).toEqual(['flow-1: dead by DependencyFailedError naming second:flow-1-c1, a child it ignores']);
    expect(flowEndViolations([add()], world({ 'flow-1-c2': { state: 'completed' } }), none)).toEqual([
      'flow-1: dead by DependencyFailedError naming flow-1-c2, which is completed',
    ]);
    expect(flowEndViolations([add()], world({ 'flow-1': { state: 'completed', errors: [] } }), none)).toEqual(
      ['flow-1: completed, though its child flow-1-c2 ended dead without ignoreDependencyFailure'],
    );
    expect(
      flowEndViolations(
        [add()],
        world({ 'flow-1': { state: 'blocked', errors: [] }, 'flow-1-c0': { state: 'waiting' } }),
        none,
      ),
    ).toEqual([
      'flow-1: child flow-1-c0 is waiting after the drain',
      'flow-1: blocked after the drain, its flow unfinished',
    ]);
  });
});

describe('chaos verdict: flow children once', () => {
  const acks: AckLine[] = [{ id: 'flow-1-c0', a: 1, at: T0 + 201, o: 'c' }];
  it('passes children created once, as planned, listed and answered alike', () => {
    expect(flowChildOnceViolations([add()], world(), lines, begins, acks, 1, T0)).toEqual([]);
  });

  it('fails a child created again, an unplanned child, a record or answer that lists others', () => {
    const again = world({ 'flow-1-c0': { createdAt: T0 + 300 } });
    expect(flowChildOnceViolations([add()], again, lines, begins, acks, 1, T0)).toEqual([
      "main/flow-1-c0: created at +0.300s, after flow-1's first addChildren answer at +0.050s: created again",
    ]);
    const rerun = [...begins, begin(1, T0 + 250, { id: 'flow-1-c0' })];
    expect(flowChildOnceViolations([add()], world(), lines, rerun, acks, 1, T0)).toEqual([
      'flow-1-c0: attempt 1 began at +0.250s, after an end acknowledged at +0.201s: created again',
    ]);
    const stray = world();
    stray.set(`${Q}\tflow-1-c3`, job(Q, 'flow-1-c3', { data: { s: 1, fp: 'flow-1', ci: 3 } }));
    const listed = world({ 'flow-1': { children: [{ queue: Q, id: 'flow-1-c0' }] } });
    const answered = [yline('add', 'added', T0 + 50, { refs: ['main:flow-1-c0', 'main:x'] })];
    expect(flowChildOnceViolations([add()], stray, lines, begins, acks, 1, T0)).toEqual([
      'main/flow-1-c3: names parent flow-1 (child 3), which planned no such child',
    ]);
    expect(flowChildOnceViolations([add()], listed, answered, begins, acks, 1, T0)).toEqual([
      'flow-1: its record lists children [main:flow-1-c0], it planned [main:flow-1-c0, second:flow-1-c1, main:flow-1-c2]',
      'flow-1: addChildren in attempt 1 answered [main:flow-1-c0, main:x], it planned [main:flow-1-c0, second:flow-1-c1, main:flow-1-c2]',
    ]);
  });
});

describe('chaos verdict: flow resume', () => {
  it('passes a wait that ended after every child, and a resumed run begun after the last end', () => {
    expect(flowResumeViolations([add()], world(), none, lines, begins, 1, T0)).toEqual([]);
    const resolved = [yline('wait', 'parked', T0 + 60), yline('wait', 'resolved', T0 + 520, { a: 2 })];
    expect(flowResumeViolations([add()], world(), none, resolved, begins, 1, T0)).toEqual([]);
  });

  it('fails a run started before the last child ended (released one child early), and a wait resolved early', () => {
    // c2 ended at +0.400s; the parent's second run began at +0.350s and resolved at +0.360s.
    const early = [yline('wait', 'parked', T0 + 60), yline('wait', 'resolved', T0 + 360, { a: 2 })];
    const b = [begin(1, T0 + 10), begin(2, T0 + 350)];
    expect(flowResumeViolations([add()], world(), none, early, b, 1, T0)).toEqual([
      'flow-1: attempt 2 began at +0.350s after the parent parked in attempt 1, before its child flow-1-c2 ended at +0.400s',
      'flow-1: attempt 2 got past waitForChildren at +0.360s, before its child flow-1-c2 ended at +0.400s',
    ]);
    // Released a child early, the run parks again: its start came too soon all the same.
    const again = [yline('wait', 'parked', T0 + 60), yline('wait', 'parked', T0 + 360, { a: 2 })];
    expect(flowResumeViolations([add()], world(), none, again, b, 1, T0)).toEqual([
      'flow-1: attempt 2 began at +0.350s after the parent parked in attempt 1, before its child flow-1-c2 ended at +0.400s',
    ]);
    // A stale run of the attempt that parked (held past its lease) may begin later: not a resume.
    expect(
      flowResumeViolations([add()], world(), none, lines, [...begins, begin(1, T0 + 350)], 1, T0),
    ).toEqual([]);
    const wrongChild = [yline('wait', 'depfail', T0 + 520, { a: 2, child: 'second:flow-1-c1' })];
    expect(flowResumeViolations([add()], world(), none, wrongChild, begins, 1, T0)).toEqual([
      'flow-1: attempt 2 threw DependencyFailedError naming second:flow-1-c1, a child it ignores',
    ]);
  });
});

describe('chaos verdict: flow results', () => {
  const ok = add({ children: [{ m: 'ok' }, { q: Q2, m: 'dead', ig: 1 }] });
  const done = () => {
    const w = world({ 'flow-1': { state: 'completed', errors: [], result: { fr: { 'flow-1-c0': r0 } } } });
    w.delete(`${Q}\tflow-1-c2`);
    return w;
  };
  it("passes results equal to the children's, null or absent for an ignored dead child, and a deleted child's", () => {
    const res = { 'flow-1-c0': { z: 0, p: 9, a: 1 }, 'second:flow-1-c1': null };
    expect(flowResultViolations([ok], done(), none, [yline('wait', 'resolved', T0 + 500, { res })])).toEqual(
      [],
    );
    const w = done();
    w.delete(`${Q}\tflow-1-c0`);
    const deleted = new Map([[`${Q}\tflow-1-c0`, { results: [r0] }]]);
    expect(flowResultViolations([ok], w, deleted, [])).toEqual([]);
  });

  it("fails a result that is not the child's, a missing child, and a key of no child", () => {
    const res = { 'flow-1-c0': { a: 2, p: 9, z: 0 }, 'second:flow-1-c1': null, other: 1 };
    expect(flowResultViolations([ok], done(), none, [yline('wait', 'resolved', T0 + 500, { res })])).toEqual([
      'flow-1: the wait of attempt 1 names [other], none of them its child',
      'flow-1: the wait of attempt 1 gives flow-1-c0 {"a":2,"p":9,"z":0}, the child returned {"a":1,"p":9,"z":0}',
    ]);
    const w = world({ 'flow-1': { state: 'completed', errors: [], result: { fr: {} } } });
    w.delete(`${Q}\tflow-1-c2`);
    expect(flowResultViolations([ok], w, none, [])).toEqual([
      'flow-1: its result lacks its child flow-1-c0 (completed)',
    ]);
  });
});

describe('chaos verdict: flow parent accounting', () => {
  const parent = (over: Partial<AccountView> = {}): AccountView => ({
    id: 'flow-1',
    state: 'dead',
    data: { s: 1 },
    attempts: 2,
    attemptsLeft: 4,
    maxAttempts: 5,
    snoozes: 0,
    errors: [{ attempt: 2, name: 'DependencyFailedError', message: childDead }],
    ...over,
  });
  it("gives a park's start back and charges the DependencyFailedError a run threw", () => {
    const parks = flowParkBounds([add()], lines);
    expect(parks.get('flow-1#1')).toEqual({ lo: 1, hi: 1 });
    expect(accountingViolations([parent()], begins, parks)).toEqual([]);
  });

  it('fails a park that spent budget', () => {
    const parks = flowParkBounds([add()], lines);
    expect(accountingViolations([parent({ attemptsLeft: 3 })], begins, parks)).toEqual([
      'flow-1: 0 starts given back beyond its 0 snoozes, but it parked 1 times',
      'flow-1 (dead): 1 error lines for 2 charged attempts that did not complete',
    ]);
  });
});
