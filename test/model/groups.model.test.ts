/**
 * Groups under random operations (adds, claims, completions, failures with and without retry,
 * snoozes, job.sleep, RateLimitError, job.waitForSignal parks and queue.signal wakes, recovery,
 * promote, changeDelay, remove, cancel, drain, limit changes): after every step the group bookkeeping must agree with the jobs (active and waiting counts
 * per group, the grouped waiting total, the backlog index), every group with waiting jobs must be able
 * to run again without anyone polling (in the rotation, parked until a time, or full with a job of its
 * own active, whose end wakes it), and a runnable group is never parked past its due time: a group
 * with waiting jobs and a free slot is parked no later than its reason lasts (its full rate window, a
 * delayed job of its own it keeps the place of under concurrency 1, a RateLimitError pause; a parked
 * job keeps no place: docs/workflows.md#signals). At the end, claiming and completing with the clock
 * moving (and signalling the parked jobs) must drain every job: no group is ever stranded.
 *
 * The scripts run with an injected clock that only moves forward from Redis's own (rate windows are
 * real-time TTLs, so the clock never runs behind them).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Queue } from '../../src/index.js';
import { type ArgValue, type ScriptSpec, scripts } from '../../src/scripts/specs.js';
import { decodeClaimed } from '../../src/store/job-record.js';
import { runScriptAt } from '../helpers/run-script-at.js';
import { uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const GROUPS = ['a', 'b', 'c'] as const;
const LEASE = 1_000;

type Op =
  | { op: 'add'; group: number; priority: number; delayMs: number; n: number }
  | { op: 'claim'; count: number }
  | { op: 'complete'; pick: number }
  | { op: 'fail'; pick: number; retryMs: number }
  | { op: 'snooze'; pick: number; delayMs: number; sleep: boolean }
  | { op: 'rateLimited'; pick: number; delayMs: number }
  | { op: 'promote'; pick: number }
  | { op: 'changeDelay'; pick: number; delayMs: number }
  | { op: 'drainQueue' }
  | { op: 'recover'; advance: number }
  | { op: 'cancel'; pick: number }
  | { op: 'remove'; pick: number }
  | { op: 'limits'; group: number; concurrency: number; rate: boolean }
  | { op: 'tick'; ms: number }
  /** job.waitForSignal('go') by a held job: takes a pending signal, times out, or parks (slot freed). */
  | { op: 'waitSignal'; pick: number; timeoutMs: number }
  | { op: 'signal'; pick: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constant('add' as const),
      group: fc.nat({ max: GROUPS.length }), // GROUPS.length = no group
      priority: fc.constantFrom(0, 0, -1, 3),
      delayMs: fc.constantFrom(0, 0, 0, 300),
      n: fc.integer({ min: 1, max: 4 }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({ op: fc.constant('claim' as const), count: fc.integer({ min: 1, max: 5 }) }),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('complete' as const), pick: fc.nat() }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('fail' as const),
      pick: fc.nat(),
      retryMs: fc.constantFrom(-1, 0, 200, 5_000, 5_000),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ op: fc.constant('recover' as const), advance: fc.constantFrom(0, LEASE + 1) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('snooze' as const),
      pick: fc.nat(),
      delayMs: fc.constantFrom(100, 5_000),
      sleep: fc.boolean(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('rateLimited' as const),
      pick: fc.nat(),
      delayMs: fc.constantFrom(100, 5_000),
    }),
  },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('promote' as const), pick: fc.nat() }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('changeDelay' as const),
      pick: fc.nat(),
      delayMs: fc.constantFrom(0, 0, 100, 5_000),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ op: 'drainQueue' as const }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('cancel' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('remove' as const), pick: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('limits' as const),
      group: fc.nat({ max: GROUPS.length }), // GROUPS.length = the default
      concurrency: fc.constantFrom(0, 1, 2), // 0 = none
      rate: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('tick' as const), ms: fc.constantFrom(50, 400) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('waitSignal' as const),
      pick: fc.nat(),
      timeoutMs: fc.constantFrom(0, 300),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('signal' as const), pick: fc.nat() }) },
);

class Harness {
  readonly q: Queue;
  now = 0;
  held: { id: string; token: string }[] = [];
  all: string[] = [];
  /** Group -> until when a RateLimitError paused it (model clock). */
  paused = new Map<string, number>();
  /** Job -> its waits that ended (taken or timed out): the number of its next wait, as a re-run counts. */
  waits = new Map<string, number>();

  constructor(name: string) {
    this.q = new Queue(name, { connection: fx.url });
  }

  get keys() {
    return this.q.keys;
  }

  async sync(): Promise<void> {
    const [s] = await fx.redis.time();
    this.now = Math.max(this.now, Number(s) * 1000 + 1_000);
  }

  run<A extends string, R extends string, T>(
    spec: ScriptSpec<A, R, T>,
    extra: Record<string, ArgValue>,
    rows: Record<R, ArgValue>[] = [],
  ) {
    return runScriptAt(fx.redis, this.keys, spec, this.now, { defaultLeaseMs: LEASE, ...extra }, rows);
  }

  takeHeld(pick: number) {
    if (this.held.length === 0) return null;
    return this.held.splice(pick % this.held.length, 1)[0]!;
  }

  async step(op: Op): Promise<void> {
    switch (op.op) {
      case 'add': {
        const group = GROUPS[op.group];
        const added = await this.q.addBulk(
          Array.from({ length: op.n }, () => ({
            data: {},
            opts: {
              priority: op.priority,
              ...(op.delayMs ? { delayMs: op.delayMs } : {}),
              ...(group ? { group } : {}),
            },
          })),
        );
        this.all.push(...added.map((a) => a.id));
        break;
      }
      case 'claim': {
        const reply = (await this.run(scripts.claim, { count: op.count })) as unknown[];
        for (let i = 6; i < reply.length; i += 2) {
          const id = String(reply[i]);
          this.held.push({ id, token: decodeClaimed(String(reply[i + 1])).token });
        }
        break;
      }
      case 'complete': {
        const h = this.takeHeld(op.pick);
        if (h) await this.run(scripts.complete, {}, [{ id: h.id, token: h.token, result: '1' }]);
        break;
      }
      case 'fail': {
        const h = this.takeHeld(op.pick);
        const error = JSON.stringify({ name: 'Error', message: 'model' });
        if (h)
          await this.run(scripts.fail, {}, [{ id: h.id, token: h.token, retryDelayMs: op.retryMs, error }]);
        break;
      }
      case 'snooze': {
        const h = this.takeHeld(op.pick);
        if (!h) break;
        // job.sleep stores its wake time as a step, then snoozes (src/worker/durable-steps.ts).
        if (op.sleep)
          await this.run(scripts.step, {
            id: h.id,
            token: h.token,
            name: '~sleep:0',
            value: String(this.now + op.delayMs),
            maxBytes: 1_000_000,
          });
        await this.run(scripts.fail, {}, [
          { id: h.id, token: h.token, retryDelayMs: op.delayMs, error: 'S' },
        ]);
        break;
      }
      case 'rateLimited': {
        const h = this.takeHeld(op.pick);
        if (!h) break;
        const group = await this.groupOf(h.id);
        await this.run(scripts.fail, {}, [
          { id: h.id, token: h.token, retryDelayMs: op.delayMs, error: 'R' },
        ]);
        if (group) this.paused.set(group, Math.max(this.paused.get(group) ?? 0, this.now + op.delayMs));
        break;
      }
      case 'promote':
      case 'changeDelay': {
        const id = await this.pickId(op.pick);
        if (id === null) break;
        await (op.op === 'promote' ? this.q.promote(id) : this.q.changeDelay(id, op.delayMs)).catch(() => {});
        break;
      }
      case 'drainQueue':
        await this.q.drain();
        break;
      case 'recover': {
        this.now += op.advance;
        await this.run(scripts.recover, {});
        if (op.advance > 0) this.held = [];
        break;
      }
      case 'cancel':
      case 'remove': {
        const id = await this.pickId(op.pick);
        if (id === null) break;
        await (op.op === 'cancel' ? this.q.cancel(id) : this.q.remove(id)).catch(() => {});
        this.held = this.held.filter((h) => h.id !== id);
        break;
      }
      case 'limits': {
        const limits = {
          concurrency: op.concurrency === 0 ? null : op.concurrency,
          rateLimit: op.rate ? { max: 2, durationMs: 60 } : null,
        };
        const group = GROUPS[op.group];
        await this.q.setGroupLimits(limits, group ? { group } : undefined);
        break;
      }
      case 'tick':
        this.now += op.ms;
        break;
      case 'waitSignal': {
        const h = this.takeHeld(op.pick);
        if (!h) break;
        const n = this.waits.get(h.id) ?? 0;
        const [outcome] = (await this.run(scripts.waitSignal, {
          id: h.id,
          token: h.token,
          name: 'go',
          n,
          timeoutMs: op.timeoutMs,
          maxBytes: 1_000_000,
        })) as string[];
        // Taken or timed out: the run goes on (the next wait is the next number); parked: it ends.
        if (outcome === 'taken' || outcome === 'timeout') {
          this.waits.set(h.id, n + 1);
          this.held.push(h);
        }
        break;
      }
      case 'signal': {
        const id = await this.pickId(op.pick);
        if (id !== null) await this.signal(id);
        break;
      }
    }
  }

  signal(id: string) {
    return this.run(scripts.signal, { id, name: 'go', payload: '', maxPending: 1_000 });
  }

  /** A job to edit: an odd pick takes a delayed one (retries and snoozes hold groups), else any. */
  async pickId(pick: number): Promise<string | null> {
    const delayed = pick % 2 === 1 ? await fx.redis.zrange(this.keys.delayed, 0, -1) : [];
    const from = delayed.length > 0 ? delayed : this.all;
    return from.length === 0 ? null : from[Math.floor(pick / 2) % from.length]!;
  }

  async groupOf(id: string): Promise<string> {
    const rec = await fx.redis.hget(this.keys.jobs, id);
    return rec?.slice(0, rec.indexOf('\n')).split('|')[13] ?? '';
  }

  /** The bookkeeping agrees with the jobs, and every group with waiting jobs can run again. */
  async check(trace: string): Promise<void> {
    const k = this.keys;
    const records = await fx.redis.hgetall(k.jobs);
    const groupOf = (rec: string) => rec.slice(0, rec.indexOf('\n')).split('|')[13] ?? '';
    const activeIds = (await fx.redis.zrange(k.active, 0, -1)).filter((id) => records[id] !== undefined);
    let waitingTotal = 0;
    for (const g of GROUPS) {
      const listed = [
        ...(await fx.redis.lrange(`${k.tag}:g:${g}:w`, 0, -1)),
        ...(await fx.redis.zrange(`${k.tag}:g:${g}:p`, 0, -1)),
      ];
      const waiting = Object.entries(records)
        .filter(([, r]) => r[0] === 'w' && groupOf(r) === g)
        .map(([id]) => id);
      expect(listed.sort(), `${trace}: group ${g} lists its waiting jobs`).toEqual(waiting.sort());
      waitingTotal += waiting.length;
      const active = activeIds.filter((id) => groupOf(records[id]!) === g).length;
      expect(Number((await fx.redis.hget(k.groupActive, g)) ?? 0), `${trace}: active of ${g}`).toBe(active);
      const backlog = await fx.redis.zscore(k.groupBacklog, g);
      if (waiting.length + active > 0)
        expect(Number(backlog), `${trace}: backlog of ${g}`).toBe(waiting.length);
      else expect(backlog, `${trace}: idle ${g} forgotten`).toBeNull();
      if (waiting.length > 0) {
        const ready = (await fx.redis.zscore(k.groupReady, g)) !== null;
        const parked = (await fx.redis.zscore(k.groupParked, g)) !== null;
        const limits = await this.q.getGroupLimits({ group: g });
        const full = limits.concurrency !== null && active >= limits.concurrency;
        expect(ready || parked || full, `${trace}: group ${g} with waiting jobs is stranded`).toBe(true);
        const until = Number((await fx.redis.zscore(k.groupParked, g)) ?? 0);
        if (!full && until > this.now) {
          // Parked past now: only as long as a reason lasts.
          let bound = this.paused.get(g) ?? 0;
          const rate = limits.rateLimit;
          const counter = await fx.redis.get(`${k.tag}:g:${g}:r`);
          // The window's counter expires in real time: on a loaded machine it may be gone by the time
          // it is read (seed -1784419403 in CI), and a park for that window is still due by then.
          const windowFull = counter === null || Number(counter) >= (rate?.max ?? Number.POSITIVE_INFINITY);
          if (rate && windowFull) bound = Math.max(bound, this.now + rate.durationMs + 5);
          if (limits.concurrency === 1) {
            const delayed = await fx.redis.zrange(k.delayed, 0, -1, 'WITHSCORES');
            for (let i = 0; i < delayed.length; i += 2) {
              const r = records[delayed[i]!];
              // A parked job holds no place: it may wait for days.
              const parked = r && (await this.q.getJob(delayed[i]!))?.waitingForSignal;
              if (r && groupOf(r) === g && !parked) bound = Math.max(bound, Number(delayed[i + 1]));
            }
          }
          expect(until, `${trace}: runnable group ${g} parked past its due time`).toBeLessThanOrEqual(bound);
        }
      }
    }
    expect(Number((await fx.redis.get(k.groupWaiting)) ?? 0), `${trace}: grouped waiting total`).toBe(
      waitingTotal,
    );
    const plain = [...(await fx.redis.lrange(k.waiting, 0, -1)), ...(await fx.redis.zrange(k.prio, 0, -1))];
    expect(
      plain.filter((id) => records[id] && groupOf(records[id]) !== ''),
      `${trace}: grouped job in the plain list`,
    ).toEqual([]);
  }

  /** Claims and completes, the clock moving, until nothing is left: every job must end. */
  async drain(trace: string): Promise<void> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      await this.sync();
      // Parked jobs come back with their signal (those without a deadline would wait forever).
      for (const id of await fx.redis.zrange(this.keys.delayed, 0, -1))
        if ((await this.q.getJob(id))?.waitingForSignal) await this.signal(id);
      await this.run(scripts.recover, {});
      this.now += LEASE + 1;
      await this.run(scripts.recover, {});
      this.held = [];
      const reply = (await this.run(scripts.claim, { count: 50 })) as unknown[];
      const rows: Record<'id' | 'token' | 'result', ArgValue>[] = [];
      for (let i = 6; i < reply.length; i += 2) {
        const id = String(reply[i]);
        rows.push({ id, token: decodeClaimed(String(reply[i + 1])).token, result: '1' });
      }
      if (rows.length > 0) await this.run(scripts.complete, {}, rows);
      const c = await this.q.counts();
      if (c.waiting + c.delayed + c.active === 0) return;
      if (Date.now() > deadline) throw new Error(`${trace}: not drained: ${JSON.stringify(c)}`);
      // Rate windows are real-time: give one a moment to close before the next pass.
      if (rows.length === 0) await new Promise((r) => setTimeout(r, 20));
    }
  }
}

describe('groups under random operations', () => {
  it('keep their bookkeeping exact and never strand a group', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.boolean(),
        fc.array(opArb, { minLength: 5, maxLength: 40 }),
        async (strict, ops) => {
          const h = new Harness(uniqueName('gm'));
          try {
            await h.sync();
            // Half the runs start with every group at concurrency 1 (holds behind retries and snoozes).
            if (strict) await h.q.setGroupLimits({ concurrency: 1 });
            for (let i = 0; i < ops.length; i++) {
              await h.step(ops[i]!);
              await h.check(`after step ${i} (${JSON.stringify(ops[i])})`);
            }
            await h.drain('drain');
            await h.check('after drain');
          } finally {
            await h.q.close();
          }
        },
      ),
      // endOnFailure: report the failing sequence at once (shrinking it runs for minutes against Redis).
      {
        numRuns: process.env.CI ? 60 : 40,
        endOnFailure: true,
        // Tried first, then random runs: a group held behind a retry that is promoted, and a group
        // parked by its rate window whose rate limit is removed (issue 33, defect 7).
        examples: [
          [
            true,
            [
              { op: 'add', group: 0, priority: 0, delayMs: 0, n: 2 },
              { op: 'claim', count: 1 },
              { op: 'fail', pick: 0, retryMs: 5_000 },
              { op: 'promote', pick: 1 },
              { op: 'tick', ms: 50 },
            ],
          ],
          [
            false,
            [
              { op: 'limits', group: 1, concurrency: 0, rate: true },
              { op: 'add', group: 1, priority: 0, delayMs: 0, n: 3 },
              { op: 'claim', count: 5 },
              { op: 'limits', group: 1, concurrency: 0, rate: false },
              { op: 'tick', ms: 50 },
            ],
          ],
        ],
      },
    );
  }, 120_000);
});
