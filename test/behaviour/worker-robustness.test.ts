/**
 * The worker engine is not disturbed by what processors and listeners do, and close() hands back the
 * jobs it claimed but never started (issue 12, defects 4, 5 and 10).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MAX_MESSAGE_CHARS, MAX_STACK_CHARS } from '../../src/defaults.js';
import { normaliseThrown, serializeAttemptError } from '../../src/error-normaliser.js';
import { type Job, ListenerError, Queue, type SuretyError, Worker } from '../../src/index.js';
import { closeAfterEach, nextEvent, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

function queue<D = unknown, R = unknown>(name: string): Queue<D, R> {
  const q = new Queue<D, R>(name, { connection: fx.url });
  open.push(q);
  return q;
}
function worker<D, R>(name: string, fn: (job: Job<D>) => R | Promise<R>, opts = {}): Worker<D, R> {
  const w = new Worker<D, R>(name, fn, { connection: fx.url, ...opts });
  open.push(w);
  return w;
}

/** Unhandled rejections seen while a test runs (each test asserts there were none). */
let unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => unhandled.push(reason);
beforeEach(() => {
  unhandled = [];
  process.on('unhandledRejection', onUnhandled);
});
afterEach(() => {
  process.off('unhandledRejection', onUnhandled);
});

const trap = () => {
  throw new Error('proxy trap');
};
/** Values a processor may throw, and what the recorded message must match. */
const ODD_THROWS: [label: string, make: () => unknown, message: RegExp][] = [
  ['a null-prototype object', () => Object.create(null), /^\{\}$/],
  [
    'an Error whose stack is not a string',
    () => Object.defineProperty(new Error('bad stack'), 'stack', { value: 42 }),
    /^bad stack$/,
  ],
  [
    'an Error whose message getter returns an object',
    () => Object.defineProperty(new Error(), 'message', { get: () => ({ nested: true }) }),
    /.+/,
  ],
  [
    'an Error whose message getter throws',
    () => Object.defineProperty(new Error(), 'message', { get: trap }),
    /.+/,
  ],
  [
    'a Proxy that throws on every trap',
    () =>
      new Proxy(
        {},
        {
          get: trap,
          getPrototypeOf: trap,
          has: trap,
          ownKeys: trap,
          getOwnPropertyDescriptor: trap,
        },
      ),
    /.+/,
  ],
  ['a BigInt', () => 10n ** 30n, /^1000000000000000000000000000000$/],
  ['a symbol', () => Symbol('odd'), /^Symbol\(odd\)$/],
  ['undefined', () => undefined, /^undefined$/],
  [
    'a circular object',
    () => {
      const o: Record<string, unknown> = { a: 1 };
      o.self = o;
      return o;
    },
    /^\[object Object\]$/,
  ],
  ['a string of 10 MB', () => 'x'.repeat(10 * 1024 * 1024), new RegExp(`^x{${MAX_MESSAGE_CHARS}}$`)],
  [
    'an Error subclass with a throwing toJSON',
    () => {
      class OddError extends Error {
        toJSON(): never {
          throw new Error('no JSON for you');
        }
      }
      return new OddError('odd subclass');
    },
    /^odd subclass$/,
  ],
];

describe('a processor that throws an odd value', () => {
  it('every odd thrown or rejected value fails its attempt with a recorded error, and the worker carries on', async () => {
    const name = uniqueName();
    const q = queue<{ i: number; mode: 'throw' | 'reject' | 'ok' }>(name);
    const w = worker<{ i: number; mode: 'throw' | 'reject' | 'ok' }, string>(
      name,
      (job) => {
        if (job.data.mode === 'ok') return 'fine';
        const value = ODD_THROWS[job.data.i]![1]();
        if (job.data.mode === 'throw') throw value;
        return Promise.reject(value);
      },
      { concurrency: 4 },
    );
    const errors: SuretyError[] = [];
    w.on('error', (e) => errors.push(e));
    const failedEvents: Error[] = [];
    w.on('failed', (_job, err) => failedEvents.push(err));
    const items = ODD_THROWS.flatMap((_, i) => [
      { data: { i, mode: 'throw' as const }, opts: { maxAttempts: 1 } },
      { data: { i, mode: 'reject' as const }, opts: { maxAttempts: 1 } },
    ]);
    const added = await q.addBulk(items);
    await waitUntil(
      async () => (await q.counts()).dead === added.length,
      'every attempt recorded dead',
      15_000,
    );
    for (const [k, a] of added.entries()) {
      const [label, , message] = ODD_THROWS[items[k]!.data.i]!;
      const info = await q.getJob(a.id);
      expect(info, label).toMatchObject({ state: 'dead', attempts: 1 });
      expect(info!.errors, label).toHaveLength(1);
      expect(info!.errors[0]!.message, label).toMatch(message);
      expect(info!.errors[0]!.message.length, label).toBeLessThanOrEqual(MAX_MESSAGE_CHARS);
      expect(info!.errors[0]!.stack?.length ?? 0, label).toBeLessThanOrEqual(MAX_STACK_CHARS);
    }
    // Every failure was announced with a real Error; the slots are free and the worker carries on.
    expect(failedEvents).toHaveLength(added.length);
    for (const e of failedEvents) expect(e).toBeInstanceOf(Error);
    expect(w.activeCount).toBe(0);
    const next = await q.add({ i: 0, mode: 'ok' });
    expect(await q.waitFor(next.id)).toBe('fine');
    expect((await q.counts()).active).toBe(0);
    expect(errors).toEqual([]);
    expect(unhandled).toEqual([]);
  });

  it('the error normaliser never throws and bounds every field it keeps', () => {
    const hugeStack = Object.defineProperty(new Error('m'), 'stack', {
      value: 's'.repeat(10 * MAX_STACK_CHARS),
    });
    const hugeName = Object.defineProperty(new Error('m'), 'name', { value: 'N'.repeat(100_000) });
    const hugeCode = Object.assign(new Error('m'), { code: 'C'.repeat(100_000) });
    for (const [label, make] of [
      ...ODD_THROWS.map(([l, m]) => [l, m] as const),
      ['an Error with a huge stack', () => hugeStack] as const,
      ['an Error with a huge name', () => hugeName] as const,
      ['an Error with a huge code', () => hugeCode] as const,
      ['null', () => null] as const,
      ['a function', () => function named() {}] as const,
    ]) {
      const a = normaliseThrown(make());
      expect(a.error, label).toBeInstanceOf(Error);
      expect(typeof a.message, label).toBe('string');
      expect(a.message.length, label).toBeLessThanOrEqual(MAX_MESSAGE_CHARS);
      expect(a.name.length, label).toBeLessThanOrEqual(200);
      expect((a.stack ?? '').length, label).toBeLessThanOrEqual(MAX_STACK_CHARS);
      expect((a.code ?? '').length, label).toBeLessThanOrEqual(200);
      expect(JSON.parse(serializeAttemptError(a)).message, label).toBe(a.message);
    }
  });
});

describe('a processor that returns an odd value', () => {
  it('a result that cannot be stored fails the attempt with a typed error, and the slot is freed', async () => {
    const name = uniqueName();
    type Kind = 'bigint' | 'circular' | 'getter' | 'huge' | 'thenable-throws' | 'never-settles' | 'ok';
    const q = queue<{ kind: Kind }>(name);
    const w = worker<{ kind: Kind }, unknown>(
      name,
      (job) => {
        switch (job.data.kind) {
          case 'bigint':
            return { n: 1n };
          case 'circular': {
            const o: Record<string, unknown> = {};
            o.o = o;
            return o;
          }
          case 'getter':
            return Object.defineProperty({}, 'x', { enumerable: true, get: trap });
          case 'huge':
            return 'y'.repeat(2_000);
          case 'thenable-throws':
            // biome-ignore lint/suspicious/noThenProperty: the point is a thenable whose then() throws
            return { then: trap } as unknown as Promise<unknown>;
          case 'never-settles':
            // biome-ignore lint/suspicious/noThenProperty: the point is a thenable that never settles
            return { then() {} } as unknown as Promise<unknown>;
          default:
            return 'fine';
        }
      },
      { concurrency: 8, maxPayloadBytes: 1_000 },
    );
    const errors: SuretyError[] = [];
    w.on('error', (e) => errors.push(e));
    const expected: [Kind, string | undefined, RegExp][] = [
      ['bigint', 'ERR_NOT_SERIALIZABLE', /bigint/],
      ['circular', 'ERR_NOT_SERIALIZABLE', /circular/],
      ['getter', 'ERR_NOT_SERIALIZABLE', /proxy trap/],
      ['huge', 'ERR_PAYLOAD_TOO_LARGE', /maxPayloadBytes/],
      ['thenable-throws', undefined, /proxy trap/],
      ['never-settles', 'ERR_TIMEOUT', /timeout/],
    ];
    const added = await q.addBulk(
      expected.map(([kind]) => ({ data: { kind }, opts: { maxAttempts: 1, timeoutMs: 300 } })),
    );
    await waitUntil(async () => (await q.counts()).dead === added.length, 'all dead');
    for (const [k, a] of added.entries()) {
      const [kind, code, message] = expected[k]!;
      const info = await q.getJob(a.id);
      expect(info!.errors[0]!.code, kind).toBe(code);
      expect(info!.errors[0]!.message, kind).toMatch(message);
    }
    expect(w.activeCount).toBe(0);
    const next = await q.add({ kind: 'ok' });
    expect(await q.waitFor(next.id)).toBe('fine');
    expect(errors).toEqual([]);
    expect(unhandled).toEqual([]);
  });
});

describe('listeners that throw', () => {
  it("a throwing 'completed' listener is reported as ERR_LISTENER; the outcome is applied once and the worker keeps going", async () => {
    const name = uniqueName();
    const q = queue(name);
    const w = worker(name, () => 'done');
    const calls: string[] = [];
    w.on('completed', (job) => {
      calls.push(job.id);
      throw new Error(`listener broke on ${job.id}`);
    });
    const errors: SuretyError[] = [];
    w.on('error', (e) => errors.push(e));
    const first = await q.add({});
    await waitUntil(() => errors.length > 0, 'the listener error');
    expect(errors[0]).toBeInstanceOf(ListenerError);
    expect(errors[0]).toMatchObject({ code: 'ERR_LISTENER', event: 'completed' });
    expect(errors[0]!.message).toContain(`listener broke on ${first.id}`);
    const second = await q.add({});
    expect(await q.waitFor(second.id)).toBe('done');
    await waitUntil(() => calls.length === 2, 'the second completed event');
    // Give a re-sending acker every chance to show itself: one more job through the same loop.
    const third = await q.add({});
    await q.waitFor(third.id);
    await waitUntil(() => calls.length === 3, 'the third completed event');
    expect(calls).toEqual([first.id, second.id, third.id]);
    expect(errors.map((e) => e.code)).toEqual(['ERR_LISTENER', 'ERR_LISTENER', 'ERR_LISTENER']);
    // The lifecycle stream has exactly one `completed` entry per job.
    const entries = await fx.redis.xrange(q.keys.events, '-', '+');
    const completedIds = entries
      .filter(([, f]) => f[1] === 'completed')
      .flatMap(([, f]) => f[3]!.split('\n'));
    expect(completedIds.sort()).toEqual([first.id, second.id, third.id].sort());
    expect((await q.counts()).completed).toBe(3);
    expect(unhandled).toEqual([]);
  });

  it("an async 'failed' listener that rejects is reported as ERR_LISTENER, not left unhandled", async () => {
    const name = uniqueName();
    const q = queue(name);
    const w = worker(name, () => {
      throw new Error('processor failed');
    });
    let calls = 0;
    w.on('failed', async () => {
      calls++;
      throw new Error('async listener broke');
    });
    const firstError = nextEvent<[SuretyError]>(w, 'error');
    const job = await q.add({}, { maxAttempts: 1 });
    const [err] = await firstError;
    expect(err).toMatchObject({ code: 'ERR_LISTENER', event: 'failed' });
    expect((err.cause as Error).message).toBe('async listener broke');
    await expect(q.waitFor(job.id)).rejects.toMatchObject({ code: 'ERR_JOB_DEAD' });
    const errs: SuretyError[] = [];
    w.on('error', (e) => errs.push(e));
    const next = await q.add({}, { maxAttempts: 1 });
    await expect(q.waitFor(next.id)).rejects.toMatchObject({ code: 'ERR_JOB_DEAD' });
    await waitUntil(() => errs.length === 1, 'the second listener error');
    expect(errs[0]).toMatchObject({ code: 'ERR_LISTENER', event: 'failed' });
    expect(calls).toBe(2);
    expect(unhandled).toEqual([]);
  });
});

describe('close() and jobs claimed but not started', () => {
  it('close hands prefetched jobs back at once, attempts unchanged, and starts none of them', async () => {
    const name = uniqueName();
    const q = queue(name);
    const started: string[] = [];
    let closeCalled = false;
    const startedAfterClose: string[] = [];
    let finish!: () => void;
    const finished = new Promise<void>((r) => {
      finish = r;
    });
    const w = new Worker(
      name,
      async (job) => {
        started.push(job.id);
        if (closeCalled) startedAfterClose.push(job.id);
        await finished;
        return 'ran';
      },
      { connection: fx.url, concurrency: 1, prefetch: 4, autostart: false },
    );
    const added = await q.addBulk(Array.from({ length: 5 }, () => ({ data: {}, opts: { maxAttempts: 1 } })));
    await w.start();
    // One running, four prefetched: all five leased to this worker.
    await waitUntil(async () => (await q.counts()).active === 5 && started.length === 1, 'five leased');
    closeCalled = true;
    const closing = w.close();
    // Handed back at once, while the running job still runs (not at lease expiry).
    await waitUntil(async () => (await q.counts()).waiting === 4, 'four back in waiting');
    finish();
    await closing;
    expect(startedAfterClose).toEqual([]);
    expect(started).toEqual([added[0]!.id]);
    expect(await q.getJob(added[0]!.id)).toMatchObject({ state: 'completed', attempts: 1 });
    const rest = added.slice(1).map((a) => a.id);
    for (const id of rest) {
      expect(await q.getJob(id)).toMatchObject({ state: 'waiting', attempts: 0, errors: [] });
    }
    // Front of the line, in the order they were claimed.
    expect(await fx.redis.lrange(q.keys.waiting, 0, -1)).toEqual(rest);
    // Another worker runs each of them with its single attempt.
    const ran: string[] = [];
    worker(name, (job) => {
      ran.push(job.id);
      return 'ran';
    });
    for (const id of rest) expect(await q.waitFor(id)).toBe('ran');
    expect(ran).toEqual(rest);
    expect(startedAfterClose).toEqual([]);
    expect(unhandled).toEqual([]);
  });

  it('a claim reply that arrives during close starts no job; its jobs go back to waiting unspent', async () => {
    const name = uniqueName();
    const q = queue(name);
    const started: string[] = [];
    const w = new Worker(
      name,
      (job) => {
        started.push(job.id);
      },
      { connection: fx.url, concurrency: 3, prefetch: 0, autostart: false },
    );
    // Hold the first claim's reply (the claim itself runs in Redis) until close() has been called.
    type Calls = { claim(...args: unknown[]): Promise<unknown> };
    const calls = (w as unknown as { lanes: { calls: Calls }[] }).lanes[0]!.calls;
    const claim = calls.claim.bind(calls);
    let open!: () => void;
    const gate = new Promise<void>((r) => {
      open = r;
    });
    calls.claim = async (...args) => {
      const reply = await claim(...args);
      await gate;
      return reply;
    };
    const added = await q.addBulk(Array.from({ length: 3 }, () => ({ data: {}, opts: { maxAttempts: 1 } })));
    await w.start();
    await waitUntil(async () => (await q.counts()).active === 3, 'the claim ran in Redis');
    const closing = w.close();
    open();
    await closing;
    expect(started).toEqual([]);
    for (const a of added) expect(await q.getJob(a.id)).toMatchObject({ state: 'waiting', attempts: 0 });
    const ran: string[] = [];
    worker(name, (job) => {
      ran.push(job.id);
    });
    for (const a of added) await q.waitFor(a.id);
    expect(ran).toEqual(added.map((a) => a.id));
    expect(started).toEqual([]);
  });

  it('2 500 prefetched jobs are handed back in claim order, across the release chunks', async () => {
    const name = uniqueName();
    const q = queue(name);
    let finish!: () => void;
    const finished = new Promise<void>((r) => {
      finish = r;
    });
    let running = 0;
    const w = new Worker(
      name,
      async () => {
        running++;
        await finished;
      },
      { connection: fx.url, concurrency: 1, prefetch: 2_500, autostart: false },
    );
    const added = await q.addBulk(Array.from({ length: 2_501 }, () => ({ data: {} })));
    await w.start();
    await waitUntil(async () => running === 1 && (await q.counts()).active === 2_501, 'all leased', 20_000);
    const closing = w.close();
    await waitUntil(async () => (await q.counts()).waiting === 2_500, 'handed back', 20_000);
    finish();
    await closing;
    const rest = added.slice(1).map((a) => a.id);
    expect(await fx.redis.lrange(q.keys.waiting, 0, -1)).toEqual(rest);
    const infos = await q.getJobs('waiting', { limit: 3_000 });
    expect(infos.every((j) => j.attempts === 0)).toBe(true);
    expect((await q.counts()).active).toBe(0);
  });

  it('in a partitioned queue, close hands back the unstarted jobs of every partition', async () => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url, partitions: 3 });
    open.push(q);
    let running = 0;
    let finish!: () => void;
    const finished = new Promise<void>((r) => {
      finish = r;
    });
    const w = new Worker(
      name,
      async () => {
        running++;
        await finished;
      },
      { connection: fx.url, partitions: 3, concurrency: 1, prefetch: 8, autostart: false },
    );
    const added = await q.addBulk(Array.from({ length: 9 }, () => ({ data: {}, opts: { maxAttempts: 1 } })));
    await w.start();
    await waitUntil(async () => running === 1 && (await q.counts()).active === 9, 'nine leased');
    const closing = w.close();
    await waitUntil(async () => (await q.counts()).waiting === 8, 'eight handed back');
    finish();
    await closing;
    expect(running).toBe(1);
    const infos = await Promise.all(added.map((a) => q.getJob(a.id)));
    expect(infos.filter((i) => i!.state === 'waiting' && i!.attempts === 0)).toHaveLength(8);
    // Generated ids carry their partition (`<n>@<p>`): the jobs handed back span all three.
    const parts = infos.filter((i) => i!.state === 'waiting').map((i) => i!.id.split('@')[1]);
    expect(new Set(parts).size).toBe(3);
  });

  it('a prioritised job handed back goes to the front of its priority', async () => {
    const name = uniqueName();
    const q = queue(name);
    let finish!: () => void;
    const finished = new Promise<void>((r) => {
      finish = r;
    });
    let running = 0;
    const w = new Worker(
      name,
      async () => {
        running++;
        await finished;
      },
      { connection: fx.url, concurrency: 1, prefetch: 2, autostart: false },
    );
    const held = await q.addBulk(Array.from({ length: 3 }, () => ({ data: {}, opts: { priority: 5 } })));
    await w.start();
    await waitUntil(async () => running === 1 && (await q.counts()).active === 3, 'three leased');
    const later = await q.add({}, { priority: 5 });
    const closing = w.close();
    await waitUntil(async () => (await q.counts()).waiting === 3, 'handed back');
    finish();
    await closing;
    const order: string[] = [];
    worker(name, (job) => {
      order.push(job.id);
    });
    await q.waitFor(later.id);
    await waitUntil(() => order.length === 3, 'three ran');
    expect(order).toEqual([held[1]!.id, held[2]!.id, later.id]);
  });
});
