/**
 * Model-based test of dependencies: random adds with dependsOn (both modes), removes and re-adds under
 * the same id with other parents, cancels, retries, claims, completions and failures, over the ids
 * 'a'..'f'. Adds, removes, cancels and retries go through the public API; claim, complete and fail run
 * the real scripts with an injected clock (as test/model/state-machine.model.test.ts does), so a run takes milliseconds.
 *
 * The model keeps, for each live job, the parents it has NOW (a removed and re-added id has only its
 * new ones). After every step: each job's state letter matches the one structure holding it; a job
 * leaves blocked for waiting only when all its current parents completed, and ends dead from blocked only
 * when cancelled or when a current parent died or was removed (not in ignoreDependencyFailure mode); no job is
 * released or killed twice.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Queue } from '../../src/index.js';
import { type ArgValue, runScript, type ScriptSpec, scripts } from '../../src/scripts/specs.js';
import { decodeClaimed } from '../../src/store/job-record.js';
import { queueKeys } from '../../src/store/keys.js';
import { uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const IDS = ['a', 'b', 'c', 'd', 'e', 'f'] as const;
const T0 = 1_700_000_000_000;
const RUNS = Number(process.env.DEPS_MODEL_RUNS ?? 150);
const ERROR_JSON = `{"name":"Error","message":"boom","code":"E_MODEL"}`;

type Op =
  | { op: 'add'; id: number; parents: number[]; ignore: boolean }
  | { op: 'remove' | 'cancel' | 'retry' | 'complete' | 'fail'; id: number }
  | { op: 'claim' };

const idArb = fc.integer({ min: 0, max: IDS.length - 1 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constant('add' as const),
      id: idArb,
      parents: fc.uniqueArray(idArb, { maxLength: 3 }),
      ignore: fc.boolean(),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('remove' as const), id: idArb }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('cancel' as const), id: idArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('retry' as const), id: idArb }) },
  { weight: 3, arbitrary: fc.constant({ op: 'claim' as const }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('complete' as const), id: idArb }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('fail' as const), id: idArb }) },
);

interface Live {
  parents: string[];
  ignore: boolean;
  /** Set once the job left blocked (released or killed): it must not happen again. */
  settled: boolean;
  cancelled: boolean;
  /** Parents seen completed while this job was blocked (or when it was added): met for good, even if retried later. */
  met: Set<string>;
}

type State = 'waiting' | 'delayed' | 'blocked' | 'active' | 'completed' | 'dead';

class Harness {
  readonly name = uniqueName('depmodel');
  readonly keys = queueKeys('surety', this.name);
  readonly queue = new Queue(this.name, { connection: fx.redis });
  readonly live = new Map<string, Live>();
  readonly tokens = new Map<string, string>();
  readonly trace: string[] = [];
  states = new Map<string, State>();
  now = T0;

  private run<A extends string, R extends string>(
    spec: ScriptSpec<A, R>,
    rows: readonly Record<R, ArgValue>[] = [],
    extra: Record<string, ArgValue> = {},
  ): Promise<unknown> {
    const values: Record<string, ArgValue> = {
      now: this.now,
      defaultLeaseMs: 60_000,
      defaultMaxAttempts: 1,
      limit: 1_000,
      keepCount: 1_000,
      keepAgeMs: 1_000_000_000, // no job is trimmed: every state stays visible
      wakeChannel: this.keys.wakeChannel,
      doneChannel: this.keys.doneChannel,
      rateMax: 0,
      rateWindowMs: 0,
      eventsMaxLen: 0,
      partitions: 1,
      idSuffix: '',
      checkOnly: '',
      claimer: '',
      nonce: '',
      startNow: '',
      count: 100,
      ...extra,
    };
    const args = {} as Record<A, ArgValue>;
    for (const a of spec.args) {
      const v = values[a];
      if (v === undefined) throw new Error(`no value for argument ${a} of ${spec.name}.lua`);
      args[a] = v;
    }
    return runScript(fx.redis, spec, this.keys, args, rows);
  }

  fail(msg: string): never {
    throw new Error(`${msg}\ntrace:\n  ${this.trace.join('\n  ')}`);
  }

  async step(op: Op): Promise<void> {
    this.now += 10;
    const before = new Map(this.states);
    let cancelled: string | null = null;
    let outcome = 'ok';
    try {
      switch (op.op) {
        case 'add': {
          const id = IDS[op.id]!;
          // Parents are picked among the jobs that exist (an unknown parent only makes the add fail).
          const known = [...this.states.keys()].filter((p) => p !== id).sort();
          const parents = [...new Set(op.parents.map((p) => known[p % known.length]!))].filter(
            () => known.length > 0,
          );
          const existed = this.states.has(id);
          const added = await this.queue.add(
            { n: this.trace.length },
            {
              id,
              maxAttempts: 1,
              ...(parents.length ? { dependsOn: parents, ignoreDependencyFailure: op.ignore } : {}),
            },
          );
          outcome = `${added.state}${added.isNew ? '' : ' (existing)'}`;
          if (added.isNew) {
            if (existed) this.fail(`add of live id ${id} made a new job`);
            this.live.set(id, {
              parents,
              ignore: op.ignore,
              settled: added.state !== 'blocked',
              cancelled: false,
              // A completed parent is met; with ignoreDependencyFailure a dead one is too (it counts as finished).
              met: new Set(
                parents.filter((p) => {
                  const st = this.states.get(p);
                  return st === 'completed' || (op.ignore && st === 'dead');
                }),
              ),
            });
          }
          this.trace.push(`add ${id} dependsOn=[${parents}]${op.ignore ? ' ignore' : ''} -> ${outcome}`);
          break;
        }
        case 'remove':
        case 'cancel':
        case 'retry': {
          const id = IDS[op.id]!;
          await this.queue[op.op](id);
          if (op.op === 'remove') {
            this.live.delete(id);
            this.tokens.delete(id);
          }
          if (op.op === 'cancel') {
            cancelled = id;
            this.tokens.delete(id);
            const j = this.live.get(id);
            if (j) j.cancelled = true;
          }
          if (op.op === 'retry') {
            const j = this.live.get(id);
            if (j) j.cancelled = false;
          }
          this.trace.push(`${op.op} ${id} -> ok`);
          break;
        }
        case 'claim': {
          const r = (await this.run(scripts.claim)) as (string | number)[];
          let first = 3;
          while (first < r.length && !String(r[first + 1]).includes('\n')) first++;
          const got: string[] = [];
          for (let i = first; i < r.length; i += 2) {
            const id = String(r[i]);
            this.tokens.set(id, decodeClaimed(String(r[i + 1])).token);
            got.push(id);
          }
          this.trace.push(`claim -> [${got}]`);
          break;
        }
        case 'complete':
        case 'fail': {
          const id = IDS[op.id]!;
          const token = this.tokens.get(id);
          if (token === undefined) return;
          this.tokens.delete(id);
          if (op.op === 'complete') await this.run(scripts.complete, [{ id, token, result: '"done"' }]);
          else await this.run(scripts.fail, [{ id, token, retryDelayMs: 0, error: ERROR_JSON }]);
          this.trace.push(`${op.op} ${id}`);
          break;
        }
      }
    } catch (err) {
      this.trace.push(`${JSON.stringify(op)} -> ${(err as Error).name}: ${(err as Error).message}`);
    }
    await this.check(before, cancelled);
  }

  /** Reads every job's state and checks it against the structures and the dependency rules. */
  async check(before: Map<string, State>, cancelled: string | null): Promise<void> {
    const k = this.keys;
    const [waiting, prio, delayed, active, completed, dead, deps] = await Promise.all([
      fx.redis.lrange(k.waiting, 0, -1),
      fx.redis.zrange(k.prio, 0, -1),
      fx.redis.zrange(k.delayed, 0, -1),
      fx.redis.zrange(k.active, 0, -1),
      fx.redis.zrange(k.completed, 0, -1),
      fx.redis.zrange(k.dead, 0, -1),
      fx.redis.hkeys(k.deps),
    ]);
    const holders: Record<State, Set<string>> = {
      waiting: new Set([...waiting, ...prio]),
      delayed: new Set(delayed),
      active: new Set(active),
      completed: new Set(completed),
      dead: new Set(dead),
      blocked: new Set(deps),
    };
    const now = new Map<string, State>();
    for (const id of IDS) {
      const job = await this.queue.getJob(id);
      const where = (Object.keys(holders) as State[]).filter((s) => holders[s].has(id));
      if (job === null) {
        if (where.length > 0) this.fail(`${id} has no record but is in ${where}`);
        if (this.live.has(id)) this.fail(`${id} vanished without a remove`);
        continue;
      }
      const state = job.state as State;
      if (where.length !== 1 || where[0] !== state) this.fail(`${id} is ${state} but is held by [${where}]`);
      now.set(id, state);
    }
    // A removed parent ends like a dead one (docs/design.md "Dependencies").
    const died = (p: string) => now.get(p) === 'dead' || !now.has(p);
    for (const [id, state] of now) {
      const j = this.live.get(id);
      if (!j) this.fail(`${id} exists but the model has no live job for it`);
      const was = before.get(id);
      if (was === 'blocked' || state === 'blocked')
        for (const p of j.parents) if (now.get(p) === 'completed' || (j.ignore && died(p))) j.met.add(p);
      const open = j.parents.filter((p) => !j.met.has(p));
      if (state === 'blocked') {
        if (j.settled) this.fail(`${id} is blocked again after it left blocked`);
        const missing = open.filter((p) => !(j.ignore && died(p)));
        if (missing.length === 0)
          this.fail(`${id} stays blocked though all its parents [${j.parents}] finished`);
        if (!j.ignore && open.some(died)) this.fail(`${id} stays blocked though a parent died`);
      }
      if (was === 'blocked' && state !== 'blocked') {
        j.settled = true;
        if (state === 'dead') {
          const parentDied = open.some(died);
          if (cancelled !== id && !(parentDied && !j.ignore))
            this.fail(
              `${id} was killed from blocked though no current parent of [${j.parents}] died or was removed`,
            );
        } else if (state === 'waiting') {
          const ok = open.every((p) => j.ignore && died(p));
          if (!ok)
            this.fail(
              `${id} was released though its current parents [${j.parents}] are ${j.parents.map((p) => now.get(p) ?? 'gone')}`,
            );
        } else this.fail(`${id} went from blocked to ${state}`);
      }
      if (j.cancelled && was === 'dead' && state !== 'dead')
        this.fail(`${id}, cancelled, came back as ${state} without a retry`);
    }
    this.states = now;
  }
}

describe('dependencies model', () => {
  it('blocked jobs are released or killed only by their current parents, and cancelled ones stay dead', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 20, maxLength: 40 }), async (ops) => {
        const h = new Harness();
        try {
          for (const op of ops) await h.step(op);
        } finally {
          await h.queue.close();
        }
      }),
      { numRuns: RUNS },
    );
    expect(true).toBe(true);
  }, 60_000);

  /** Defect 6 of issue 12 (fixed by ecf96de), the shape of the counterexample the property found on the code before it. */
  it('a child removed and added again with another parent is not released by its old parent', async () => {
    const h = new Harness();
    try {
      const ops: Op[] = [
        { op: 'add', id: 0, parents: [], ignore: false },
        { op: 'add', id: 1, parents: [], ignore: false },
        { op: 'add', id: 2, parents: [0], ignore: false },
        { op: 'remove', id: 2 },
        { op: 'add', id: 2, parents: [1], ignore: false },
        { op: 'claim' },
        { op: 'complete', id: 0 },
      ];
      for (const op of ops) await h.step(op);
      expect(h.states.get('c')).toBe('blocked');
    } finally {
      await h.queue.close();
    }
  });
});
