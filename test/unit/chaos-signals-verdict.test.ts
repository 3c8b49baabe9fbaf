/**
 * The chaos harness's verdicts on signals (chaos/signals-verdict.ts) and the plans the producer draws
 * (chaos/signal-plan.ts): each verdict passes a run that kept the contract and fails one that did not.
 */
import { describe, expect, it } from 'vitest';
import { type AccountView, accountingViolations } from '../../chaos/features-verdict.js';
import { Rng } from '../../chaos/rng.js';
import { endlessNames, planSignals } from '../../chaos/signal-plan.js';
import {
  parkBounds,
  type SendView,
  type SignalAddView,
  type SignalJobView,
  signalConsumeViolations,
  signalEndedViolations,
  signalOrderViolations,
  signalPayloadViolations,
  signalTimeoutViolations,
  signalWakeViolations,
  type WaitLine,
} from '../../chaos/signals-verdict.js';

const T0 = 1_000_000;
const add = (over: Partial<SignalAddView> = {}): SignalAddView => ({
  seq: 1,
  id: 'sig-1',
  waits: [{ n: 'go' }, { n: 'go', t: 500 }],
  accepted: true,
  repliedAt: T0,
  ...over,
});
const taken = (sid: number) => ({ payload: { sid }, u: false });
const job = (over: Partial<SignalJobView> = {}): SignalJobView & { createdAt: number } => ({
  id: 'sig-1',
  s: 1,
  state: 'completed',
  finishedAt: T0 + 5_000,
  createdAt: T0 - 1,
  steps: {
    before: { a: 1, p: 9 },
    '~wait:0': 0,
    '~signal:0': taken(1),
    '~wait:1': T0 + 1_500,
    '~signal:1': taken(2),
  },
  result: { sig: [1, 2] },
  ...over,
});
const line = (n: number, o: WaitLine['o'], at: number, over: Partial<WaitLine> = {}): WaitLine => ({
  id: 'sig-1',
  s: 1,
  a: 1,
  z: 0,
  pid: 9,
  n,
  name: 'go',
  from: at - 1,
  at,
  o,
  ...(o === 'taken' ? { sid: n + 1 } : {}),
  ...over,
});
const send = (sid: number, at: number, over: Partial<SendView> = {}): SendView => ({
  sid,
  id: 'sig-1',
  name: 'go',
  why: 'late',
  sentAt: at,
  repliedAt: at + 2,
  answer: { delivered: true, state: 'delayed', woke: false },
  ...over,
});
const bySid = (list: SendView[]) => new Map(list.map((x) => [x.sid, x]));
const jobsOf = (...list: SignalJobView[]) => new Map(list.map((j) => [j.id, j]));

describe('chaos signal plans', () => {
  it('sends every name with a wait without timeout at least once per wait of that name', () => {
    const rng = new Rng(7);
    let never = 0;
    for (let i = 0; i < 2_000; i++) {
      const { waits, sends } = planSignals(rng, 5_000);
      for (const name of endlessNames(waits)) {
        const planned = sends.filter((s) => s.name === name && s.why !== 'dup').length;
        expect(planned).toBeGreaterThanOrEqual(waits.filter((w) => w.n === name).length);
      }
      if (waits.some((w) => !sends.some((s) => s.name === w.n))) never++;
      expect(sends.map((s) => s.afterMs)).toEqual([...sends.map((s) => s.afterMs)].sort((x, y) => x - y));
    }
    // Some jobs get no signal of a name at all: their waits time out.
    expect(never).toBeGreaterThan(50);
  });
});

describe('chaos verdict: signal wake', () => {
  it('passes ended jobs and fails one left parked with a delivered signal of its name', () => {
    expect(signalWakeViolations([job()], [], T0)).toEqual([]);
    const parked = job({ state: 'delayed', waitingForSignal: { name: 'go' } });
    const [x] = signalWakeViolations([parked], [send(1, T0 + 10)], T0);
    expect(x).toMatch(/sig-1: parked for go without deadline after the drain; 1 sends of go delivered/);
  });
});

describe('chaos verdict: signals consumed once', () => {
  const sends = bySid([send(1, T0 + 1), send(2, T0 + 10), send(3, T0 + 20)]);
  it('passes waits that each took their own send, replayed by a later run', () => {
    const lines = [line(0, 'taken', T0 + 5), line(0, 'taken', T0 + 50, { a: 2 }), line(1, 'taken', T0 + 51)];
    expect(signalConsumeViolations([add()], jobsOf(job()), lines, sends)).toEqual([]);
  });

  it('fails a send two waits took (the taken signal was not removed), and a run that took another', () => {
    const twice = job({ steps: { '~signal:0': taken(1), '~signal:1': taken(1) }, result: { sig: [1, 1] } });
    expect(signalConsumeViolations([add()], jobsOf(twice), [], sends)).toEqual([
      'send #1 taken by sig-1 wait 0 and by sig-1 wait 1',
    ]);
    const rerun = [line(0, 'taken', T0 + 5), line(0, 'taken', T0 + 50, { a: 2, sid: 3 })];
    expect(signalConsumeViolations([add()], jobsOf(job()), rerun, sends)).toEqual([
      'sig-1 wait 0 (go) ended with send #1, but attempt 2 in pid 9 saw send #3',
    ]);
  });

  it("fails a result that disagrees with the stored wait, and a take of another job's send", () => {
    const wrong = job({ result: { sig: [1, null] } });
    expect(signalConsumeViolations([add()], jobsOf(wrong), [], sends)).toEqual([
      "sig-1 wait 1 (go) ended with send #2, but the job's result carries null",
    ]);
    const other = bySid([send(1, T0 + 1), send(2, T0 + 10, { id: 'sig-2' })]);
    expect(signalConsumeViolations([add()], jobsOf(job()), [], other)).toEqual([
      'sig-1 wait 1 (signal go) took send #2, which was sent to sig-2 as go',
    ]);
  });
});

describe('chaos verdict: signal payloads', () => {
  it('fails a taken payload that no send carried', () => {
    expect(signalPayloadViolations([add()], jobsOf(job()), [], bySid([send(1, T0), send(2, T0)]))).toEqual(
      [],
    );
    expect(signalPayloadViolations([add()], jobsOf(job()), [], bySid([send(1, T0)]))).toEqual([
      'sig-1: a wait took the payload of send #2, never sent',
    ]);
  });
});

describe('chaos verdict: signal order', () => {
  it('passes sends taken in order, a rejected send taken anywhere, and a timeout with none pending', () => {
    const list = [send(1, T0 + 1), send(2, T0 + 10)];
    expect(signalOrderViolations([add()], jobsOf(job()), [], list, 1, T0)).toEqual([]);
    // Send 7 rejected (it may have landed late), then 1 and 2 in order: wait 0 took 7, wait 1 took 1.
    const rejected = [send(7, T0), send(1, T0 + 5), send(2, T0 + 10)];
    delete rejected[0]!.answer;
    rejected[0]!.error = 'ERR_CONNECTION';
    const j = job({ steps: { '~signal:0': taken(7), '~wait:1': T0 + 900, '~signal:1': taken(1) } });
    expect(signalOrderViolations([add()], jobsOf(j), [], rejected, 1, T0)).toEqual([]);
    const timedOut = job({
      steps: { '~signal:0': taken(1), '~wait:1': T0 + 900, '~signal:1': { timedOut: true } },
    });
    expect(
      signalOrderViolations([add()], jobsOf(timedOut), [], [send(1, T0 + 1), send(2, T0 + 950)], 1, T0),
    ).toEqual([]);
  });

  it('fails a newer send taken before an older one, a send refused as ended, a timeout with one pending', () => {
    const swapped = job({ steps: { '~signal:0': taken(2), '~signal:1': taken(1) } });
    const list = [send(1, T0 + 1), send(2, T0 + 10)];
    expect(signalOrderViolations([add()], jobsOf(swapped), [], list, 1, T0)).toEqual([
      'sig-1 wait 0 (go) took send #2 (sent at +0.010s) while older delivered send #1 (answered at +0.003s) was pending',
      'sig-1 wait 1 (go) took send #1, which an earlier wait of the job had taken',
    ]);
    const refused = [
      send(1, T0 + 1),
      send(2, T0 + 10, { answer: { delivered: false, state: 'completed', woke: false, reason: 'ended' } }),
    ];
    expect(signalOrderViolations([add()], jobsOf(job()), [], refused, 1, T0)).toEqual([
      'sig-1 wait 1 (go) took send #2, answered not delivered (ended)',
    ]);
    const lostWake = job({
      steps: { '~signal:0': taken(1), '~wait:1': T0 + 900, '~signal:1': { timedOut: true } },
    });
    expect(signalOrderViolations([add()], jobsOf(lostWake), [], list, 1, T0)).toEqual([
      'sig-1 wait 1 (go) timed out at its deadline +0.900s though send #2, delivered at +0.012s, was pending',
    ]);
  });
});

describe('chaos verdict: signal timeouts', () => {
  const timedOut = job({
    steps: { '~signal:0': taken(1), '~wait:1': T0 + 900, '~signal:1': { timedOut: true } },
  });
  const begins = new Map([['sig-1#1', T0]]);
  it('passes a timeout logged after the stored deadline', () => {
    expect(
      signalTimeoutViolations([add()], jobsOf(timedOut), [line(1, 'timeout', T0 + 905)], begins, 1, T0),
    ).toEqual([]);
  });

  it('fails a timeout before the deadline (stored, or at the earliest for a deleted job), or without timeout', () => {
    expect(
      signalTimeoutViolations([add()], jobsOf(timedOut), [line(1, 'timeout', T0 + 400)], begins, 1, T0),
    ).toEqual([
      'sig-1 wait 1 (go, timeout 500 ms) timed out in attempt 1 at +0.400s, 500 ms before its deadline +0.900s',
    ]);
    expect(
      signalTimeoutViolations([add()], new Map(), [line(1, 'timeout', T0 + 400)], begins, 1, T0),
    ).toEqual([
      'sig-1 wait 1 (go, timeout 500 ms) timed out in attempt 1 at +0.400s, 100 ms before its deadline +0.500s (at the earliest)',
    ]);
    expect(
      signalTimeoutViolations([add()], new Map(), [line(0, 'timeout', T0 + 400)], begins, 1, T0),
    ).toEqual(['sig-1 wait 0 (go) has no timeout, but timed out']);
  });
});

describe('chaos verdict: signals to ended jobs', () => {
  const ended = { delivered: false, state: 'completed' as const, woke: false, reason: 'ended' as const };
  const adds = new Map([['sig-1', add()]]);
  it('passes delivered sends before the end, refusals after it, and missing once retention deleted it', () => {
    const list = [
      send(1, T0 + 1),
      send(2, T0 + 6_000, { why: 'ended', answer: ended }),
      send(3, T0 + 7_000, {
        id: 'sig-9',
        answer: { delivered: false, state: 'missing', woke: false, reason: 'missing' },
      }),
    ];
    expect(signalEndedViolations(list, jobsOf(job()), adds, null, 1, T0)).toEqual([]);
    const missing = send(4, T0 + 6_000, {
      why: 'ended',
      answer: { delivered: false, state: 'missing', woke: false, reason: 'missing' },
    });
    expect(signalEndedViolations([missing], new Map(), adds, new Set(['sig-1']), 1, T0)).toEqual([]);
  });

  it('fails a send delivered to an ended job, one refused as ended before the end, and one missing', () => {
    const list = [
      send(1, T0 + 6_000, { why: 'ended', answer: { delivered: true, state: 'completed', woke: false } }),
      send(2, T0 + 100, { answer: ended }),
      send(3, T0 + 100, { answer: { delivered: false, state: 'missing', woke: false, reason: 'missing' } }),
    ];
    expect(signalEndedViolations(list, jobsOf(job()), adds, null, 1, T0)).toEqual([
      'send #1 (ended) to sig-1, sent at +6.000s: delivered (completed), but the job had completed at +5.000s',
      'send #1 (ended) to sig-1, sent at +6.000s: after the drain, answered delivered (completed)',
      'send #2 (late) to sig-1, sent at +0.100s: answered ended at +0.102s, before the job ended at +5.000s',
      'send #3 (late) to sig-1, sent at +0.100s: answered missing, but the job exists (completed)',
    ]);
  });
});

describe('chaos verdict: attempt accounting of parked jobs', () => {
  // Parked twice, then completed on its third start: three starts, two given back, none charged but one.
  const parked: AccountView = {
    id: 'sig-1',
    state: 'completed',
    data: { s: 1 },
    attempts: 3,
    attemptsLeft: 4,
    maxAttempts: 5,
    snoozes: 0,
    errors: [],
  };
  const begins = [1, 2, 3].map((a) => ({ id: 'sig-1', s: 1, a, pid: 1, at: T0 + a }));
  const parks = parkBounds([add()], [line(0, 'parked', T0 + 1), line(1, 'parked', T0 + 2, { a: 2 })]);

  it('passes a budget given back once per park the logs show', () => {
    expect(parks.get('sig-1#1')).toEqual({ lo: 2, hi: 2 });
    expect(accountingViolations([parked], begins, parks)).toEqual([]);
  });

  it('fails a budget given back more often than the job could park, or a park that charged it', () => {
    expect(accountingViolations([{ ...parked, attemptsLeft: 5 }], begins, parks)).toContain(
      'sig-1: 3 starts given back beyond its 0 snoozes, but it parked 2 times',
    );
    expect(accountingViolations([{ ...parked, attemptsLeft: 3 }], begins, parks)).toContain(
      'sig-1: 1 starts given back beyond its 0 snoozes, but it parked 2 times',
    );
    // Without the parks known, the same job looks like a budget off by two.
    expect(accountingViolations([parked], begins)).toEqual([
      'sig-1: attemptsLeft 4, but 3 starts less 0 snoozes of 5 leave 2',
      'sig-1 (completed): 0 error lines for 2 charged attempts that did not complete',
    ]);
  });
});
