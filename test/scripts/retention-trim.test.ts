/**
 * Retention of a finished set (includes/trim_finished.lua), called by complete.lua here: jobs finished
 * more than keepAgeMs ago go first, then the oldest beyond keepCount, and one call removes at most
 * `limit` of them (a bound on the script's run time), records included. The model test runs with a
 * limit it never reaches, so the limit is checked here.
 */
import { describe, expect, it } from 'vitest';
import { Queue } from '../../src/index.js';
import { runScript, scripts } from '../../src/scripts/specs.js';
import { queueKeys } from '../../src/store/keys.js';
import { claimArgs } from '../helpers/claim-args.js';
import { uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const T = 1_700_000_000_000;

interface Keep {
  keepCount: number;
  keepAgeMs: number;
  limit: number;
}
const KEEP_ALL: Keep = { keepCount: 1_000_000, keepAgeMs: 1_000_000_000, limit: 1_000 };

async function setup() {
  const name = uniqueName('trim');
  const queue = new Queue(name, { connection: fx.url, events: false });
  const keys = queueKeys('surety', name);
  /** Adds one job, claims it and completes it at `now` under `keep`; returns its id. */
  const finish = async (now: number, keep: Keep) => {
    const { id } = await queue.add({});
    const claimed = (await runScript(fx.redis, scripts.claim, keys, claimArgs({ now }))) as string[];
    const token = claimed[7]!.split('|')[1]!;
    const refused = await runScript(
      fx.redis,
      scripts.complete,
      keys,
      {
        now,
        ...keep,
        doneChannel: keys.doneChannel,
        wakeChannel: keys.wakeChannel,
        eventsMaxLen: 0,
        starts: '',
      },
      [{ id, token, result: '1' }],
    );
    expect(refused).toEqual([]);
    return id;
  };
  const completed = () => fx.redis.zrange(keys.completed, 0, -1);
  const records = async (ids: string[]) =>
    (await fx.redis.hmget(keys.jobs, ...ids)).filter((r) => r !== null).length;
  return { queue, finish, completed, records };
}

describe('retention of completed jobs', () => {
  it('trims the oldest beyond keepCount, at most `limit` per call, records included', async () => {
    const h = await setup();
    const ids: string[] = [];
    for (let i = 0; i < 40; i++) ids.push(await h.finish(T + i * 10, KEEP_ALL));
    const keep = { keepCount: 5, keepAgeMs: 1_000_000_000, limit: 10 };
    ids.push(await h.finish(T + 1_000, keep));
    expect(await h.completed()).toEqual(ids.slice(10));
    expect(await h.records(ids.slice(0, 10))).toBe(0);
    ids.push(await h.finish(T + 1_010, keep));
    expect(await h.completed()).toEqual(ids.slice(20));
    for (let i = 0; i < 3; i++) ids.push(await h.finish(T + 1_020 + i, keep));
    expect(await h.completed()).toEqual(ids.slice(-5));
    expect(await h.records(ids.slice(-5))).toBe(5);
    await h.queue.close();
  });

  it('trims by age first (at most `limit`), then the count excess within the same limit', async () => {
    const h = await setup();
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push(await h.finish(T + i * 10, KEEP_ALL));
    // At T + 1 000 with keepAgeMs 850: the 15 finished before T + 150 are too old; the limit takes 10.
    ids.push(await h.finish(T + 1_000, { keepCount: 1_000, keepAgeMs: 850, limit: 10 }));
    expect(await h.completed()).toEqual(ids.slice(10));
    // 22 in the set with the new job: 5 still too old (before T + 150), then 22 - 5 - 10 = 7 beyond
    // keepCount 10, of which the limit of 11 leaves room for 6.
    ids.push(await h.finish(T + 1_000, { keepCount: 10, keepAgeMs: 850, limit: 11 }));
    expect(await h.completed()).toEqual(ids.slice(-11));
    // A job finished exactly keepAgeMs ago stays.
    const oldest = Number(await fx.redis.zscore(queueKeys('surety', h.queue.name).completed, ids.at(-11)!));
    ids.push(await h.finish(oldest + 850, { keepCount: 1_000, keepAgeMs: 850, limit: 10 }));
    expect((await h.completed())[0]).toBe(ids.at(-12));
    await h.queue.close();
  });
});
