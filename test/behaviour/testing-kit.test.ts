/**
 * surety/testing through its public API: a private redis-server, the real scripts and worker loops, a
 * virtual clock. Each behaviour the kit promises (docs/testing.md) is checked here against what
 * Redis holds afterwards, not against the kit's own view.
 */
import { existsSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import { Queue, RateLimitError, ValidationError, Worker } from '../../src/index.js';
import { pingRedis } from '../../src/redis/embedded.js';
import {
  createTestEnv,
  NotSettledError,
  parseDuration,
  type TestEnv,
  VirtualClock,
} from '../../src/testing/index.js';
import { startRedis } from '../helpers/redis-server.js';

const HOUR = 3_600_000;
let env: TestEnv | undefined;

afterEach(async () => {
  await env?.close();
  env = undefined;
});

/** A promise and its resolver, for a processor the test holds open. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((r) => {
    open = r;
  });
  return { promise, open };
}

describe('surety/testing', () => {
  it('a job delayed by an hour runs on advance(1h), not before', async () => {
    env = await createTestEnv();
    const queue = env.queue<{ n: number }>('delayed');
    const ranAt: number[] = [];
    env.worker<{ n: number }>('delayed', () => {
      ranAt.push(env!.now());
    });
    const t0 = env.now();
    const { id } = await queue.add({ n: 1 }, { delayMs: HOUR });
    await env.advance('59m');
    expect(ranAt).toEqual([]);
    expect((await queue.getJob(id))?.state).toBe('delayed');
    await env.advance('1m');
    expect(ranAt).toEqual([t0 + HOUR]);
    const info = await queue.getJob(id);
    expect(info?.state).toBe('completed');
    expect(info?.finishedAt).toBe(t0 + HOUR);
  });

  it('a failed job with a 1h backoff runs again after advance(1h)', async () => {
    env = await createTestEnv();
    const queue = env.queue('backoff');
    let attempts = 0;
    env.worker('backoff', (job) => {
      attempts++;
      if (job.attempt === 1) throw new Error('first attempt fails');
      return 'ok';
    });
    const { id } = await queue.add({}, { maxAttempts: 2, backoff: { type: 'fixed', delayMs: HOUR } });
    await env.drain();
    expect(attempts).toBe(1);
    expect((await queue.getJob(id))?.state).toBe('delayed');
    await env.advance(HOUR - 1);
    expect(attempts).toBe(1);
    await env.advance(1);
    expect(attempts).toBe(2);
    const info = await queue.getJob(id);
    expect(info?.state).toBe('completed');
    expect(info?.result).toBe('ok');
  });

  it("advancing past a running job's lease lets recovery take it back; the worker's renewal is refused", async () => {
    env = await createTestEnv();
    const queue = env.queue('lease');
    const started = gate();
    const attempts: number[] = [];
    const worker = env.worker('lease', async (job) => {
      attempts.push(job.attempt);
      if (attempts.length === 1) {
        started.open();
        // A stuck attempt: returns only when the worker learns its lease is gone.
        await new Promise((resolve) => job.signal.addEventListener('abort', resolve));
        return 'stale';
      }
      return 'fresh';
    });
    const lost: string[][] = [];
    worker.on('leaseLost', (ids) => lost.push(ids));
    worker.on('error', () => {}); // the stale outcome is refused (ERR_STALE_JOB): expected here
    const { id } = await queue.add({}, { leaseMs: 30_000 });
    await started.promise;
    await env.advance('31s');
    expect(lost).toEqual([[id]]);
    expect(attempts.length).toBe(2);
    const info = await queue.getJob(id);
    expect(info?.state).toBe('completed');
    expect(info?.result).toBe('fresh');
    expect(info?.errors.map((e) => e.code)).toEqual(['ERR_LEASE_EXPIRED']);
  });

  it('renewals run on the virtual clock: advancing in steps shorter than a third of the lease keeps it', async () => {
    env = await createTestEnv();
    const queue = env.queue('renew');
    const started = gate();
    const release = gate();
    const worker = env.worker('renew', async () => {
      started.open();
      await release.promise;
      return 'done';
    });
    const lost: string[][] = [];
    worker.on('leaseLost', (ids) => lost.push(ids));
    const { id } = await queue.add({}, { leaseMs: 30_000 });
    await started.promise;
    const t0 = env.now();
    for (let i = 0; i < 24; i++) await env.advance('5s');
    // Two minutes of virtual time, four leases long: renewed each time a third of it had passed.
    const active = await queue.getJob(id);
    expect(active?.state).toBe('active');
    expect(lost).toEqual([]);
    release.open();
    await env.drain();
    const info = await queue.getJob(id);
    expect(info?.state).toBe('completed');
    expect(info?.attempts).toBe(1);
    expect(info?.finishedAt).toBe(t0 + 120_000);
  });

  it('a cron schedule fires when advancing past its tick (09:00 virtual), once per day', async () => {
    env = await createTestEnv({ startAt: '2026-03-02T08:00:00Z' });
    const queue = env.queue<{ report: string }>('cron');
    const ranAt: string[] = [];
    env.worker<{ report: string }>('cron', () => {
      ranAt.push(new Date(env!.now()).toISOString());
    });
    await queue.schedule('daily', { cron: '0 9 * * *' }, { data: { report: 'daily' } });
    await env.advance('59m');
    expect(ranAt).toEqual([]);
    await env.advance('1m');
    expect(ranAt).toEqual(['2026-03-02T09:00:00.000Z']);
    await env.advance('1d');
    expect(ranAt).toEqual(['2026-03-02T09:00:00.000Z', '2026-03-03T09:00:00.000Z']);
    const [info] = await queue.schedules();
    expect(info?.nextRunAt).toBe(Date.parse('2026-03-04T09:00:00Z'));
  });

  it('advance waits for the call that creates the next occurrence: no schedule tick is skipped', async () => {
    env = await createTestEnv({ startAt: '2026-03-02T08:00:00Z' });
    const t0 = env.now();
    const queue = env.queue('ticks');
    // The worker creates the next occurrence as the current one starts, in a call nobody awaits, which
    // reads the (virtual) time. Its first read is held here until the env shows it knows of the call
    // (the worker's diagnostics count it), or else until the env moves its clock: an env that does
    // not wait for the call moves the clock first, every time, and the next tick is computed from
    // the moved clock, one period too late.
    const client = new Redis(env.connection as string);
    const held: (() => void)[] = [];
    const release = () => {
      for (const go of held.splice(0)) go();
    };
    const hget = client.hget.bind(client);
    client.hget = ((key: string, field: string) =>
      key === queue.keys.schedules
        ? new Promise<void>((go) => held.push(go)).then(() => hget(key, field))
        : hget(key, field)) as typeof client.hget;
    const moveTo = env.clock.moveTo.bind(env.clock);
    env.clock.moveTo = (t: number) => {
      moveTo(t);
      release();
    };
    const ranAt: number[] = [];
    const worker = new Worker('ticks', () => void ranAt.push(env!.now() - t0), {
      connection: client,
      clock: env.clock,
      prefix: env.prefix,
      // Its own recovery loop (which repairs a schedule left behind, on this client) never comes due:
      // the env's recovery pass runs on the env's client.
      recoverIntervalMs: 2_147_483_647,
    });
    const diagnostics = worker.diagnostics.bind(worker);
    worker.diagnostics = () => {
      const d = diagnostics();
      if ((d as { scheduleAdvances?: number }).scheduleAdvances) release();
      return d;
    };
    try {
      await queue.schedule('minutely', { everyMs: 60_000 }, { data: {} });
      for (let i = 0; i < 4; i++) await env.advance('1m');
      expect(ranAt).toEqual([60_000, 120_000, 180_000, 240_000]);
      const [info] = await queue.schedules();
      expect(info?.nextRunAt).toBe(t0 + 300_000);
    } finally {
      await worker.close();
      release();
      await client.quit();
    }
  });

  it('drain runs every runnable job and leaves delayed ones that are not due', async () => {
    env = await createTestEnv();
    const a = env.queue('drain-a');
    const b = env.queue('drain-b');
    const done: string[] = [];
    env.worker<{ k: string }>('drain-a', (job) => void done.push(job.data.k), { concurrency: 3 });
    env.worker<{ k: string }>('drain-b', (job) => void done.push(job.data.k));
    await a.addBulk([1, 2, 3, 4, 5].map((n) => ({ data: { k: `a${n}` } })));
    await a.add({ k: 'later' }, { delayMs: 60_000 });
    await b.add({ k: 'b1' });
    await env.drain(a);
    expect(done.filter((k) => k.startsWith('a')).sort()).toEqual(['a1', 'a2', 'a3', 'a4', 'a5']);
    expect(await a.counts()).toMatchObject({ waiting: 0, active: 0, delayed: 1, completed: 5 });
    await env.drain();
    expect(done).toContain('b1');
    expect(await b.counts()).toMatchObject({ waiting: 0, active: 0, completed: 1 });
  });

  it('a signal wait times out on the virtual clock, and a parent parks until its children ran', async () => {
    env = await createTestEnv();
    const queue = env.queue<{ kind: string }>('flows');
    const seen: string[] = [];
    env.worker<{ kind: string }>('flows', async (job) => {
      if (job.data.kind === 'child') return `child@${env!.now()}`;
      if (job.data.kind === 'parent') {
        await job.addChildren([{ data: { kind: 'child' }, opts: { delayMs: HOUR } }]);
        return Object.values(await job.waitForChildren());
      }
      try {
        return await job.waitForSignal('approved', { timeoutMs: HOUR });
      } catch (err) {
        if ((err as Error).name !== 'SignalTimeoutError') throw err; // ParkedError: let it propagate
        seen.push(`${(err as Error).name}@${env!.now()}`);
        return 'timed out';
      }
    });
    const t0 = env.now();
    const waiter = await queue.add({ kind: 'wait' });
    const parent = await queue.add({ kind: 'parent' });
    await env.drain(queue);
    expect((await queue.getJob(waiter.id))?.waitingForSignal).toEqual({
      name: 'approved',
      deadline: t0 + HOUR,
    });
    expect((await queue.getJob(parent.id))?.state).toBe('blocked');
    await env.advance('1h');
    await env.drain(queue);
    expect(seen).toEqual([`SignalTimeoutError@${t0 + HOUR}`]);
    expect((await queue.getJob(waiter.id))?.result).toBe('timed out');
    expect((await queue.getJob(parent.id))?.result).toEqual([`child@${t0 + HOUR}`]);
  });

  it("a job's timeout and job.sleep run on the virtual clock", async () => {
    env = await createTestEnv();
    const queue = env.queue<{ kind: string }>('timers');
    const seen: string[] = [];
    const hanging = gate();
    env.worker<{ kind: string }>(
      'timers',
      async (job) => {
        if (job.data.kind === 'sleep') {
          await job.step('before', () => seen.push(`before@${env!.now()}`));
          await job.sleep(HOUR);
          seen.push(`after@${env!.now()}`);
          return;
        }
        if (job.attempt === 1) {
          hanging.open();
          await new Promise((r) => job.signal.addEventListener('abort', r));
        }
      },
      { concurrency: 2 },
    );
    const t0 = env.now();
    const sleeper = await queue.add({ kind: 'sleep' });
    await env.drain(queue);
    expect(seen).toEqual([`before@${t0}`]);
    expect((await queue.getJob(sleeper.id))?.state).toBe('delayed');
    const slow = await queue.add(
      { kind: 'timeout' },
      // A lease longer than the timeout: renewed on the way (every 40 s), it never expires here.
      { timeoutMs: 60_000, leaseMs: 120_000, maxAttempts: 2, backoff: { type: 'fixed', delayMs: 1 } },
    );
    await hanging.promise;
    await env.advance('59s');
    expect((await queue.getJob(slow.id))?.state).toBe('active');
    await env.advance('1s'); // the attempt times out: retried after 1 ms
    await env.advance(1);
    const timedOut = await queue.getJob(slow.id);
    expect(timedOut?.state).toBe('completed');
    expect(timedOut?.errors.map((e) => e.code)).toEqual(['ERR_TIMEOUT']);
    expect((await queue.getJob(sleeper.id))?.state).toBe('delayed');
    await env.advance(HOUR - 60_001);
    expect(seen).toEqual([`before@${t0}`, `after@${t0 + HOUR}`]);
    expect((await queue.getJob(sleeper.id))?.state).toBe('completed');
  });

  it("a Queue and Worker built with the env's connection and clock run on the virtual clock", async () => {
    env = await createTestEnv();
    const queue = new Queue('own', { connection: env.connection, clock: env.clock, prefix: env.prefix });
    const ran: number[] = [];
    const worker = new Worker('own', () => void ran.push(env!.now()), {
      connection: env.connection,
      clock: env.clock,
      prefix: env.prefix,
    });
    try {
      const t0 = env.now();
      await queue.add({}, { runAt: t0 + 2 * HOUR });
      await env.advance('2h');
      expect(ran).toEqual([t0 + 2 * HOUR]);
    } finally {
      await worker.close();
      await queue.close();
    }
  });

  it('advance and drain refuse bad input with a ValidationError naming the value', async () => {
    expect(parseDuration('d', '1h30m')).toBe(90 * 60_000);
    expect(parseDuration('d', '1.5s')).toBe(1_500);
    expect(parseDuration('d', '2d')).toBe(2 * 86_400_000);
    env = await createTestEnv();
    for (const bad of ['abc', '', '1 hour', '-1s', -1, 1.5, '0.5ms', Number.NaN, null, '1y']) {
      const err = await env.advance(bad as never).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).message).toMatch(/^advance: duration must be .*got /);
    }
    await expect(env.drain(42 as never)).rejects.toThrow(
      /drain: queue must be a queue name or a Queue, got 42/,
    );
    await expect(createTestEnv({ startAt: 'not a date' })).rejects.toThrow(
      /startAt must be .*got "not a date"/,
    );
    await expect(createTestEnv({ settleTimeoutMs: 0 })).rejects.toThrow(/settleTimeoutMs/);
  });

  it('a processor that never returns makes drain fail with NotSettledError, naming the job', async () => {
    env = await createTestEnv({ settleTimeoutMs: 300 });
    const queue = env.queue('stuck');
    env.worker('stuck', () => new Promise(() => {}));
    const { id } = await queue.add({});
    const err = await env.drain().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotSettledError);
    expect((err as NotSettledError).code).toBe('ERR_NOT_SETTLED');
    expect((err as NotSettledError).message).toContain(`processors still running (jobs ${id})`);
  });

  it('close stops the private redis-server and removes its data directory', async () => {
    const own = await createTestEnv();
    const { port } = new URL(own.connection as string);
    const dir = (own as unknown as { dir: string }).dir;
    expect(existsSync(dir)).toBe(true);
    expect(await pingRedis(Number(port))).toBe(true);
    await own.close();
    expect(existsSync(dir)).toBe(false);
    expect(await pingRedis(Number(port))).toBe(false);
  });

  it('on a given connection: its own prefix, nothing flushed, the server left running', async () => {
    const server = await startRedis();
    const other = new Queue('shared', { connection: server.url });
    try {
      await other.add({ mine: true }, { delayMs: 60_000 });
      env = await createTestEnv({ connection: server.url });
      expect(env.prefix).toMatch(/^surety-test-[0-9a-f]{8}$/);
      const queue = env.queue('shared');
      const ran: unknown[] = [];
      env.worker('shared', (job) => void ran.push(job.data));
      await queue.add({ env: true }, { delayMs: 60_000 });
      await env.advance('1m');
      expect(ran).toEqual([{ env: true }]);
      await env.close();
      env = undefined;
      expect(await pingRedis(server.port)).toBe(true);
      // The queue of the same name under the default prefix: untouched, and on Redis's own clock.
      expect(await other.counts()).toMatchObject({ delayed: 1, completed: 0 });
    } finally {
      await other.close();
      await server.stop();
    }
  });

  it('the clock option is checked, and one client cannot carry two clocks', async () => {
    expect(() => new Queue('q', { clock: {} as never })).toThrow(
      /Queue options\.clock must be a clock \(an object with now\(\), setTimeout\(\) and clearTimeout\(\).*got \{\}/,
    );
    env = await createTestEnv();
    const first = env.queue('two-clocks');
    expect(() => new Queue('two-clocks', { connection: first.client, clock: new VirtualClock(0) })).toThrow(
      ValidationError,
    );
    // The same clock on a shared client is fine.
    const again = new Queue('two-clocks', { connection: first.client, clock: env.clock });
    await again.close();
  });

  it("a Queue without a clock keeps using Redis's clock on the same server", async () => {
    env = await createTestEnv({ startAt: '2001-01-01T00:00:00Z' });
    const virtual = env.queue('clocks');
    const real = new Queue('clocks', { connection: env.connection, prefix: env.prefix });
    try {
      const before = Date.now();
      const a = await virtual.add({});
      const b = await real.add({});
      expect((await virtual.getJob(a.id))?.createdAt).toBe(Date.parse('2001-01-01T00:00:00Z'));
      expect((await real.getJob(b.id))?.createdAt).toBeGreaterThanOrEqual(before - 1_000);
    } finally {
      await real.close();
    }
  });

  it('Symbol.asyncDispose closes the env', async () => {
    const own = await createTestEnv();
    const { port } = new URL(own.connection as string);
    await own[Symbol.asyncDispose]();
    expect(await pingRedis(Number(port))).toBe(false);
    expect(() => own.queue('after')).toThrow(/closed/);
  });

  it('admin calls run on the virtual clock: promote starts a delayed job, retry reruns a dead one', async () => {
    env = await createTestEnv();
    const queue = env.queue<{ fail: boolean }>('admin');
    const ranAt: number[] = [];
    env.worker<{ fail: boolean }>('admin', (job) => {
      ranAt.push(env!.now());
      if (job.data.fail && job.attempt === 1) throw new Error('no');
    });
    const t0 = env.now();
    const later = await queue.add({ fail: false }, { delayMs: HOUR });
    const dead = await queue.add({ fail: true }, { maxAttempts: 1 });
    await env.drain();
    expect((await queue.getJob(dead.id))?.state).toBe('dead');
    await queue.promote(later.id);
    await queue.retry(dead.id);
    await env.drain();
    expect(ranAt).toEqual([t0, t0, t0]);
    expect(await queue.counts()).toMatchObject({ completed: 2, dead: 0, delayed: 0 });
    await queue.remove(later.id);
    expect(await queue.getJob(later.id)).toBeNull();
  });

  it('env.queue and env.worker carry their type parameters', async () => {
    env = await createTestEnv();
    const queue = env.queue<{ to: string }, number>('typed');
    expectTypeOf(queue).toEqualTypeOf<Queue<{ to: string }, number>>();
    const worker = env.worker<{ to: string }, number>('typed', (job) => job.data.to.length);
    expectTypeOf(worker).toEqualTypeOf<Worker<{ to: string }, number>>();
    expectTypeOf(env.advance).parameter(0).toEqualTypeOf<number | string>();
    const { id } = await queue.add({ to: 'abc' });
    await env.drain('typed');
    expect((await queue.getJob(id))?.result).toBe(3);
  });

  it('advance and drain calls made without await run in call order', async () => {
    env = await createTestEnv();
    const queue = env.queue('ordered');
    const ranAt: number[] = [];
    env.worker('ordered', () => void ranAt.push(env!.now()));
    const t0 = env.now();
    await queue.add({}, { delayMs: 1_000 });
    await queue.add({}, { delayMs: 3_000 });
    await Promise.all([env.advance('1s'), env.advance('1s'), env.advance('1s'), env.drain()]);
    expect(ranAt).toEqual([t0 + 1_000, t0 + 3_000]);
    expect(env.now()).toBe(t0 + 3_000);
  });

  it('a RateLimitError pauses claims on the virtual clock: the job runs again after advance', async () => {
    env = await createTestEnv({ settleTimeoutMs: 3_000 });
    const queue = env.queue('limited');
    const ranAt: number[] = [];
    env.worker('limited', (job) => {
      ranAt.push(env!.now());
      if (job.snoozes === 0 && ranAt.length === 1) throw new RateLimitError(60_000);
    });
    const t0 = env.now();
    const { id } = await queue.add({});
    await env.drain();
    expect(ranAt).toEqual([t0]);
    expect((await queue.getJob(id))?.state).toBe('waiting');
    await env.advance('59s');
    expect(ranAt).toEqual([t0]);
    await env.advance('1s');
    expect(ranAt).toEqual([t0, t0 + 60_000]);
    expect((await queue.getJob(id))?.state).toBe('completed');
  });
});
