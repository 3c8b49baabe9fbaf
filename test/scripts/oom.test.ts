/**
 * Redis at maxmemory with `noeviction` (the setting Surety asks for). Adds are refused with a typed
 * RedisFullError and write nothing; the transitions that move accepted work forward (claim, complete,
 * fail, extend, recover) are declared `allow-oom`, so workers drain the backlog, retention frees the
 * memory, and adds are accepted again.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { type Job, Queue, RedisFullError, type SuretyError, Worker } from '../../src/index.js';
import { scripts } from '../../src/scripts/specs.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const MAXMEMORY = 12 * 1024 * 1024;
const fx = useRedis({ config: { maxmemory: String(MAXMEMORY), 'maxmemory-policy': 'noeviction' } });
const open = closeAfterEach();

// Each test fills Redis: start the next one empty, under the original limit.
afterEach(async () => {
  await fx.redis.flushall();
  await fx.redis.config('SET', 'maxmemory', String(MAXMEMORY));
});

const FILLER = 'x'.repeat(16_000);

function queue(name: string): Queue<{ n: number; pad: string }> {
  const q = new Queue<{ n: number; pad: string }>(name, { connection: fx.url });
  open.push(q);
  return q;
}

async function usedMemory(): Promise<number> {
  const info = await fx.redis.info('memory');
  return Number(/^used_memory:(\d+)/m.exec(info)![1]);
}

/**
 * Adds jobs of 16 KB until Redis refuses one; returns the refusal and the ids accepted. Then lowers
 * maxmemory 1 MB under what is used, so Redis stays full while client buffers shrink.
 */
async function fill(q: Queue<{ n: number; pad: string }>): Promise<{ refusal: unknown; ids: string[] }> {
  const ids: string[] = [];
  for (let round = 0; round < 2_000; round++) {
    try {
      const batch = Array.from({ length: 10 }, (_, i) => ({
        data: { n: round * 10 + i, pad: FILLER },
        opts: { backoff: { type: 'fixed' as const, delayMs: 10 } },
      }));
      ids.push(...(await q.addBulk(batch)).map((a) => a.id));
    } catch (refusal) {
      await fx.redis.config('SET', 'maxmemory', String((await usedMemory()) - 1024 * 1024));
      return { refusal, ids };
    }
  }
  throw new Error('Redis never refused an add');
}

/** Everything a refused add could have written to the queue's keys. */
async function footprint(q: Queue<{ n: number; pad: string }>) {
  const k = q.keys;
  return {
    counts: await q.counts(),
    jobs: await fx.redis.hlen(k.jobs),
    annex: await fx.redis.hlen(k.annex),
    ids: await fx.redis.get(k.ids),
    seq: await fx.redis.get(k.seq),
    waiting: await fx.redis.llen(k.waiting),
    events: await fx.redis.xlen(k.events),
  };
}

/** Compares the error's class and code (not the error itself: an ioredis ReplyError holds the whole command). */
function expectFull(err: unknown): void {
  const e = err as { name?: unknown; code?: unknown; message?: unknown };
  expect({ name: e?.name, code: e?.code, message: String(e?.message).slice(0, 120) }).toMatchObject({
    name: 'RedisFullError',
    code: 'ERR_REDIS_OOM',
  });
  expect(err instanceof RedisFullError).toBe(true);
}

/**
 * Scripts refused over maxmemory before they run: those that add work, and the settings writes
 * (set-concurrency, set-rate-limit, set-group-limits), refused as plain HSETs would be. Every other
 * script is allow-oom.
 */
const ADDS_WORK = [
  'add',
  'add-one',
  'schedule',
  'advance-schedule',
  'retry',
  'move-in',
  'import-bullmq',
  'import-copy',
  'signal',
  'set-concurrency',
  'set-rate-limit',
  'set-group-limits',
];

describe('Redis at maxmemory (noeviction)', () => {
  it('every script opens with its shebang: allow-oom unless it adds work', () => {
    for (const spec of Object.values(scripts)) {
      const first = spec.source.slice(0, spec.source.indexOf('\n'));
      expect({ script: spec.name, first }).toEqual({
        script: spec.name,
        first: ADDS_WORK.includes(spec.name) ? '#!lua' : '#!lua flags=allow-oom',
      });
    }
  });

  it('refuses add and addBulk with RedisFullError, writing nothing; a worker drains the backlog and adds are accepted again', async () => {
    const name = uniqueName();
    const q = queue(name);
    const { refusal, ids } = await fill(q);
    expectFull(refusal);
    expect(ids.length).toBeGreaterThan(100);

    const before = await footprint(q);
    await q.add({ n: -1, pad: FILLER }).then(
      () => expect.fail('add was accepted by a full Redis'),
      (err: unknown) => expectFull(err),
    );
    await q
      .addBulk([
        { data: { n: -2, pad: '' }, opts: { id: 'explicit-while-full' } },
        { data: { n: -3, pad: '' } },
        { data: { n: -4, pad: '' }, opts: { delayMs: 60_000 } },
      ])
      .then(
        () => expect.fail('addBulk was accepted by a full Redis'),
        (err: unknown) => expectFull(err),
      );
    expect(await footprint(q)).toEqual(before);
    expect(await q.getJob('explicit-while-full')).toBeNull();
    // A settings write is refused with the same typed error; pause/resume still work.
    await q.setGlobalConcurrency(3).then(
      () => expect.fail('setGlobalConcurrency was accepted by a full Redis'),
      (err: unknown) => expectFull(err),
    );
    await q.pause();
    expect(await q.isPaused()).toBe(true);
    await q.resume();
    expect(await q.isPaused()).toBe(false);

    // Completed jobs are deleted at once (retention 0): each completion frees its 16 KB. Every job
    // writes a log line (progress.lua) and one in ten fails its first attempt (fail.lua, then a
    // retry through delayed), all while Redis is over maxmemory.
    const done = new Set<string>();
    const failed = new Set<string>();
    const unlogged: string[] = [];
    const errors: SuretyError[] = [];
    const w = new Worker<{ n: number; pad: string }>(
      name,
      async (job: Job<{ n: number; pad: string }>) => {
        if (!(await job.log(`attempt ${job.attempt}`))) unlogged.push(job.id);
        if (job.data.n % 10 === 0 && job.attempt === 1) throw new Error('the first attempt fails');
        return job.data.n;
      },
      {
        connection: fx.url,
        concurrency: 16,
        retention: { completed: { maxCount: 0 } },
      },
    );
    open.push(w);
    w.on('error', (err) => errors.push(err));
    w.on('completed', (job) => done.add(job.id));
    w.on('failed', (job, _err, outcome) => failed.add(`${job.id} ${outcome}`));
    await waitUntil(
      () => done.size === ids.length,
      `all ${ids.length} jobs completed (${done.size} so far)`,
      25_000,
    );
    expect([...done].sort()).toEqual([...ids].sort());
    expect(await q.counts()).toMatchObject({ waiting: 0, active: 0, delayed: 0, completed: 0, dead: 0 });
    expect(errors).toEqual([]);
    expect(unlogged).toEqual([]);
    expect(failed.size).toBe(ids.length / 10);
    for (const f of failed) expect(f).toMatch(/ delayed$/);

    // The memory is back under maxmemory: the same add is accepted and runs.
    const [, limit] = (await fx.redis.config('GET', 'maxmemory')) as [string, string];
    expect(await usedMemory()).toBeLessThan(Number(limit));
    const again = await q.add({ n: 7, pad: FILLER });
    expect(again.isNew).toBe(true);
    await waitUntil(() => done.has(again.id), 'the job added after the drain completed');
  });

  it("a worker reports calls a full Redis refuses as RedisFullError events (never ERR_CONNECTION), keeps draining, and a schedule's next occurrence is created once memory is free", async () => {
    const name = uniqueName();
    const q = queue(name);
    // Its first occurrence is due in 200 ms; creating the next one (advance-schedule) is an add, so it
    // is refused while Redis is full, and the recovery loop's schedule repair creates it afterwards.
    // A negative priority puts it before the backlog, so it starts while Redis is still full.
    await q.schedule('tick', { everyMs: 200 }, { data: { n: -1, pad: '' }, opts: { priority: -1 } });
    const { refusal, ids } = await fill(q);
    expectFull(refusal);
    const { nextRunAt } = (await q.schedules())[0]!;
    await waitUntil(async () => {
      const [s, us] = await fx.redis.time();
      return Number(s) * 1000 + Number(us) / 1000 >= nextRunAt;
    }, 'the first occurrence is due (on the Redis clock)');

    // The backlog waits for the worker's first error event, so no completion can free memory before
    // the occurrence's advance-schedule reaches Redis.
    let firstError!: () => void;
    const gate = new Promise<void>((resolve) => {
      firstError = resolve;
    });
    const done = new Set<string>();
    const errors: SuretyError[] = [];
    const w = new Worker<{ n: number; pad: string }>(
      name,
      async (job: Job<{ n: number; pad: string }>) => {
        if (!job.id.startsWith('schedule:')) await gate;
        return job.data.n;
      },
      {
        connection: fx.url,
        concurrency: 16,
        recoverIntervalMs: 50,
        retention: { completed: { maxCount: 0 } },
      },
    );
    open.push(w);
    w.on('error', (err) => {
      errors.push(err);
      firstError();
    });
    w.on('completed', (job) => done.add(job.id));

    await waitUntil(() => errors.length > 0, 'an error event from the worker');
    expectFull(errors[0]);
    await waitUntil(() => ids.every((id) => done.has(id)), 'every filler job completed', 25_000);
    const firstOccurrence = [...done].find((id) => id.startsWith('schedule:tick:'));
    expect(firstOccurrence).toBeDefined();
    // Memory freed: the schedule goes on (a later occurrence runs).
    await waitUntil(
      () => [...done].some((id) => id.startsWith('schedule:tick:') && id !== firstOccurrence),
      'a later occurrence of the schedule completed',
    );
    for (const err of errors) expectFull(err);
  });
});
