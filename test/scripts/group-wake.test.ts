/**
 * Every change that frees a parked group wakes it at once (issue 33, defect 7): a concurrency-1 group
 * held behind a retry runs again as soon as that retry is promoted, made due, removed, cancelled or
 * drained, not at the retry's old due time; a group parked by its full rate window runs again as soon
 * as its rate limit is removed or raised. And a change that frees nothing keeps the hold.
 *
 * Claims and failures run the scripts on an injected clock (taken from Redis's, then moved only by the
 * test), so "the old due time has not come" is exact, not a race.
 */
import { describe, expect, it } from 'vitest';
import { Queue } from '../../src/index.js';
import { type ArgValue, type ScriptSpec, scripts } from '../../src/scripts/specs.js';
import { decodeClaimed } from '../../src/store/job-record.js';
import { runScriptAt } from '../helpers/run-script-at.js';
import { closeAfterEach, uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
const RETRY_MS = 60_000;

class Clocked {
  readonly q = new Queue(uniqueName('gw'), { connection: fx.url });
  now = 0;
  constructor() {
    open.push(this.q);
  }

  async sync(): Promise<void> {
    const [s, us] = await fx.redis.time();
    this.now = Number(s) * 1000 + Math.floor(Number(us) / 1000);
  }

  run<A extends string, R extends string, T>(
    spec: ScriptSpec<A, R, T>,
    extra: Record<string, ArgValue>,
    rows: Record<R, ArgValue>[] = [],
  ) {
    return runScriptAt(fx.redis, this.q.keys, spec, this.now, extra, rows);
  }

  /** Claims up to `count` jobs at the test clock: their ids and tokens. */
  async claim(count = 5): Promise<{ id: string; token: string }[]> {
    const reply = (await this.run(scripts.claim, { count })) as unknown[];
    const out: { id: string; token: string }[] = [];
    for (let i = 6; i < reply.length; i += 2)
      out.push({ id: String(reply[i]), token: decodeClaimed(String(reply[i + 1])).token });
    return out;
  }

  async fail(job: { id: string; token: string }, retryDelayMs: number): Promise<void> {
    const error = JSON.stringify({ name: 'Error', message: 'boom' });
    await this.run(scripts.fail, {}, [{ id: job.id, token: job.token, retryDelayMs, error }]);
  }

  /**
   * Group `g` at concurrency 1 with jobs a and b: a ran, failed and retries in a minute, so the group
   * is held behind it and b must wait.
   */
  async heldBehindRetry(): Promise<{ a: string; b: string }> {
    await this.q.setGroupLimits({ concurrency: 1 });
    const [a, b] = await this.q.addBulk([
      { data: {}, opts: { group: 'g' } },
      { data: {}, opts: { group: 'g' } },
    ]);
    await this.sync();
    const first = await this.claim(1);
    expect(first.map((j) => j.id)).toEqual([a!.id]);
    await this.fail(first[0]!, RETRY_MS);
    this.now += 10;
    expect(await this.claim(), 'held behind its retry').toEqual([]);
    return { a: a!.id, b: b!.id };
  }

  async claimedIds(count = 5): Promise<string[]> {
    this.now += 10;
    return (await this.claim(count)).map((j) => j.id);
  }
}

describe('a concurrency-1 group held behind a retry', () => {
  it('runs the retry at once after promote, first in its group', async () => {
    const h = new Clocked();
    const { a } = await h.heldBehindRetry();
    await h.q.promote(a);
    expect(await h.claimedIds()).toEqual([a]);
  });

  it('runs the retry at once after changeDelay(id, 0)', async () => {
    const h = new Clocked();
    const { a } = await h.heldBehindRetry();
    await h.q.changeDelay(a, 0);
    expect(await h.claimedIds()).toEqual([a]);
  });

  it('is held until the new due time after changeDelay(id, ms), and no longer', async () => {
    const h = new Clocked();
    const { a } = await h.heldBehindRetry();
    await h.q.changeDelay(a, 2_000);
    await h.sync();
    expect(await h.claimedIds(), 'still held before the new due time').toEqual([]);
    h.now += 2_100;
    expect(await h.claimedIds()).toEqual([a]);
  });

  it('runs its next job at once after the retry is removed', async () => {
    const h = new Clocked();
    const { a, b } = await h.heldBehindRetry();
    await h.q.remove(a);
    expect(await h.claimedIds()).toEqual([b]);
  });

  it('runs its next job at once after the retry is cancelled', async () => {
    const h = new Clocked();
    const { a, b } = await h.heldBehindRetry();
    await h.q.cancel(a);
    expect(await h.claimedIds()).toEqual([b]);
  });

  it('runs a job added after a drain at once', async () => {
    const h = new Clocked();
    await h.heldBehindRetry();
    expect(await h.q.drain()).toBe(2);
    const c = await h.q.add({}, { group: 'g' });
    expect(await h.claimedIds()).toEqual([c.id]);
  });

  it('stays held when its limits change but its concurrency stays 1', async () => {
    const h = new Clocked();
    await h.heldBehindRetry();
    await h.q.setGroupLimits({ concurrency: 1, rateLimit: { max: 100, durationMs: 1_000 } });
    await h.q.setGroupLimits({ concurrency: 1 }, { group: 'g' });
    expect(await h.claimedIds()).toEqual([]);
  });

  it('runs its next job at once when its concurrency is raised (no order left to keep)', async () => {
    const h = new Clocked();
    const { b } = await h.heldBehindRetry();
    await h.q.setGroupLimits({ concurrency: 2 }, { group: 'g' });
    expect(await h.claimedIds()).toEqual([b]);
  });
});

describe('a group parked by its full rate window', () => {
  async function parked(h: Clocked): Promise<string[]> {
    await h.q.setGroupLimits({ rateLimit: { max: 1, durationMs: RETRY_MS } }, { group: 'g' });
    const added = await h.q.addBulk([
      { data: {}, opts: { group: 'g' } },
      { data: {}, opts: { group: 'g' } },
    ]);
    await h.sync();
    expect(await h.claimedIds()).toEqual([added[0]!.id]);
    expect(await h.claimedIds(), 'its window is full').toEqual([]);
    return added.map((a) => a.id);
  }

  it('runs at once after its rate limit is removed', async () => {
    const h = new Clocked();
    const ids = await parked(h);
    await h.q.setGroupLimits({ rateLimit: null }, { group: 'g' });
    expect(await h.claimedIds()).toEqual([ids[1]]);
  });

  it('runs at once after its rate limit is raised', async () => {
    const h = new Clocked();
    const ids = await parked(h);
    await h.q.setGroupLimits({ rateLimit: { max: 5, durationMs: RETRY_MS } }, { group: 'g' });
    expect(await h.claimedIds()).toEqual([ids[1]]);
  });

  it('runs at once after the default limits that parked it are removed', async () => {
    const h = new Clocked();
    await h.q.setGroupLimits({ rateLimit: { max: 1, durationMs: RETRY_MS } });
    const added = await h.q.addBulk([
      { data: {}, opts: { group: 'g' } },
      { data: {}, opts: { group: 'g' } },
    ]);
    await h.sync();
    expect(await h.claimedIds()).toEqual([added[0]!.id]);
    expect(await h.claimedIds()).toEqual([]);
    await h.q.setGroupLimits(null);
    expect(await h.claimedIds()).toEqual([added[1]!.id]);
  });

  it('a group paused by a RateLimitError stays paused when its limits change', async () => {
    const h = new Clocked();
    const added = await h.q.addBulk([
      { data: {}, opts: { group: 'g' } },
      { data: {}, opts: { group: 'g' } },
    ]);
    await h.sync();
    const [job] = await h.claim(1);
    await h.run(scripts.fail, {}, [{ id: job!.id, token: job!.token, retryDelayMs: RETRY_MS, error: 'R' }]);
    await h.q.setGroupLimits({ concurrency: 5 }, { group: 'g' });
    expect(await h.claimedIds()).toEqual([]);
    h.now += RETRY_MS + 10;
    expect(await h.claimedIds()).toEqual(added.map((a) => a.id));
  });
});
