/**
 * Property test: any value a processor returns or throws behaves the same inline, in a thread
 * sandbox and in a process sandbox (issue 33). One module (test/fixtures/sandbox/values.mjs) builds
 * each value from a JSON recipe (job data cannot carry a Map, a function or an Error) and returns or
 * throws it; it runs as a function processor and in both sandboxes, and every job must end the same
 * way in the three: state, stored result, attempts, snoozes and error lines (name, message, code).
 * Stacks differ by nature and are not compared.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Job, Queue, Worker } from '../../src/index.js';
import valuesProcessor from '../fixtures/sandbox/values.mjs';
import { uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const VALUES = new URL('../fixtures/sandbox/values.mjs', import.meta.url);
const MODES = ['inline', 'thread', 'process'] as const;
type Mode = (typeof MODES)[number];

// ---- recipes (see values.mjs) -------------------------------------------------------------------

const key = fc.constantFrom('a', 'b', 'n', 'x');
const jsonLeaf = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.string({ maxLength: 8 }),
);
const { value } = fc.letrec<{ value: object }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    jsonLeaf.map((json) => ({ json })),
    fc.constantFrom({ undef: true }, { nan: true }, { inf: 1 }, { inf: -1 }, { fn: true }),
    fc.bigInt({ min: -100n, max: 100n }).map((b) => ({ bigint: String(b) })),
    fc.string({ maxLength: 4 }).map((symbol) => ({ symbol })),
    fc.integer({ min: 0, max: 2e12 }).map((date) => ({ date })),
    fc.array(fc.tuple(key, tie('value')), { maxLength: 2 }).map((map) => ({ map })),
    fc.array(tie('value'), { maxLength: 3 }).map((arr) => ({ arr })),
    fc.dictionary(key, tie('value'), { maxKeys: 3 }).map((obj) => ({ obj })),
    fc.dictionary(key, tie('value'), { maxKeys: 2 }).map((nullProto) => ({ nullProto })),
    fc.dictionary(key, tie('value'), { maxKeys: 2 }).map((instance) => ({ instance })),
  ),
}));
/** Errors, the library's pauses among them; delays stay tiny (a pause would hold the queue). */
const error = fc
  .record(
    {
      cls: fc.constantFrom(
        'Error',
        'TypeError',
        'RangeError',
        'LookalikeRateLimitError',
        'UnrecoverableError',
        'ValidationError',
        'SnoozeError',
        'RateLimitError',
      ),
      message: fc.string({ maxLength: 10 }),
      delayMs: fc.integer({ min: 0, max: 3 }),
      code: fc.string({ maxLength: 5 }),
      fields: fc.record(
        {
          detail: jsonLeaf,
          delayMs: fc.constantFrom(0, 2, -1, 1.5, 'x', null),
          libraryClass: fc.constantFrom('RateLimitError', 'SnoozeError'),
        },
        { requiredKeys: [] },
      ),
    },
    { requiredKeys: ['cls', 'message', 'delayMs'] },
  )
  .map((e) => ({ error: e }));
const outcome = fc.oneof(
  value.map((returns) => ({ returns })),
  fc.oneof(error, value).map((throws) => ({ throws })),
);

// ---- the three lanes ----------------------------------------------------------------------------

const lanes = new Map<Mode, { q: Queue; w: Worker }>();
beforeAll(() => {
  for (const mode of MODES) {
    const name = uniqueName(mode);
    const q = new Queue(name, { connection: fx.url });
    const processor = mode === 'inline' ? (valuesProcessor as (job: Job) => unknown) : VALUES;
    const w = new Worker(name, processor as URL, {
      connection: fx.url,
      maxSnoozes: 2,
      ...(mode === 'inline' ? {} : { sandbox: mode }),
    });
    w.on('error', () => {}); // reported background errors do not decide outcomes here
    lanes.set(mode, { q, w });
  }
});
afterAll(async () => {
  await Promise.all([...lanes.values()].flatMap(({ q, w }) => [w.close(), q.close()]));
});

/** Runs `recipes` as jobs in one lane; each job's ending as compared across lanes. */
async function run(mode: Mode, recipes: object[]): Promise<unknown[]> {
  const { q } = lanes.get(mode)!;
  const jobs = await q.addBulk(
    recipes.map((data) => ({ data, opts: { maxAttempts: 2, backoff: { type: 'fixed', delayMs: 0 } } })),
  );
  await Promise.allSettled(jobs.map((j) => q.waitFor(j.id, { timeoutMs: 20_000 })));
  const out = [];
  for (const j of jobs) {
    const info = (await q.getJob(j.id))!;
    out.push({
      state: info.state,
      result: info.result,
      attempts: info.attempts,
      snoozes: info.snoozes,
      errors: info.errors.map((e) => ({
        attempt: e.attempt,
        name: e.name,
        message: e.message,
        code: e.code,
      })),
    });
  }
  return out;
}

describe('a processor behaves the same inline, in a thread and in a process', () => {
  it('whatever it returns or throws: same state, result, attempts, snoozes and error lines', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(outcome, { minLength: 1, maxLength: 4 }), async (recipes) => {
        const [inline, thread, processed] = await Promise.all(MODES.map((m) => run(m, recipes)));
        for (const o of inline as { state: string }[]) expect(['completed', 'dead']).toContain(o.state);
        expect(thread).toEqual(inline);
        expect(processed).toEqual(inline);
      }),
      {
        numRuns: 50,
        examples: [
          [
            [
              { returns: { map: [['a', { json: 1 }]] } },
              { returns: { date: 0 } },
              { returns: { nan: true } },
            ],
          ],
          [
            [
              { returns: { fn: true } },
              { throws: { error: { cls: 'LookalikeRateLimitError', message: '429', delayMs: 0 } } },
            ],
          ],
          [
            [
              { throws: { error: { cls: 'RateLimitError', message: '', delayMs: 0 } } },
              { throws: { undef: true } },
            ],
          ],
          [
            [
              { throws: { obj: { a: { json: 1 } } } },
              { returns: { undef: true } },
              { returns: { json: -0 } },
            ],
          ],
        ],
      },
    );
  }, 120_000);
});
