/**
 * Property test of the public boundary: random option objects, ids, names, prefixes and data (extreme
 * numbers, wrong types, unicode edge cases) given to Queue, Worker, add, addBulk, schedule, waitFor
 * and close either are refused with a typed SuretyError (a stable `code`) and nothing is written to
 * Redis, or behave as documented: the job reads back with the same id, data and options.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import {
  DurabilityError,
  type JobOptions,
  Queue,
  queueKeys,
  SuretyError,
  ValidationError,
  Worker,
} from '../../src/index.js';
import { MAX_TIMER_MS } from '../../src/timers.js';
import { checkJobId, checkPrefix, checkQueueName } from '../../src/validate.js';
import { uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const open: { close(): Promise<void> }[] = [];
afterAll(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});

// ---- arbitraries --------------------------------------------------------------------------------

const EXTREME_NUMBERS = [
  -0,
  0,
  1,
  -1,
  0.5,
  1.5,
  10,
  100,
  1_000,
  30_000,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  Number.NEGATIVE_INFINITY,
  2 ** 31 - 1,
  2 ** 31,
  2 ** 32,
  2 ** 53 - 1,
  2 ** 53,
  2 ** 53 + 2,
  1e308,
  -(2 ** 31),
  Number.MIN_VALUE,
  8_640_000_000_000_000,
];
const extremeNumber = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...EXTREME_NUMBERS) },
  { weight: 1, arbitrary: fc.integer() },
  { weight: 1, arbitrary: fc.double() },
);
/** Anything a JavaScript caller (or a JSON config file) could pass where a value is expected. */
const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: extremeNumber },
  {
    weight: 2,
    arbitrary: fc.constantFrom<unknown>(
      undefined,
      null,
      true,
      false,
      '',
      '5',
      'auto',
      {},
      [],
      [1],
      { x: 1 },
      10n,
      () => 1,
      new Date(0),
      new Date(Number.NaN),
    ),
  },
);

const STRING_PIECES = [
  'a',
  'Z',
  '0',
  '7',
  '-',
  '_',
  '.',
  ':',
  '|',
  '{',
  '}',
  '*',
  ' ',
  '@',
  '\n',
  '\u0000',
  '\u007f',
  '\u2028',
  'é',
  '\u{1F600}',
  '\uD800',
  '\uDC00',
  '\uDBFF',
  '\uFFFD',
  'schedule:',
];
/** Strings made of the characters that matter at a boundary: separators, braces, surrogates, controls. */
const edgyString = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.array(fc.constantFrom(...STRING_PIECES), { maxLength: 6 }).map((a) => a.join('')),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 8 }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom('', 'x'.repeat(50), 'x'.repeat(51), 'x'.repeat(100), 'x'.repeat(101)),
  },
  { weight: 1, arbitrary: fc.constantFrom('x'.repeat(256), 'x'.repeat(257), '\u{1F600}'.repeat(128)) },
);

/** Usually a number or nothing, sometimes anything. */
const optionValue = (typical: fc.Arbitrary<unknown>) =>
  fc.oneof(
    { weight: 8, arbitrary: typical },
    { weight: 1, arbitrary: extremeNumber },
    { weight: 1, arbitrary: anyValue },
  );
/** Usually `valid`, sometimes anything at all. */
const mostly = (valid: fc.Arbitrary<unknown>) =>
  fc.oneof({ weight: 8, arbitrary: valid }, { weight: 1, arbitrary: anyValue });

const backoffArb = mostly(
  fc.record(
    {
      type: mostly(fc.constantFrom('fixed', 'exponential', 'custom')),
      delayMs: optionValue(fc.constantFrom(0, 10, 1_000, 10 * 365 * 24 * 3_600_000)),
      maxDelayMs: optionValue(fc.constantFrom(0, 60_000)),
      jitter: mostly(fc.boolean()),
      name: mostly(fc.oneof(fc.constantFrom('slow', 'a-b_c'), edgyString)),
    },
    { requiredKeys: ['type'] },
  ),
);

const jobFieldsArb = {
  priority: optionValue(fc.integer({ min: -1_000_000, max: 1_000_000 })),
  maxAttempts: optionValue(fc.integer({ min: 1, max: 1_000 })),
  leaseMs: optionValue(fc.integer({ min: 100, max: 24 * 3_600_000 })),
  backoff: backoffArb,
  timeoutMs: optionValue(fc.integer({ min: 1, max: 24 * 3_600_000 })),
};

const jobOptionsCore: fc.Arbitrary<Record<string, unknown>> = fc.record(
  {
    ...jobFieldsArb,
    id: mostly(edgyString),
    delayMs: optionValue(fc.integer({ min: 0, max: 10 * 365 * 24 * 3_600_000 })),
    runAt: optionValue(
      fc.oneof(
        fc.integer({ min: 0, max: 4 * 10 ** 12 }),
        fc.date(),
        fc.constantFrom(99_999_999_999_999, 100_000_000_000_000, 8_640_000_000_000_000),
      ),
    ),
    dependsOn: mostly(fc.constantFrom([], ['no-such-parent'], ['a\uD800'], 'x')),
    ignoreDependencyFailure: mostly(fc.boolean()),
    partitionKey: mostly(edgyString),
  },
  { requiredKeys: [] },
);
/** Job options, now and then with a misspelt key. */
const jobOptionsArb: fc.Arbitrary<Record<string, unknown>> = fc.oneof(
  { weight: 9, arbitrary: jobOptionsCore },
  { weight: 1, arbitrary: jobOptionsCore.map((o) => ({ ...o, delay: 5 })) },
);

const dataArb: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue() },
  { weight: 2, arbitrary: fc.dictionary(edgyString, edgyString, { maxKeys: 3 }) },
  { weight: 1, arbitrary: anyValue },
);

/**
 * Counts both outcomes of a property, so a run that only ever refuses (or accepts) fails. The floors
 * sit far below what the generators give (add accepts about 16 % of its runs: 22 to 41 of 200 over
 * four runs), so chance alone does not trip them (a floor of 10 % did, at 20 of 200, about once in a
 * hundred runs); a generator that drifts to (nearly) one side still does.
 */
class Tally {
  accepted = 0;
  refused = 0;
  expectBoth(runs: number): void {
    expect(this.accepted, 'accepted runs').toBeGreaterThan(runs * 0.03);
    expect(this.refused, 'refused runs').toBeGreaterThan(runs * 0.03);
  }
}

// ---- helpers ------------------------------------------------------------------------------------

/** The refusal the boundary promises: a SuretyError with a stable ERR_ code. */
function expectTypedRefusal(err: unknown): void {
  if (!(err instanceof SuretyError) || !/^ERR_[A-Z_]+$/.test(err.code)) {
    throw new Error(`expected a SuretyError with a code, got ${String(err)} (${(err as Error)?.stack})`);
  }
}

/**
 * A digest of every key in the server with its type and full content (streams: length and last id),
 * computed inside Redis: equal before and after a call means the call wrote nothing.
 */
const DIGEST = `
local keys = redis.call('KEYS', '*')
table.sort(keys)
local out = {}
for _, k in ipairs(keys) do
  local t = redis.call('TYPE', k).ok
  local v
  if t == 'string' then v = { redis.call('GET', k) }
  elseif t == 'hash' then
    local flat = redis.call('HGETALL', k)
    v = {}
    for i = 1, #flat, 2 do v[#v + 1] = flat[i] .. '\\0' .. flat[i + 1] end
    table.sort(v)
  elseif t == 'list' then v = redis.call('LRANGE', k, 0, -1)
  elseif t == 'zset' then v = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
  elseif t == 'set' then v = redis.call('SMEMBERS', k); table.sort(v)
  elseif t == 'stream' then
    local last = redis.call('XREVRANGE', k, '+', '-', 'COUNT', 1)[1]
    v = { tostring(redis.call('XLEN', k)), last and last[1] or '' }
  else v = {} end
  out[#out + 1] = k .. '\\1' .. t .. '\\1' .. redis.sha1hex(table.concat(v, '\\2'))
end
return { #keys, redis.sha1hex(table.concat(out, '\\3')) }
`;

async function snapshot(): Promise<string> {
  return JSON.stringify(await fx.redis.eval(DIGEST, 0));
}

function settle<T>(p: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; err: unknown }> {
  return p().then(
    (value) => ({ ok: true as const, value }),
    (err: unknown) => ({ ok: false as const, err }),
  );
}

function sync<T>(fn: () => T): { ok: true; value: T } | { ok: false; err: unknown } {
  try {
    return { ok: true, value: fn() };
  } catch (err) {
    return { ok: false, err };
  }
}

/** A queue opened on the test server (its layout checked, so later calls write only what they add). */
async function freshQueue(opts: Record<string, unknown> = {}): Promise<Queue> {
  const q = new Queue(uniqueName('b'), { connection: fx.url, ...opts });
  open.push(q);
  await q.counts();
  return q;
}

/** What add() documents for an accepted job, checked against what getJob returns. */
async function expectStoredAsAdded(
  q: Queue,
  id: string,
  data: unknown,
  o: Record<string, unknown> | undefined,
  before: number,
): Promise<void> {
  const job = await q.getJob(id);
  expect(job, `job ${JSON.stringify(id)} reads back`).not.toBeNull();
  expect(job!.id).toBe(id);
  expect(job!.data).toEqual(JSON.parse(JSON.stringify(data)));
  const opt = (k: string) => (o && o[k] !== undefined ? o[k] : undefined);
  const defaults = q.options.defaults;
  expect(job!.priority === ((opt('priority') as number | undefined) ?? defaults.priority)).toBe(true);
  expect(job!.maxAttempts).toBe(opt('maxAttempts') ?? defaults.maxAttempts);
  expect(job!.leaseMs).toBe(opt('leaseMs') ?? defaults.leaseMs);
  expect(job!.timeoutMs).toBe(opt('timeoutMs') ?? defaults.timeoutMs);
  const runAtOpt = opt('runAt');
  const runAt = runAtOpt instanceof Date ? runAtOpt.getTime() : (runAtOpt as number | undefined);
  const delayMs = opt('delayMs') as number | undefined;
  if (runAt !== undefined && runAt > Date.now() + 5_000) {
    expect(job!.state).toBe('delayed');
    expect(job!.runAt).toBe(runAt);
  } else if (delayMs !== undefined && delayMs > 5_000) {
    expect(job!.state).toBe('delayed');
    expect(job!.runAt).toBe(job!.createdAt + delayMs);
  } else if ((runAt === undefined || runAt < before) && !delayMs) {
    expect(job!.state).toBe('waiting');
  }
}

// ---- properties ---------------------------------------------------------------------------------

describe('the public boundary refuses with a typed error and writes nothing, or behaves as documented', () => {
  it('(prefix, queue, partition) -> hash tag is one-to-one over every accepted triple', () => {
    const part = fc.array(fc.constantFrom('a', 'b', '0', '1', ':', '.'), { minLength: 1, maxLength: 5 });
    const triple = fc.record({
      prefix: part.map((a) => a.join('')),
      name: part.map((a) => a.join('')),
      partition: fc.option(fc.nat({ max: 11 }), { nil: undefined }),
    });
    const tagOf = (t: { prefix: string; name: string; partition: number | undefined }) => {
      const r = sync(() => {
        checkPrefix(t.prefix);
        checkQueueName(t.name);
        return queueKeys(t.prefix, t.name, t.partition).tag;
      });
      if (!r.ok) expectTypedRefusal(r.err);
      return r.ok ? r.value : null;
    };
    fc.assert(
      fc.property(triple, triple, (a, b) => {
        const ta = tagOf(a);
        const tb = tagOf(b);
        if (ta === null || tb === null) return;
        const same = a.prefix === b.prefix && a.name === b.name && a.partition === b.partition;
        expect(ta === tb).toBe(same);
      }),
      { numRuns: 5_000 },
    );
    // The collision that motivated the rule, found by name.
    expect(queueKeys('surety', 'orders', 0).tag).toBe('{surety:orders:0}');
    expect(() => queueKeys('surety:orders', '0')).toThrow(ValidationError);
  });

  it('an accepted job id survives UTF-8 (what Redis stores) unchanged, so two accepted ids never meet', () => {
    fc.assert(
      fc.property(fc.oneof(edgyString, fc.string({ unit: 'binary', maxLength: 20 })), (id) => {
        const r = sync(() => checkJobId(id));
        if (!r.ok) return expectTypedRefusal(r.err);
        expect(Buffer.from(id, 'utf8').toString('utf8')).toBe(id);
      }),
      { numRuns: 2_000 },
    );
  });

  it('Queue options', async () => {
    const validJobFields = fc.record(
      {
        priority: fc.integer({ min: -1_000_000, max: 1_000_000 }),
        maxAttempts: fc.constantFrom(1, 3, 1_000),
        leaseMs: fc.constantFrom(100, 30_000, 24 * 3_600_000),
        backoff: fc.constantFrom<unknown>(
          { type: 'fixed', delayMs: 0 },
          { type: 'exponential', delayMs: 1_000, maxDelayMs: 10 * 365 * 24 * 3_600_000, jitter: true },
          { type: 'custom', name: 'slow' },
        ),
        timeoutMs: fc.constantFrom(1, 24 * 3_600_000),
      },
      { requiredKeys: [] },
    );
    const validQueueOptions = fc.record(
      {
        prefix: fc.constantFrom('surety', 'app:eu', 'a.b-c_d', 'x'.repeat(50)),
        strict: fc.boolean(),
        logger: fc.constantFrom<unknown>(console, { warn() {} }),
        events: fc.oneof(fc.boolean(), fc.record({ maxLen: fc.constantFrom(1, 10_000_000) })),
        defaults: validJobFields,
        maxPayloadBytes: fc.constantFrom(64, 512 * 1024 * 1024),
        partitions: fc.constantFrom<unknown>(1, 2, 'auto', 1024),
        durability: fc.constant({ waitReplicas: 1, timeoutMs: 1 }),
      },
      { requiredKeys: [] },
    );
    const corruption = fc.record({
      key: fc.constantFrom(
        'prefix',
        'strict',
        'logger',
        'events',
        'defaults',
        'maxPayloadBytes',
        'partitions',
        'durability',
        'bogus',
      ),
      value: fc.oneof(anyValue, edgyString, fc.record(jobFieldsArb, { requiredKeys: [] })),
    });
    const queueOptionsArb = fc
      .tuple(validQueueOptions, fc.option(corruption, { freq: 2, nil: undefined }))
      .map(([o, c]) => (c ? { ...o, [c.key]: c.value } : o));
    const nameArb = fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom('orders', '0', '2024', 'a.b_c-d', 'x'.repeat(100)) },
      { weight: 1, arbitrary: edgyString },
    );
    const tally = new Tally();
    await fc.assert(
      fc.asyncProperty(queueOptionsArb, nameArb, async (opts, name) => {
        // A name of its own per run (when valid), so earlier runs' partition counts do not interfere.
        const unique =
          /^[a-z]/.test(name) && name.length < 90 ? `${name}-${tally.accepted + tally.refused}` : name;
        const before = await snapshot();
        const made = sync(() => new Queue(unique, { connection: fx.url, ...(opts as object) }));
        if (!made.ok) {
          tally.refused++;
          expectTypedRefusal(made.err);
          expect(await snapshot()).toBe(before);
          return;
        }
        tally.accepted++;
        const q = made.value;
        try {
          expect(Object.isFrozen(q.options)).toBe(true);
          expect(typeof q.options.logger.warn).toBe('function');
          const opened = await settle(() => q.counts());
          if (!opened.ok) {
            // e.g. PartitionMismatchError: the queue '0' or '2024' of an earlier run has another count.
            expectTypedRefusal(opened.err);
            expect(await snapshot()).toBe(before);
            return;
          }
          const afterOpen = await snapshot();
          const data = { name, n: 1 };
          const added = await settle(() => q.add(data));
          if (!added.ok) {
            expectTypedRefusal(added.err);
            // Only a durability wait fails after the write (documented: the job is on the master);
            // any other refusal (maxPayloadBytes...) writes nothing.
            if (!(added.err instanceof DurabilityError)) expect(await snapshot()).toBe(afterOpen);
            return;
          }
          await expectStoredAsAdded(q, added.value.id, data, undefined, 0);
        } finally {
          await q.close();
        }
      }),
      { numRuns: 80 },
    );
    tally.expectBoth(80);
  });

  it('Worker options and close({ timeoutMs })', async () => {
    const validWorkerOptions = fc.record(
      {
        prefix: fc.constantFrom('surety', 'app:eu'),
        partitions: fc.constantFrom<unknown>(1, 2, 'auto'),
        concurrency: fc.constantFrom(1, 10_000),
        prefetch: fc.constantFrom<unknown>('auto', 0, 10_000),
        recoverIntervalMs: fc.constantFrom(10, MAX_TIMER_MS),
        heartbeatMs: fc.constantFrom(10, MAX_TIMER_MS),
        pollIntervalMs: fc.constantFrom(10, MAX_TIMER_MS),
        closeTimeoutMs: fc.constantFrom(0, MAX_TIMER_MS),
        maxPayloadBytes: fc.constantFrom(1, 1_000_000),
        retention: fc.record(
          {
            completed: fc.record({ maxCount: fc.nat(), maxAgeMs: fc.nat() }, { requiredKeys: [] }),
            dead: fc.record({ maxCount: fc.nat(), maxAgeMs: fc.nat() }, { requiredKeys: [] }),
          },
          { requiredKeys: [] },
        ),
        limiter: fc.record({
          max: fc.constantFrom(1, 1_000_000),
          durationMs: fc.constantFrom(1, 24 * 3_600_000),
        }),
        backoffStrategies: fc.constantFrom<unknown>({}, { slow: () => 1 }),
        logger: fc.constantFrom<unknown>(console, { warn() {} }),
        strict: fc.boolean(),
      },
      { requiredKeys: [] },
    );
    const corruption = fc.record({
      key: fc.constantFrom(
        'prefix',
        'partitions',
        'concurrency',
        'prefetch',
        'recoverIntervalMs',
        'heartbeatMs',
        'pollIntervalMs',
        'closeTimeoutMs',
        'maxPayloadBytes',
        'retention',
        'limiter',
        'backoffStrategies',
        'logger',
        'strict',
        'autostart',
        'bogus',
      ),
      value: fc.oneof(anyValue, edgyString),
    });
    const workerOptionsArb = fc
      .tuple(validWorkerOptions, fc.option(corruption, { freq: 2, nil: undefined }))
      .map(([o, c]) => (c ? { ...o, [c.key]: c.value } : o));
    const tally = new Tally();
    await fc.assert(
      fc.asyncProperty(workerOptionsArb, anyValue, async (opts, closeTimeout) => {
        const before = await snapshot();
        const made = sync(
          () =>
            new Worker(uniqueName('w'), () => {}, {
              connection: fx.url,
              autostart: false,
              ...(opts as object),
            }),
        );
        if (!made.ok) {
          tally.refused++;
          expectTypedRefusal(made.err);
          expect(await snapshot()).toBe(before);
          return;
        }
        tally.accepted++;
        const w = made.value;
        try {
          const o = w.options;
          for (const t of [o.recoverIntervalMs, o.heartbeatMs, o.pollIntervalMs, o.closeTimeoutMs]) {
            expect(Number.isInteger(t) && t >= 0 && t <= MAX_TIMER_MS).toBe(true);
          }
          expect(typeof o.logger.warn).toBe('function');
          const closed = await settle(() => w.close({ timeoutMs: closeTimeout as number }));
          if (!closed.ok) expectTypedRefusal(closed.err);
        } finally {
          await w.close();
        }
        // A worker that was not started (autostart: false) wrote nothing.
        if (!w.options.autostart) expect(await snapshot()).toBe(before);
      }),
      { numRuns: 120 },
    );
    tally.expectBoth(120);
  });

  it('add: random data, ids and options, in a queue of one partition or three', async () => {
    const queues = [await freshQueue(), await freshQueue({ partitions: 3 })];
    const tally = new Tally();
    await fc.assert(
      fc.asyncProperty(
        dataArb,
        fc.option(jobOptionsArb, { nil: undefined }),
        fc.nat({ max: 1 }),
        async (data, opts, which) => {
          const q = queues[which]!;
          const before = await snapshot();
          const t0 = Date.now();
          const added = await settle(() => q.add(data, opts as JobOptions));
          if (!added.ok) {
            tally.refused++;
            expectTypedRefusal(added.err);
            expect(await snapshot()).toBe(before);
            return;
          }
          tally.accepted++;
          const { id, isNew } = added.value;
          if (opts?.id !== undefined) expect(id).toBe(opts.id);
          if (isNew) await expectStoredAsAdded(q, id, data, opts, t0);
          else expect(await q.getJob(id)).not.toBeNull();
        },
      ),
      { numRuns: 200 },
    );
    tally.expectBoth(200);
  });

  it('addBulk: mixed explicit and generated ids, repeats, one bad item, one partition or three', async () => {
    const queues = [await freshQueue(), await freshQueue({ partitions: 3 })];
    const goodItem = fc.record({
      data: dataArb,
      opts: fc.oneof(
        fc.constant(undefined),
        fc.record({ id: fc.constantFrom('1', '2', '3', 'a', 'a\uD800', '') }, { requiredKeys: [] }),
        jobOptionsArb,
      ),
    });
    // Now and then an item that is not a { data, opts } object at all.
    const itemArb = fc.oneof(
      { weight: 20, arbitrary: goodItem },
      { weight: 1, arbitrary: fc.oneof(anyValue, fc.record({ data: dataArb, opt: jobOptionsArb })) },
    );
    const tally = new Tally();
    await fc.assert(
      fc.asyncProperty(fc.array(itemArb, { maxLength: 6 }), fc.nat({ max: 1 }), async (arbItems, which) => {
        const items = arbItems as { data: unknown; opts?: Record<string, unknown> }[];
        const q = queues[which]!;
        const before = await snapshot();
        const t0 = Date.now();
        const added = await settle(() => q.addBulk(items as { data: unknown; opts?: JobOptions }[]));
        if (!added.ok) {
          tally.refused++;
          expectTypedRefusal(added.err);
          expect(await snapshot()).toBe(before);
          return;
        }
        tally.accepted++;
        expect(added.value).toHaveLength(items.length);
        const firstSeen = new Map<string, number>();
        added.value.forEach((a, i) => {
          const explicit = items[i]!.opts?.id;
          if (explicit !== undefined) expect(a.id).toBe(explicit);
          if (a.isNew) {
            // A new job's id is given to no other item of the call.
            expect(firstSeen.has(a.id)).toBe(false);
          }
          if (!firstSeen.has(a.id)) firstSeen.set(a.id, i);
        });
        for (const [i, a] of added.value.entries()) {
          if (a.isNew) await expectStoredAsAdded(q, a.id, items[i]!.data, items[i]!.opts, t0);
        }
      }),
      { numRuns: 100 },
    );
    tally.expectBoth(100);
  });

  it('schedule: random keys, timings and options', async () => {
    const q = await freshQueue();
    const valid = fc.record({
      key: fc.constantFrom('daily', 'a.b-c_d', 'x'.repeat(100), '0'),
      timing: fc.oneof(
        fc.record({ everyMs: fc.constantFrom(100, 60_000, 366 * 24 * 3_600_000) }),
        fc.record(
          {
            cron: fc.constantFrom('* * * * *', '0 0 * * *', '0 9 * * 1-5'),
            tz: fc.constantFrom('UTC', 'Europe/Paris', 'Asia/Kathmandu'),
          },
          { requiredKeys: ['cron'] },
        ),
      ),
      options: fc.record(
        {
          data: fc.jsonValue(),
          opts: fc.record(
            {
              priority: fc.constantFrom(-1_000_000, 0, 1_000_000),
              maxAttempts: fc.constantFrom(1, 1_000),
              leaseMs: fc.constantFrom(100, 24 * 3_600_000),
              timeoutMs: fc.constantFrom(1, 24 * 3_600_000),
            },
            { requiredKeys: [] },
          ),
          catchUp: fc.constantFrom(0, 1_000),
        },
        { requiredKeys: ['data'] },
      ),
    });
    const bad = fc.oneof(anyValue, edgyString);
    const corruption = fc.oneof(
      fc.record({ key: bad }),
      fc.record({ timing: fc.oneof(bad, fc.record({ everyMs: bad }), fc.record({ cron: bad, tz: bad })) }),
      fc.record({ timing: fc.constant({ everyMs: 60_000, cron: '* * * * *' }) }),
      fc.record({ data: dataArb }),
      fc.record({ opts: fc.oneof(jobOptionsArb, bad) }),
      fc.record({ catchUp: bad }),
    );
    const caseArb = fc.tuple(valid, fc.option(corruption, { freq: 2, nil: undefined })).map(([v, c]) => {
      if (!c) return v;
      const options: Record<string, unknown> = { ...v.options };
      for (const f of ['data', 'opts', 'catchUp'] as const) if (f in c) options[f] = c[f as keyof typeof c];
      return {
        key: 'key' in c ? c.key : v.key,
        timing: 'timing' in c ? c.timing : v.timing,
        options,
      };
    });
    const tally = new Tally();
    await fc.assert(
      fc.asyncProperty(caseArb, async ({ key, timing, options }) => {
        const before = await snapshot();
        const done = await settle(() => q.schedule(key as string, timing as never, options as never));
        if (!done.ok) {
          tally.refused++;
          expectTypedRefusal(done.err);
          expect(await snapshot()).toBe(before);
          return;
        }
        tally.accepted++;
        const listed = (await q.schedules()).find((s) => s.key === key);
        expect(listed, `schedule ${JSON.stringify(key)} is listed`).toBeDefined();
        expect(listed!.data).toEqual(
          JSON.parse(JSON.stringify((options as { data?: unknown }).data ?? null)),
        );
        expect(await q.unschedule(key as string)).toBe(true);
      }),
      { numRuns: 100 },
    );
    tally.expectBoth(100);
  });

  it('waitFor, getJob, retry, remove and cancel with random ids and timeouts', async () => {
    const q = await freshQueue();
    await fc.assert(
      fc.asyncProperty(fc.oneof(edgyString, anyValue), anyValue, async (id, timeoutMs) => {
        const before = await snapshot();
        // Nothing exists in this queue: every call is refused (bad input, or no such job); getJob may
        // also answer null.
        const calls: (() => Promise<unknown>)[] = [
          () => q.waitFor(id as string, { timeoutMs: timeoutMs as number }),
          () => q.retry(id as string),
          () => q.remove(id as string),
          () => q.cancel(id as string),
          () => q.promote(id as string),
        ];
        for (const call of calls) {
          const r = await settle(call);
          expect(r.ok).toBe(false);
          if (!r.ok) expectTypedRefusal(r.err);
        }
        const got = await settle(() => q.getJob(id as string));
        if (!got.ok) expectTypedRefusal(got.err);
        else expect(got.value).toBeNull();
        expect(await snapshot()).toBe(before);
      }),
      { numRuns: 100 },
    );
  });
  it('listing, cleaning, metrics and the global concurrency cap with random arguments', async () => {
    const q = await freshQueue();
    await q.add({ n: 1 });
    const stateArb = fc.oneof(
      {
        weight: 3,
        arbitrary: fc.constantFrom('waiting', 'delayed', 'blocked', 'active', 'completed', 'dead'),
      },
      { weight: 1, arbitrary: fc.oneof(edgyString, anyValue) },
    );
    const pageArb = fc.oneof(
      fc.record(
        { offset: optionValue(fc.nat({ max: 10 })), limit: optionValue(fc.integer({ min: 1, max: 10_000 })) },
        { requiredKeys: [] },
      ),
      anyValue,
    );
    const tally = new Tally();
    await fc.assert(
      fc.asyncProperty(
        stateArb,
        pageArb,
        optionValue(fc.integer({ min: 1, max: 1_000_000 })),
        async (state, page, cap) => {
          const before = await snapshot();
          const listed = await settle(() => q.getJobs(state as never, page as never));
          if (listed.ok) {
            tally.accepted++;
            expect(Array.isArray(listed.value)).toBe(true);
            for (const job of listed.value) expect(job.state).toBe(state);
          } else {
            tally.refused++;
            expectTypedRefusal(listed.err);
          }
          const metrics = await settle(() => q.metrics(page as never));
          if (!metrics.ok) expectTypedRefusal(metrics.err);
          const cleaned = await settle(() => q.clean(state as never, page as never));
          if (!cleaned.ok) expectTypedRefusal(cleaned.err);
          else expect(cleaned.value.removed).toBe(0); // nothing has finished in this queue
          expect(await snapshot()).toBe(before);
          const capped = await settle(() => q.setGlobalConcurrency(cap as number));
          if (capped.ok) expect(await q.getGlobalConcurrency()).toBe(cap);
          else {
            expectTypedRefusal(capped.err);
            expect(await snapshot()).toBe(before);
          }
        },
      ),
      { numRuns: 100 },
    );
    tally.expectBoth(100);
  });
});
