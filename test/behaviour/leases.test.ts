/**
 * Leases and fencing, driven at the script level with an injected clock so lease expiry is exact
 * and instant. Behaviour through real processes is in crash.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_LEASE_MS, DEFAULT_MAX_ATTEMPTS, FREE_RETURNS } from '../../src/defaults.js';
import { Queue, Worker } from '../../src/index.js';
import { runScript, scripts } from '../../src/scripts/specs.js';
import { queueKeys } from '../../src/store/keys.js';
import { claimArgs } from '../helpers/claim-args.js';
import { uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const T = 1_700_000_000_000;

function harness() {
  const name = uniqueName();
  const keys = queueKeys('surety', name);
  const queue = new Queue(name, { connection: fx.url });
  const tokens = new Map<string, string[]>();
  /**
   * A claim, then the start marks of the first `startNow` jobs at the same `now` (a worker whose
   * processors start at once; '' = all), as start.lua; the rest stay unstarted (prefetched).
   */
  const claim = async (now: number, count = 1, startNow: number | '' = '') => {
    const r = (await runScript(fx.redis, scripts.claim, keys, claimArgs({ now, count }))) as (
      | string
      | number
    )[];
    const ids: string[] = [];
    const marks: { id: string; token: string }[] = [];
    for (let i = 6; i < r.length; i += 2) {
      const id = r[i] as string;
      const token = (r[i + 1] as string).split('|')[1]!;
      ids.push(id);
      tokens.set(id, [...(tokens.get(id) ?? []), token]);
      if (startNow === '' || marks.length < startNow) marks.push({ id, token });
    }
    if (marks.length > 0) await runScript(fx.redis, scripts.start, keys, { now }, marks);
    return ids;
  };
  /** The fencing token that claim number `n` (from 1) of job `id` returned. */
  const tok = (id: string, n: number) => tokens.get(id)![n - 1]!;
  const complete = (now: number, id: string, token: string, result = '"ok"') =>
    runScript(
      fx.redis,
      scripts.complete,
      keys,
      {
        now,
        keepCount: 100,
        keepAgeMs: 86_400_000,
        limit: 100,
        doneChannel: keys.doneChannel,
        eventsMaxLen: 0,
        wakeChannel: keys.wakeChannel,
        starts: '',
      },
      [{ id, token, result }],
    ) as Promise<string[]>;
  /** error: the attempt's error JSON, or `S` (snooze) / `R` (rate limit), see fail.lua. */
  const fail = (
    now: number,
    id: string,
    token: string,
    retryDelayMs = 0,
    error = '{"name":"Error","message":"x"}',
  ) =>
    runScript(
      fx.redis,
      scripts.fail,
      keys,
      {
        now,
        defaultMaxAttempts: DEFAULT_MAX_ATTEMPTS,
        keepCount: 100,
        keepAgeMs: 86_400_000,
        limit: 100,
        wakeChannel: keys.wakeChannel,
        doneChannel: keys.doneChannel,
        eventsMaxLen: 0,
      },
      [{ id, token, retryDelayMs, error }],
    ) as Promise<string[]>;
  const extend = (now: number, id: string, token: string) =>
    runScript(fx.redis, scripts.extend, keys, { now, defaultLeaseMs: DEFAULT_LEASE_MS }, [
      { id, token },
    ]) as Promise<string[]>;
  const start = (now: number, id: string, token: string) =>
    runScript(fx.redis, scripts.start, keys, { now }, [{ id, token }]) as Promise<string[]>;
  const release = (id: string, token: string) =>
    runScript(fx.redis, scripts.release, keys, { wakeChannel: keys.wakeChannel, eventsMaxLen: 0 }, [
      { id, token },
    ]) as Promise<string[]>;
  const recover = async (now: number) =>
    (await runScript(fx.redis, scripts.recover, keys, {
      now,
      limit: 100,
      defaultMaxAttempts: DEFAULT_MAX_ATTEMPTS,
      keepCount: 100,
      keepAgeMs: 86_400_000,
      wakeChannel: keys.wakeChannel,
      doneChannel: keys.doneChannel,
      eventsMaxLen: 0,
    })) as [string[], string[]];
  return { keys, queue, claim, complete, fail, extend, start, release, recover, tok };
}

describe('leases and fencing tokens', () => {
  it('claiming sets the lease deadline from the Redis clock and the job leaseMs', async () => {
    const h = harness();
    const a = await h.queue.add({}, { leaseMs: 5_000 });
    const b = await h.queue.add({});
    expect(await h.claim(T, 2)).toEqual([a.id, b.id]);
    expect(Number(await fx.redis.zscore(h.keys.active, a.id))).toBe(T + 5_000);
    expect(Number(await fx.redis.zscore(h.keys.active, b.id))).toBe(T + DEFAULT_LEASE_MS);
    expect(await h.queue.getJob(a.id)).toMatchObject({ state: 'active', attempts: 1, startedAt: T });
    await h.queue.close();
  });

  it('a renewed lease is not recovered; an expired one goes back to the front of waiting with a LeaseExpiredError', async () => {
    const h = harness();
    const a = await h.queue.add({}, { leaseMs: 1_000 });
    const b = await h.queue.add({}, { leaseMs: 1_000 });
    await h.claim(T, 2);
    expect(await h.extend(T + 900, a.id, h.tok(a.id, 1))).toEqual([]);
    expect(await h.recover(T + 1_500)).toEqual([[b.id], []]);
    const info = await h.queue.getJob(b.id);
    expect(info).toMatchObject({ state: 'waiting', attempts: 1 });
    expect(info!.errors).toEqual([
      expect.objectContaining({
        attempt: 1,
        name: 'LeaseExpiredError',
        code: 'ERR_LEASE_EXPIRED',
        at: T + 1_500,
      }),
    ]);
    expect((await h.queue.getJob(a.id))!.state).toBe('active');
    await h.queue.add({}, { id: 'later' });
    // Recovered jobs go to the front: they have waited longest.
    expect(await h.claim(T + 1_600, 1)).toEqual([b.id]);
    await h.queue.close();
  });

  it("a stale worker's completion is refused after its lease is recovered; the newer attempt's outcome stands", async () => {
    const h = harness();
    const job = await h.queue.add({}, { leaseMs: 1_000 });
    await h.claim(T);
    await h.recover(T + 1_001);
    await h.claim(T + 1_002); // attempt 2 elsewhere
    expect(await h.complete(T + 1_003, job.id, h.tok(job.id, 1), '"stale"')).toEqual([job.id, 'STALE:a:2']);
    expect(await h.fail(T + 1_003, job.id, h.tok(job.id, 1))).toEqual([job.id, 'STALE:a:2']);
    expect(await h.extend(T + 1_003, job.id, h.tok(job.id, 1))).toEqual([job.id]);
    expect(await h.complete(T + 1_004, job.id, h.tok(job.id, 2), '"fresh"')).toEqual([]);
    // A re-sent completion (reply lost on a dropped connection) is a no-op, not a refusal.
    expect(await h.complete(T + 1_005, job.id, h.tok(job.id, 2), '"fresh"')).toEqual([]);
    // The stale worker wakes up even later: still refused, result unchanged.
    expect(await h.complete(T + 1_006, job.id, h.tok(job.id, 1), '"stale"')).toEqual([job.id, 'STALE:c:2']);
    expect(await h.queue.getJob(job.id)).toMatchObject({
      state: 'completed',
      result: 'fresh',
      attempts: 2,
      finishedAt: T + 1_004,
    });
    await h.queue.close();
  });

  it('a completion is refused while the recovered job waits, before anyone re-claims it', async () => {
    const h = harness();
    const job = await h.queue.add({}, { leaseMs: 1_000 });
    await h.claim(T);
    await h.recover(T + 2_000);
    expect(await h.complete(T + 2_001, job.id, h.tok(job.id, 1))).toEqual([job.id, 'STALE:w:1']);
    expect((await h.queue.getJob(job.id))!.state).toBe('waiting');
    await h.queue.close();
  });

  it('a job whose lease, once renewed, expires on its last attempt goes dead', async () => {
    const h = harness();
    const job = await h.queue.add({}, { leaseMs: 1_000, maxAttempts: 2 });
    await h.claim(T);
    expect(await h.extend(T + 10, job.id, h.tok(job.id, 1))).toEqual([]);
    await h.recover(T + 1_011);
    await h.claim(T + 1_012);
    expect(await h.extend(T + 1_020, job.id, h.tok(job.id, 2))).toEqual([]);
    expect(await h.recover(T + 2_021)).toEqual([[], [job.id]]);
    const info = await h.queue.getJob(job.id);
    expect(info).toMatchObject({ state: 'dead', attempts: 2, attemptsLeft: 0, finishedAt: T + 2_021 });
    expect(info!.errors.map((e) => e.code)).toEqual(['ERR_LEASE_EXPIRED', 'ERR_LEASE_EXPIRED']);
    await h.queue.close();
  });

  it('a snooze or rate limit from a worker whose lease was lost is refused as stale: nothing moves', async () => {
    const h = harness();
    const job = await h.queue.add({}, { leaseMs: 1_000 });
    await h.claim(T);
    expect(await h.extend(T + 10, job.id, h.tok(job.id, 1))).toEqual([]);
    await h.recover(T + 1_011); // the lease is revoked; the job waits again
    await h.claim(T + 1_012); // attempt 2, another worker
    for (const kind of ['S', 'R'])
      expect(await h.fail(T + 1_013, job.id, h.tok(job.id, 1), 5_000, kind)).toEqual([job.id, 'STALE:a:2']);
    expect(await h.queue.getJob(job.id)).toMatchObject({ state: 'active', attempts: 2, snoozes: 0 });
    // The holder of the lease may snooze: the budget is given back (the start stays counted), delayed,
    // no error line added.
    expect(await h.fail(T + 1_014, job.id, h.tok(job.id, 2), 5_000, 'S')).toEqual([job.id, 'snoozed']);
    expect(await h.fail(T + 1_015, job.id, h.tok(job.id, 2), 5_000, 'S')).toEqual([job.id, 'snoozed']); // re-sent
    const info = await h.queue.getJob(job.id);
    expect(info).toMatchObject({
      state: 'delayed',
      attempts: 2,
      attemptsLeft: DEFAULT_MAX_ATTEMPTS - 1,
      snoozes: 1,
      runAt: T + 6_014,
    });
    expect(info!.errors).toHaveLength(1); // the lease loss of attempt 1 only
    await h.queue.close();
  });

  describe('lost leases: a marked start is charged, an unmarked one goes back free (bounded)', () => {
    it('a maxAttempts 1 job whose start was marked and whose worker died ends dead with its LeaseExpiredError', async () => {
      const h = harness();
      const job = await h.queue.add({}, { leaseMs: 800, maxAttempts: 1 });
      expect(await h.claim(T)).toEqual([job.id]); // claimed and marked at once
      expect(await h.recover(T + 801)).toEqual([[], [job.id]]);
      const info = await h.queue.getJob(job.id);
      expect(info).toMatchObject({ state: 'dead', attempts: 1, attemptsLeft: 0 });
      expect(info!.errors.map((e) => [e.attempt, e.code])).toEqual([[1, 'ERR_LEASE_EXPIRED']]);
      expect(info!.errors[0]!.message).toMatch(/stopped renewing it/);
      await h.queue.close();
    });

    it('an unmarked loss is never charged, however often: a maxAttempts 1 job keeps its one attempt', async () => {
      const h = harness();
      const job = await h.queue.add({}, { leaseMs: 1_000, maxAttempts: 1 });
      let now = T;
      // Past FREE_RETURNS: a job bounced by faults before any processor took it (chaos seed 4 under
      // load) must not die of it. Recovery cannot tell a job never run from one whose processor killed
      // its worker at once; the worker confirms the start of such a job before running it instead.
      for (let n = 1; n <= FREE_RETURNS + 3; n++) {
        expect(await h.claim(now, 1, 0)).toEqual([job.id]);
        expect(await h.recover(now + 1_001)).toEqual([[job.id], []]);
        expect(await h.queue.getJob(job.id)).toMatchObject({
          state: 'waiting',
          attempts: 0,
          attemptsLeft: 1,
          errors: [],
        });
        now += 1_002;
      }
      // Once its start is marked, a lost lease is charged as ever.
      expect(await h.claim(now, 1)).toEqual([job.id]);
      expect(await h.recover(now + 1_001)).toEqual([[], [job.id]]);
      const info = await h.queue.getJob(job.id);
      expect(info).toMatchObject({ state: 'dead', attempts: 1, attemptsLeft: 0 });
      expect(info!.errors.map((e) => [e.attempt, e.code])).toEqual([[1, 'ERR_LEASE_EXPIRED']]);
      expect(info!.errors[0]!.message).toMatch(/stopped renewing it/);
      await h.queue.close();
    });

    it(`a job that came back unmarked ${FREE_RETURNS} times runs only once Redis has counted its start`, async () => {
      const h = harness();
      const job = await h.queue.add({}, { leaseMs: 1_000, maxAttempts: 1 });
      let now = T;
      for (let n = 1; n <= FREE_RETURNS; n++) {
        await h.claim(now, 1, 0);
        expect(await h.recover(now + 1_001)).toEqual([[job.id], []]);
        now += 1_002;
      }
      // Its worker confirms the start before calling the processor: a processor that killed its worker
      // at once would now be charged (a marked start), so recovery need never charge an unmarked one.
      const seen: unknown[] = [];
      const worker = new Worker(
        h.queue.name,
        async (j) => {
          const info = (await h.queue.getJob(j.id))!;
          seen.push({ attempt: j.attempt, attempts: info.attempts, marked: info.startedAt !== undefined });
          return 'ran';
        },
        { connection: fx.url, prefetch: 0 },
      );
      try {
        expect(await h.queue.waitFor(job.id, { timeoutMs: 10_000 })).toBe('ran');
      } finally {
        await worker.close();
      }
      expect(seen).toEqual([{ attempt: 1, attempts: 1, marked: true }]);
      expect(await h.queue.getJob(job.id)).toMatchObject({ state: 'completed', attempts: 1, errors: [] });
      await h.queue.close();
    });

    it('a stale worker cannot complete a job recovered free, and its late start mark is refused', async () => {
      const h = harness();
      const job = await h.queue.add({}, { leaseMs: 1_000, maxAttempts: 2 });
      await h.claim(T, 1, 0);
      await h.recover(T + 1_001);
      expect(await h.complete(T + 1_002, job.id, h.tok(job.id, 1))).toEqual([job.id, 'STALE:w:0']);
      expect(await h.start(T + 1_002, job.id, h.tok(job.id, 1))).toEqual([job.id]);
      expect(await h.queue.getJob(job.id)).toMatchObject({ state: 'waiting', attempts: 0 });
      await h.queue.close();
    });
  });

  it('failing with a retry delay makes the job delayed until now + delay, then claimable', async () => {
    const h = harness();
    const job = await h.queue.add({});
    await h.claim(T);
    expect(await h.fail(T + 10, job.id, h.tok(job.id, 1), 500)).toEqual([job.id, 'delayed']);
    expect(await h.queue.getJob(job.id)).toMatchObject({ state: 'delayed', runAt: T + 510 });
    expect(await h.claim(T + 509)).toEqual([]);
    expect(await h.claim(T + 510)).toEqual([job.id]);
    expect((await h.queue.getJob(job.id))!.attempts).toBe(2);
    await h.queue.close();
  });

  it('a stale failure after recovery is refused, not mistaken for a re-sent one', async () => {
    const h = harness();
    const job = await h.queue.add({}, { leaseMs: 1_000 });
    await h.claim(T);
    await h.recover(T + 1_001);
    expect(await h.fail(T + 1_002, job.id, h.tok(job.id, 1))).toEqual([job.id, 'STALE:w:1']);
    // Whereas the holder's own failure, re-sent after a lost reply, is recognised as applied.
    await h.claim(T + 1_003);
    expect(await h.fail(T + 1_004, job.id, h.tok(job.id, 2))).toEqual([job.id, 'waiting']);
    expect(await h.fail(T + 1_005, job.id, h.tok(job.id, 2))).toEqual([job.id, 'waiting']);
    expect((await h.queue.getJob(job.id))!.errors).toHaveLength(2);
    await h.queue.close();
  });

  it("a job removed and added again under the same id never accepts the old holder's outcome", async () => {
    const h = harness();
    await h.queue.add({ v: 1 }, { id: 'same' });
    await h.claim(T);
    const staleToken = h.tok('same', 1);
    await h.recover(T + 40_000);
    await h.queue.remove('same');
    await h.queue.add({ v: 2 }, { id: 'same' });
    await h.claim(T + 40_001);
    expect(await h.complete(T + 40_002, 'same', staleToken, '"stale"')).toEqual(['same', 'STALE:a:1']);
    expect(await h.extend(T + 40_002, 'same', staleToken)).toEqual(['same']);
    expect(await h.complete(T + 40_003, 'same', h.tok('same', 2), '"fresh"')).toEqual([]);
    expect(await h.queue.getJob('same')).toMatchObject({ data: { v: 2 }, result: 'fresh', attempts: 1 });
    expect(h.tok('same', 2)).not.toBe(staleToken);
    await h.queue.close();
  });

  it('claim reports the next due time when it comes back short, so idle workers set a timer', async () => {
    const h = harness();
    const now = Date.now();
    await h.queue.add({}, { runAt: now + 60_000 });
    const r = (await runScript(
      fx.redis,
      scripts.claim,
      h.keys,
      claimArgs({ now, count: 3, defaultLeaseMs: 1, limit: 10 }),
    )) as unknown[];
    expect(r).toEqual([now, String(now + 60_000), 0, 0, 0, 0]);
    await h.queue.close();
  });

  describe("start marks (start.lua and complete.lua's starts)", () => {
    it('a claim counts nothing: leased jobs have no attempt counted and no startedAt until their mark', async () => {
      const h = harness();
      const [a, b, c] = await h.queue.addBulk([{ data: 1 }, { data: 2 }, { data: 3 }]);
      expect(await h.claim(T, 3, 1)).toEqual([a!.id, b!.id, c!.id]);
      expect(await h.queue.getJob(a!.id)).toMatchObject({ state: 'active', attempts: 1, startedAt: T });
      for (const id of [b!.id, c!.id]) {
        const info = await h.queue.getJob(id);
        expect(info).toMatchObject({ state: 'active', attempts: 0 });
        expect(info!.startedAt).toBeUndefined();
        expect(Number(await fx.redis.zscore(h.keys.active, id))).toBe(T + DEFAULT_LEASE_MS);
      }
      await h.queue.close();
    });

    it('a mark counts the attempt once; sent again it changes nothing; a lost lease is refused', async () => {
      const h = harness();
      const job = await h.queue.add({}, { leaseMs: 1_000 });
      await h.claim(T, 1, 0);
      expect(await h.start(T + 500, job.id, h.tok(job.id, 1))).toEqual([]);
      expect(await h.queue.getJob(job.id)).toMatchObject({
        state: 'active',
        attempts: 1,
        startedAt: T + 500,
      });
      // The mark does not touch the lease: renewals do.
      expect(Number(await fx.redis.zscore(h.keys.active, job.id))).toBe(T + 1_000);
      // A re-sent mark (its reply lost): same attempt, same start.
      expect(await h.start(T + 700, job.id, h.tok(job.id, 1))).toEqual([]);
      expect(await h.queue.getJob(job.id)).toMatchObject({ attempts: 1, startedAt: T + 500 });
      expect(await h.start(T + 700, job.id, 'not-the-token')).toEqual([job.id]);
      expect(await h.complete(T + 800, job.id, h.tok(job.id, 1))).toEqual([]);
      expect(await h.start(T + 900, job.id, h.tok(job.id, 1))).toEqual([job.id]);
      expect(await h.queue.getJob(job.id)).toMatchObject({ state: 'completed', attempts: 1 });
      await h.queue.close();
    });

    it('a completion or failure whose mark has not arrived counts the start itself', async () => {
      const h = harness();
      const [a, b] = await h.queue.addBulk([
        { data: 1, opts: { maxAttempts: 1 } },
        { data: 2, opts: { maxAttempts: 1 } },
      ]);
      await h.claim(T, 2, 0);
      expect(await h.complete(T + 5, a!.id, h.tok(a!.id, 1))).toEqual([]);
      expect(await h.queue.getJob(a!.id)).toMatchObject({
        state: 'completed',
        attempts: 1,
        startedAt: T + 5,
      });
      // maxAttempts 1: the failure is the job's one attempt, so it ends dead.
      expect(await h.fail(T + 6, b!.id, h.tok(b!.id, 1))).toEqual([b!.id, 'dead']);
      const info = await h.queue.getJob(b!.id);
      expect(info).toMatchObject({ state: 'dead', attempts: 1 });
      expect(info!.errors.map((e) => e.attempt)).toEqual([1]);
      await h.queue.close();
    });

    it('marks riding on a completion are applied first; a mark whose lease is gone comes back as START_LOST', async () => {
      const h = harness();
      const [a, b, c] = await h.queue.addBulk([{ data: 1 }, { data: 2 }, { data: 3 }]);
      await h.claim(T, 3, 0);
      await h.queue.cancel(c!.id);
      const starts = [b!.id, h.tok(b!.id, 1), c!.id, h.tok(c!.id, 1)].join('\n');
      const reply = await runScript(
        fx.redis,
        scripts.complete,
        h.keys,
        {
          now: T + 10,
          keepCount: 100,
          keepAgeMs: 86_400_000,
          limit: 100,
          doneChannel: h.keys.doneChannel,
          eventsMaxLen: 0,
          wakeChannel: h.keys.wakeChannel,
          starts,
        },
        [{ id: a!.id, token: h.tok(a!.id, 1), result: '1' }],
      );
      expect(reply).toEqual([c!.id, 'START_LOST']);
      expect(await h.queue.getJob(b!.id)).toMatchObject({ state: 'active', attempts: 1, startedAt: T + 10 });
      expect(await h.queue.getJob(a!.id)).toMatchObject({ state: 'completed', attempts: 1 });
      await h.queue.close();
    });

    it('release hands back only a job whose start was not marked, attempts as they are', async () => {
      const h = harness();
      const [a, b] = await h.queue.addBulk([{ data: 1 }, { data: 2 }]);
      await h.claim(T, 2, 0);
      await h.start(T + 1, a!.id, h.tok(a!.id, 1));
      expect(await h.release(b!.id, h.tok(b!.id, 1))).toEqual([b!.id]);
      expect(await h.release(a!.id, h.tok(a!.id, 1))).toEqual([]);
      expect(await h.queue.getJob(a!.id)).toMatchObject({ state: 'active', attempts: 1 });
      expect(await h.queue.getJob(b!.id)).toMatchObject({ state: 'waiting', attempts: 0 });
      await h.queue.close();
    });

    it('a leased job that never started can be cancelled: it ends dead, and its late mark is refused', async () => {
      const h = harness();
      const job = await h.queue.add({});
      await h.claim(T, 1, 0);
      await h.queue.cancel(job.id);
      expect(await h.queue.getJob(job.id)).toMatchObject({ state: 'dead', attempts: 0 });
      expect(await h.start(T + 1, job.id, h.tok(job.id, 1))).toEqual([job.id]);
      await h.queue.close();
    });
  });
});
