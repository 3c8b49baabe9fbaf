/**
 * add-one.lua (a plain queue.add) writes exactly what add.lua writes for the same job: the same record,
 * the same annex, the same place in waiting / delayed / expiring, the same reply. Each case adds one
 * job both ways, at the same instant (a fixed clock), to two queues, and compares everything stored.
 * (queue.addBulk always goes by add.lua; queue.add of a plain job by add-one.lua.)
 */
import { describe, expect, it } from 'vitest';
import type { Clock } from '../../src/clock.js';
import { type JobOptions, Queue } from '../../src/index.js';
import { queueKeys } from '../../src/store/keys.js';
import { closeAfterEach, uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
const NOW = 1_900_000_000_000;
const fixed: Clock = {
  now: () => NOW,
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
};

async function stored(name: string, id: string) {
  const k = queueKeys('surety', name);
  const annex = await fx.redis.hgetall(k.annex);
  return {
    record: await fx.redis.hget(k.jobs, id),
    annex: Object.fromEntries(Object.entries(annex).map(([f, v]) => [f.replace(id, '<id>'), v])),
    waiting: (await fx.redis.lrange(k.waiting, 0, -1)).map((x) => x === id),
    delayed: await fx.redis.zscore(k.delayed, id),
    expiring: await fx.redis.zscore(k.expiring, id),
  };
}

const CASES: [string, unknown, JobOptions][] = [
  ['defaults', { n: 1 }, {}],
  [
    'every option add-one takes',
    { n: 2 },
    { maxAttempts: 7, leaseMs: 9_000, name: 'mail', keep: { completed: true } },
  ],
  ['a delay', { n: 3 }, { delayMs: 60_000 }],
  ['runAt in the past (waiting)', { n: 4 }, { runAt: NOW - 1_000 }],
  ['runAt in the future', { n: 5 }, { runAt: NOW + 5_000 }],
  ['ttlMs', { n: 6 }, { ttlMs: 30_000 }],
  ['expireAt', { n: 7 }, { expireAt: NOW + 45_000 }],
  ['a payload over 512 bytes (kept in the annex)', { s: 'x'.repeat(2_000) }, {}],
  ['an explicit id', { n: 9 }, { id: 'order-9' }],
];

describe('add-one.lua agrees with add.lua', () => {
  for (const [label, data, opts] of CASES) {
    it(`for ${label}`, async () => {
      const one = new Queue(uniqueName('one'), { connection: fx.url, clock: fixed });
      const bulk = new Queue(uniqueName('bulk'), { connection: fx.url, clock: fixed });
      open.push(one, bulk);
      const a = await one.add(data, opts);
      const [b] = await bulk.addBulk([{ data, opts }]);
      expect(a).toEqual(b);
      expect(await stored(one.name, a.id)).toEqual(await stored(bulk.name, b!.id));
    });
  }

  it('for an id that exists: nothing written, the same answer', async () => {
    const one = new Queue(uniqueName('one'), { connection: fx.url, clock: fixed });
    const bulk = new Queue(uniqueName('bulk'), { connection: fx.url, clock: fixed });
    open.push(one, bulk);
    await one.add({ n: 1 }, { id: 'x', delayMs: 1_000 });
    await bulk.addBulk([{ data: { n: 1 }, opts: { id: 'x', delayMs: 1_000 } }]);
    const a = await one.add({ n: 2 }, { id: 'x' });
    const [b] = await bulk.addBulk([{ data: { n: 2 }, opts: { id: 'x' } }]);
    expect(a).toEqual({ id: 'x', isNew: false, state: 'delayed' });
    expect(a).toEqual(b);
    expect(await stored(one.name, 'x')).toEqual(await stored(bulk.name, 'x'));
  });

  it('skips generated ids already taken by explicit ones, as add.lua does', async () => {
    const one = new Queue(uniqueName('one'), { connection: fx.url, clock: fixed });
    const bulk = new Queue(uniqueName('bulk'), { connection: fx.url, clock: fixed });
    open.push(one, bulk);
    for (const q of [one, bulk])
      await q.addBulk([
        { data: 0, opts: { id: '1' } },
        { data: 0, opts: { id: '2' } },
      ]);
    const a = await one.add({ n: 1 });
    const [b] = await bulk.addBulk([{ data: { n: 1 } }]);
    expect(a.id).toBe('3');
    expect(b!.id).toBe('3');
    expect(await stored(one.name, '3')).toEqual(await stored(bulk.name, '3'));
  });
});
