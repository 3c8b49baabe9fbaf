import { afterAll, describe, expect, it } from 'vitest';
import { parseClusterUrl } from '../src/connection.js';
import {
  NotSerializableError,
  PayloadTooLargeError,
  Queue,
  SuretyError,
  ValidationError,
  Worker,
} from '../src/index.js';
import { uniqueName, useRedis } from './helpers/setup.js';

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
