import { afterAll, describe, expect, it, vi } from 'vitest';
import { createDashboard } from '../../src/dashboard/index.js';
import {
  NotSerializableError,
  PayloadTooLargeError,
  Queue,
  QueueEvents,
  queueKeys,
  repartition,
  SuretyError,
  ValidationError,
  Worker,
} from '../../src/index.js';
import { MAX_DELAY_MS } from '../../src/options/backoff.js';
import { parseClusterUrl } from '../../src/redis/connection.js';
import { MAX_TIMER_MS, safeTimeout, timerMs } from '../../src/timers.js';
import { Interval } from '../../src/worker/interval.js';
import { nextEvent, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const queues: Queue[] = [];
afterAll(async () => {
  await Promise.all(queues.map((q) => q.close()));
});
function queue(opts = {}): Queue {
  const q = new Queue(uniqueName(), { connection: fx.url, ...opts });
  queues.push(q);
  return q;
}

async function nothingWritten(q: Queue): Promise<void> {
  expect(await fx.redis.keys(`${q.keys.tag}*`)).toEqual([]);
}

describe('bad input is refused with a typed error before anything is written', () => {
  it.each([
    ['', 'ERR_INVALID_QUEUE_NAME'],
    ['has space', 'ERR_INVALID_QUEUE_NAME'],
    ['brace{tag}', 'ERR_INVALID_QUEUE_NAME'],
    ['colon:name', 'ERR_INVALID_QUEUE_NAME'],
    ['x'.repeat(101), 'ERR_INVALID_QUEUE_NAME'],
  ])('queue name %j', (name, code) => {
    expect(() => new Queue(name, { connection: fx.url })).toThrow(expect.objectContaining({ code }));
    expect(() => new Worker(name, () => {}, { connection: fx.url, autostart: false })).toThrow(
      ValidationError,
    );
  });

  it('names the option, the value and what is allowed', () => {
    expect(() => new Queue('ok', { connection: fx.url, defaults: { maxAttempts: 0 } })).toThrow(
      'defaults.maxAttempts must be an integer from 1 to 1000, got 0',
    );
    expect(() => new Worker('ok', () => {}, { connection: fx.url, concurrency: 1.5 })).toThrow(
      'concurrency must be an integer from 1 to 10000, got 1.5',
    );
  });

  it('rejects misspelt options', () => {
    expect(() => new Queue('ok', { connection: fx.url, defaults: { attempts: 3 } as never })).toThrow(
      /unknown option "attempts"/,
    );
    expect(() => new Worker('ok', () => {}, { connection: fx.url, concurency: 3 } as never)).toThrow(
      /unknown option "concurency"/,
    );
  });

  it.each([
    [{ delay: 5 }, /unknown option "delay"/],
    [{ delayMs: -1 }, /delayMs must be an integer/],
    [{ delayMs: 10, runAt: Date.now() }, /either delayMs or runAt/],
    [{ runAt: new Date('invalid') }, /runAt must be an integer/],
    [{ priority: 2_000_000 }, /priority must be an integer from -1000000 to 1000000/],
    [{ maxAttempts: 1_001 }, /maxAttempts must be an integer from 1 to 1000/],
    [{ leaseMs: 10 }, /leaseMs must be an integer from 100/],
    [{ backoff: { type: 'linear' } }, /backoff.type must be/],
    [{ backoff: { type: 'fixed', delayMs: 10, maxDelayMs: 5 } }, /maxDelayMs applies to exponential/],
    [{ backoff: { type: 'custom' } }, /backoff.name must name/],
    [{ id: '' }, /job id must be a string/],
    [{ id: 42 }, /job id must be a string/],
    [{ id: 'a\nb' }, /without control characters/],
    [{ id: 'x'.repeat(257) }, /1-256 characters/],
  ])('job options %j', async (opts, message) => {
    const q = queue();
    const err = await q.add({}, opts as never).catch((e) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect(err).toBeInstanceOf(SuretyError);
    expect(err.message).toMatch(message);
    await nothingWritten(q);
  });

  it.each([
    ['a function', () => 1, /function/],
    ['a BigInt', 10n, /BigInt|bigint/],
    ['NaN', Number.NaN, /NaN/],
    ['Infinity', { x: Number.POSITIVE_INFINITY }, /data\.x is Infinity/],
    ['a Date', { when: new Date() }, /data\.when is a Date/],
    ['a Map', new Map(), /Map/],
    ['a class instance', new (class Order {})(), /Order/],
    ['a symbol', { s: Symbol('x') }, /symbol/],
    ['undefined', undefined, /undefined/],
    ['undefined in an array', [1, undefined], /\[1\] is undefined/],
  ])('data that is %s', async (_label, data, message) => {
    const q = queue();
    const err = await q.add(data as never).catch((e) => e);
    expect(err).toBeInstanceOf(NotSerializableError);
    expect(err.code).toBe('ERR_NOT_SERIALIZABLE');
    expect(err.message).toMatch(message);
    await nothingWritten(q);
  });

  it('circular data', async () => {
    const q = queue();
    const a: Record<string, unknown> = {};
    a.self = a;
    await expect(q.add(a)).rejects.toThrow(/circular/);
    await nothingWritten(q);
  });

  it('a payload over maxPayloadBytes (measured in UTF-8 bytes)', async () => {
    const q = queue({ maxPayloadBytes: 100 });
    await expect(q.add({ s: 'é'.repeat(50) })).rejects.toBeInstanceOf(PayloadTooLargeError);
    await expect(q.add({ s: 'e'.repeat(80) })).resolves.toMatchObject({ isNew: true });
    const big = queue();
    await expect(big.add({ s: 'x'.repeat(512 * 1024) })).rejects.toMatchObject({
      code: 'ERR_PAYLOAD_TOO_LARGE',
    });
    await nothingWritten(big);
  });

  it('one bad item in addBulk rejects the whole call and writes nothing', async () => {
    const q = queue();
    const items = [{ data: { ok: 1 } }, { data: { bad: () => 1 } }, { data: { ok: 2 } }];
    await expect(q.addBulk(items as never)).rejects.toThrow(/item 1 data\.bad/);
    await nothingWritten(q);
  });

  it('plain JSON with __proto__ and constructor keys round-trips as data and pollutes nothing', async () => {
    const q = queue();
    const data = JSON.parse(
      '{"__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted": true}}, "n": 1}',
    );
    const added = await q.add(data);
    const job = await q.getJob(added.id);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(job!.data)).toBe(Object.prototype);
    expect(Object.hasOwn(job!.data as object, '__proto__')).toBe(true);
    expect((job!.data as { n: number }).n).toBe(1);
  });

  it('an undefined object property is allowed and simply absent, as in JSON', async () => {
    const q = queue();
    const added = await q.add({ a: 1, b: undefined });
    expect((await q.getJob(added.id))!.data).toEqual({ a: 1 });
  });

  it('a connection that is not a URL, options or a client', () => {
    expect(() => new Queue('ok', { connection: 'localhost:6379' })).toThrow(
      /redis:\/\/, rediss:\/\/ or redis\+cluster:\/\/ URL/,
    );
    expect(() => new Queue('ok', { connection: { cluster: [] } })).toThrow(
      /non-empty array of \{ host, port \}/,
    );
    expect(() => new Queue('ok', { connection: { url: 'redis://x', cluster: [] } as never })).toThrow(
      /either url or cluster/,
    );
    expect(() => new Queue('ok', { connection: 'redis+cluster://' })).toThrow(/cannot parse cluster URL/);
    expect(parseClusterUrl('redis+cluster://ops:p%40ss@127.0.0.1:7000,[::1]:7001,localhost')).toEqual({
      seeds: [
        { host: '127.0.0.1', port: 7000 },
        { host: '::1', port: 7001 },
        { host: 'localhost', port: 6379 },
      ],
      credentials: { username: 'ops', password: 'p@ss' },
    });
  });

  it('a partition count that is not an integer from 1 to 1024 or auto', () => {
    for (const partitions of [0, 1.5, 1025, '2', null]) {
      expect(() => new Queue('ok', { partitions: partitions as never })).toThrow(
        /partitions must be an integer from 1 to 1024 or 'auto'/,
      );
    }
    expect(() => new Queue('ok', { durability: { waitReplicas: 0 } })).toThrow(/durability.waitReplicas/);
    expect(() => new Queue('ok', { durability: { waitReplicas: 1, timeoutMs: 0 } })).toThrow(
      /durability.timeoutMs/,
    );
  });
});

describe('durations that reach a timer fit setTimeout (2^31-1 ms); longer computed waits are clamped', () => {
  const TOO_LONG = 3_000_000_000;

  it.each([
    ['pollIntervalMs', 10],
    ['recoverIntervalMs', 10],
    ['heartbeatMs', 10],
    ['closeTimeoutMs', 0],
  ])(
    'Worker %s above 2^31-1 is refused with the allowed range, and 2^31-1 itself is accepted',
    async (option, min) => {
      const name = uniqueName();
      expect(
        () => new Worker(name, () => {}, { connection: fx.url, autostart: false, [option]: TOO_LONG }),
      ).toThrow(`${option} must be an integer from ${min} to 2147483647, got 3000000000`);
      const w = new Worker(name, () => {}, { connection: fx.url, autostart: false, [option]: MAX_TIMER_MS });
      expect((w.options as unknown as Record<string, number>)[option]).toBe(MAX_TIMER_MS);
      await w.close();
    },
  );

  it('worker.close({ timeoutMs }) refuses a value setTimeout would turn into 1 ms, before closing anything', async () => {
    const w = new Worker(uniqueName(), () => {}, { connection: fx.url, autostart: false });
    for (const timeoutMs of [TOO_LONG, Number.NaN, -1, 1.5]) {
      await expect(w.close({ timeoutMs })).rejects.toMatchObject({ code: 'ERR_INVALID_OPTION' });
    }
    await w.close({ timeoutMs: MAX_TIMER_MS });
  });

  it('close() with closeTimeoutMs at its maximum waits for the running job instead of returning at once', async () => {
    const q = queue();
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let started = false;
    const w = new Worker(
      q.name,
      () => {
        started = true;
        return gate.then(() => 'done');
      },
      { connection: fx.url, closeTimeoutMs: MAX_TIMER_MS },
    );
    const { id } = await q.add({});
    // The processor running, not the record's state: an add handed off to the idle worker is active in
    // Redis before its message reaches the worker, and a close() then would hand it back unstarted.
    await waitUntil(() => started, 'the job to start');
    let closed = false;
    const closing = w.close().then(() => {
      closed = true;
    });
    await q.getJob(id); // a round trip: with a 1 ms timer close() would have returned by now
    expect(closed).toBe(false);
    expect((await q.getJob(id))!.state).toBe('active');
    release();
    await closing;
    expect((await q.getJob(id))!.state).toBe('completed');
  });

  it('queue.waitFor refuses a timeoutMs above 2^31-1 (it used to time out after 1 ms)', async () => {
    const q = queue();
    const { id } = await q.add({});
    await expect(q.waitFor(id, { timeoutMs: TOO_LONG })).rejects.toThrow(
      'timeoutMs must be an integer from 1 to 2147483647, got 3000000000',
    );
  });

  it('the dashboard refuses an eventsIntervalMs above 2^31-1', () => {
    expect(() => createDashboard({ eventsIntervalMs: TOO_LONG })).toThrow(
      'eventsIntervalMs must be an integer from 100 to 2147483647, got 3000000000',
    );
  });

  it('safeTimeout clamps what setTimeout cannot hold: longer waits to 2^31-1, NaN and negatives to 0', () => {
    expect([2 ** 31, 1e308, Number.POSITIVE_INFINITY].map(timerMs)).toEqual([
      MAX_TIMER_MS,
      MAX_TIMER_MS,
      MAX_TIMER_MS,
    ]);
    expect([Number.NaN, -5, -0, 0].map(timerMs)).toEqual([0, 0, 0, 0]);
    expect(timerMs(1234)).toBe(1234);
    const spy = vi.spyOn(globalThis, 'setTimeout');
    try {
      clearTimeout(safeTimeout(() => {}, 2 ** 40));
      expect(spy.mock.calls.at(-1)?.[1]).toBe(MAX_TIMER_MS);
    } finally {
      spy.mockRestore();
    }
  });

  it('a worker loop whose next delay exceeds 2^31-1 ms (a jittered recoverIntervalMs) waits 2^31-1 ms, not 1 ms', () => {
    const spy = vi.spyOn(globalThis, 'setTimeout');
    const runs: number[] = [];
    const loop = new Interval(
      async () => {
        runs.push(1);
      },
      () => 2 ** 31 + 5,
      () => {},
    );
    try {
      loop.start();
      expect(spy.mock.calls.map((c) => c[1])).toEqual([MAX_TIMER_MS]);
    } finally {
      loop.stop();
      spy.mockRestore();
    }
    expect(runs).toEqual([]);
  });

  it('a worker with every timer option at its maximum and a job due in a month sets no timer above 2^31-1 ms', async () => {
    const q = queue();
    await q.add({}, { delayMs: 30 * 24 * 3_600_000 });
    const spy = vi.spyOn(globalThis, 'setTimeout');
    const w = new Worker(q.name, () => {}, {
      connection: fx.url,
      autostart: false,
      pollIntervalMs: MAX_TIMER_MS,
      recoverIntervalMs: MAX_TIMER_MS,
      heartbeatMs: MAX_TIMER_MS,
      closeTimeoutMs: MAX_TIMER_MS,
    });
    try {
      await w.start();
      // The claim reply (nothing waiting, next due in 30 days) arms the fetcher's timers.
      await waitUntil(() => spy.mock.calls.some((c) => c[1] === MAX_TIMER_MS), 'a clamped timer');
      const delays = spy.mock.calls.map((c) => c[1] as number);
      expect(delays.every((d) => Number.isInteger(d) && d >= 0 && d <= MAX_TIMER_MS)).toBe(true);
    } finally {
      spy.mockRestore();
      await w.close();
    }
  });

  it('a custom backoff that returns a huge delay schedules the retry at most 10 years ahead', async () => {
    const q = queue();
    const w = new Worker(
      q.name,
      () => {
        throw new Error('boom');
      },
      { connection: fx.url, backoffStrategies: { huge: () => 1e308 } },
    );
    try {
      const failed = nextEvent<[unknown, unknown, string]>(w, 'failed');
      const { id } = await q.add({}, { maxAttempts: 2, backoff: { type: 'custom', name: 'huge' } });
      expect((await failed)[2]).toBe('delayed');
      const job = (await q.getJob(id))!;
      expect(job.state).toBe('delayed');
      expect(job.runAt).toBeLessThanOrEqual(Date.now() + MAX_DELAY_MS + 60_000);
      expect(job.runAt).toBeGreaterThan(Date.now() + MAX_DELAY_MS - 60_000);
    } finally {
      await w.close();
    }
  });
});

describe('no two (prefix, queue, partition) share a hash tag', () => {
  it('an all-digit queue name under a prefix with a colon is refused: it would be a partition of another queue', async () => {
    const base = uniqueName('p');
    const orders = new Queue('orders', { connection: fx.url, prefix: base, partitions: 2 });
    queues.push(orders);
    expect(orders.keys.tag).toBe(`{${base}:orders:0}`);
    const code = { code: 'ERR_INVALID_QUEUE_NAME' };
    const colliding = { connection: fx.url, prefix: `${base}:orders` };
    expect(() => new Queue('0', colliding)).toThrow(expect.objectContaining(code));
    expect(() => new Queue('1', { ...colliding, partitions: 'auto' })).toThrow(expect.objectContaining(code));
    expect(() => new Worker('0', () => {}, { ...colliding, autostart: false })).toThrow(
      expect.objectContaining(code),
    );
    expect(() => new QueueEvents('0', colliding)).toThrow(expect.objectContaining(code));
    expect(() => queueKeys(`${base}:orders`, '0')).toThrow(
      `queue name "0" is all digits and prefix "${base}:orders" contains ':'`,
    );
    await orders.add({ n: 1 });
    expect(await orders.counts()).toMatchObject({ waiting: 1 });
  });

  it('all-digit names without a colon in the prefix, and colon prefixes with other names, stay allowed', async () => {
    for (const [name, prefix] of [
      ['0', undefined],
      ['2024', 'app'],
      ['orders', 'app:eu'],
      ['v2', 'a:b:c'],
    ] as const) {
      const q = new Queue(name, { connection: fx.url, ...(prefix ? { prefix } : {}) });
      queues.push(q);
      expect(q.keys.tag).toBe(`{${prefix ?? 'surety'}:${name}}`);
    }
  });
});

describe('strings that UTF-8 cannot hold unchanged never name a key or a field', () => {
  it.each(['a\uD800', 'a\uDC00', '\uDC00\uD83D', 'x\uD83Dy', '\uDBFF'])(
    'a job id with an unpaired surrogate (%j) is refused and nothing is written',
    async (id) => {
      const q = queue();
      await expect(q.add({}, { id })).rejects.toMatchObject({ code: 'ERR_INVALID_JOB_ID' });
      await expect(q.addBulk([{ data: {}, opts: { id } }])).rejects.toMatchObject({
        code: 'ERR_INVALID_JOB_ID',
      });
      await expect(q.add({}, { dependsOn: [id] })).rejects.toMatchObject({ code: 'ERR_INVALID_JOB_ID' });
      await expect(q.getJob(id)).rejects.toMatchObject({ code: 'ERR_INVALID_JOB_ID' });
      await nothingWritten(q);
    },
  );

  it("'a\\uD800' and 'a\\uDC00' no longer both become 'a\\uFFFD'; paired surrogates are kept as they are", async () => {
    const q = queue();
    await expect(q.add({ n: 1 }, { id: 'a\uD800' })).rejects.toBeInstanceOf(ValidationError);
    await expect(q.add({ n: 2 }, { id: 'a\uDC00' })).rejects.toBeInstanceOf(ValidationError);
    expect(await q.add({ n: 3 }, { id: 'a\uFFFD' })).toMatchObject({ id: 'a\uFFFD', isNew: true });
    expect(await q.add({ n: 4 }, { id: 'a\u{1F600}' })).toMatchObject({ id: 'a\u{1F600}', isNew: true });
    expect((await q.getJob('a\uFFFD'))!.data).toEqual({ n: 3 });
    expect((await q.getJob('a\u{1F600}'))!.data).toEqual({ n: 4 });
  });

  it('data, results and progress holding unpaired surrogates round-trip exactly (JSON escapes them)', async () => {
    const q = queue();
    const odd = { 'k\uD800': 'a\uD800', s: '\uDC00b', both: 'x\uDBFF\uDFFFy\uDFFF', arr: ['\uD83D'] };
    const { id } = await q.add(odd);
    expect((await q.getJob(id))!.data).toEqual(odd);
    const w = new Worker(
      q.name,
      async (job) => {
        await job.progress({ p: '\uDC00' });
        return { echo: job.data, r: 'r\uD800' };
      },
      { connection: fx.url },
    );
    try {
      await q.waitFor(id, { timeoutMs: 10_000 });
      const job = (await q.getJob(id))!;
      expect(job.result).toEqual({ echo: odd, r: 'r\uD800' });
      expect(job.progress).toEqual({ p: '\uDC00' });
    } finally {
      await w.close();
    }
  });
});

describe('defects the boundary property test found', () => {
  it('a message about an invalid Date is a ValidationError, not a RangeError from toISOString', async () => {
    expect(
      () => new Worker(uniqueName(), () => {}, { connection: fx.url, strict: new Date(Number.NaN) as never }),
    ).toThrow('Worker options.strict must be true or false, got Date(invalid)');
    const q = queue();
    await expect(q.getJob(new Date(Number.NaN) as never)).rejects.toBeInstanceOf(ValidationError);
  });

  it('a logger without a warn method is refused at construction, not when the first warning comes', () => {
    for (const logger of [5, {}, null, 'console']) {
      expect(() => new Queue('ok', { connection: fx.url, logger: logger as never })).toThrow(
        /Queue options.logger must be an object with a warn\(message\) method/,
      );
      expect(
        () => new Worker('ok', () => {}, { connection: fx.url, autostart: false, logger: logger as never }),
      ).toThrow(ValidationError);
    }
  });

  it('runAt stops at 99 999 999 999 999 (year 5138): later times were stored rounded to 14 digits', async () => {
    const q = queue();
    await expect(q.add({}, { runAt: 100_590_780_964_621 })).rejects.toThrow(
      'runAt must be an integer from 0 to 99999999999999, got 100590780964621',
    );
    await expect(q.add({}, { runAt: 8_640_000_000_000_000 })).rejects.toBeInstanceOf(ValidationError);
    await nothingWritten(q);
    const { id } = await q.add({}, { runAt: 99_999_999_999_999 });
    expect((await q.getJob(id))!.runAt).toBe(99_999_999_999_999);
    const { id: id2 } = await q.add({}, { runAt: 99_999_999_999_997 });
    expect((await q.getJob(id2))!.runAt).toBe(99_999_999_999_997);
  });

  it('a schedule timing with both cron and everyMs is refused as "not both", not as an unknown option', async () => {
    const q = queue();
    const both = q.schedule('tick', { cron: '* * * * *', everyMs: 60_000 } as never, { data: {} });
    await expect(both).rejects.toBeInstanceOf(ValidationError);
    await expect(
      q.schedule('tick', { cron: '* * * * *', everyMs: 60_000 } as never, { data: {} }),
    ).rejects.toThrow(/either \{ cron, tz\? \} or \{ everyMs \}, not both/);
    await nothingWritten(q);
  });

  it('schedule occurrence options an occurrence cannot honour (id, dependsOn, delayMs...) are refused, not ignored', async () => {
    const q = queue();
    for (const opts of [{ id: 'x' }, { dependsOn: ['a'] }, { delayMs: 5 }, { partitionKey: 'k' }]) {
      await expect(
        q.schedule('every', { everyMs: 60_000 }, { data: {}, opts: opts as never }),
      ).rejects.toThrow(/schedule opts has an unknown option/);
    }
    await nothingWritten(q);
    await q.schedule('every', { everyMs: 60_000 }, { data: {}, opts: { priority: 3, maxAttempts: 2 } });
    expect((await q.schedules())[0]!.opts).toEqual({ priority: 3, maxAttempts: 2 });
  });
});

describe('method options objects are checked like constructor options', () => {
  it('a null or misspelt options object is refused with a typed error, not a TypeError or ignored', async () => {
    const q = queue();
    const { id } = await q.add({});
    const code = { code: 'ERR_INVALID_OPTION' };
    await expect(q.getJobs('waiting', null as never)).rejects.toMatchObject(code);
    await expect(q.getJobs('waiting', { limt: 5 } as never)).rejects.toThrow(/unknown option "limt"/);
    await expect(q.waitFor(id, { timeout: 5 } as never)).rejects.toThrow(/unknown option "timeout"/);
    await expect(q.clean('completed', null as never)).rejects.toMatchObject(code);
    await expect(q.clean(10n as never)).rejects.toThrow(
      "clean takes the state 'completed' or 'dead', got 10n",
    );
    await expect(q.metrics(null as never)).rejects.toMatchObject(code);
    await expect(q.recoverExpired({ deadRetention: { maxCount: Number.NaN } } as never)).rejects.toThrow(
      'deadRetention.maxCount must be an integer >= 0, got NaN',
    );
    const w = new Worker(q.name, () => {}, { connection: fx.url, autostart: false });
    await expect(w.close(null as never)).rejects.toMatchObject(code);
    await w.close();
  });

  it('an addBulk item that is not a { data, opts } object is refused and nothing is written', async () => {
    const q = queue();
    await expect(q.addBulk([{ data: 1 }, null] as never)).rejects.toThrow(
      'item 1 must be an object, got null',
    );
    await expect(q.addBulk([{ data: 1, opt: { id: 'x' } }] as never)).rejects.toThrow(
      /item 0 has an unknown option "opt"/,
    );
    await nothingWritten(q);
  });
});

describe('event readers', () => {
  it("a `from` that is not '$', '0' or a stream id is refused before XREAD sees it", async () => {
    for (const from of ['garbage', 5, '', '1-2-3', null]) {
      expect(() => new QueueEvents(uniqueName(), { connection: fx.url, from: from as never })).toThrow(
        /from must be '\$', '0' or a stream id/,
      );
      const q = queue();
      await expect(q.events({ from: from as never }).next()).rejects.toMatchObject({
        code: 'ERR_INVALID_OPTION',
      });
    }
    expect(() => new QueueEvents(uniqueName(), { connection: fx.url, form: '0' } as never)).toThrow(
      /unknown option "form"/,
    );
  });
});

describe('repartition checks every option before its first write', () => {
  it('a missing count, a null options object or an onProgress that is not a function is refused; nothing moves', async () => {
    const q = queue();
    await q.add({ n: 1 });
    const before = await fx.redis.keys(`${q.keys.tag}*`);
    for (const opts of [{}, null, { to: 2, onProgress: 5 }, { to: 2, onProgres: () => {} }]) {
      await expect(repartition(fx.redis, q.name, opts as never)).rejects.toMatchObject({
        code: 'ERR_INVALID_OPTION',
      });
    }
    expect((await fx.redis.keys(`${q.keys.tag}*`)).sort()).toEqual(before.sort());
    expect(await fx.redis.hgetall(q.keys.meta)).toEqual({});
    expect(await q.counts()).toMatchObject({ waiting: 1 });
  });
});
