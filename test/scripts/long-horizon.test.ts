/**
 * Long horizon: counters started where years of traffic leave them. The prio order counter (`seq`)
 * near and past 2^31 and 2^32 (where offsets taken modulo 2^31 used to wrap and invert FIFO inside a
 * priority) and near 2^53; the lease-id counter (`tokens`) past 10^14 (where Lua prints a number in
 * exponent form, so plain concatenation made equal tokens) and near 2^53, its documented maximum; the
 * generated-id counter (`ids`) likewise. Order, fencing and ids must hold at every one of them.
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_MAX_ATTEMPTS } from '../../src/defaults.js';
import { Queue, Worker } from '../../src/index.js';
import { type ArgValue, runScript, scripts } from '../../src/scripts/specs.js';
import { type QueueKeys, queueKeys } from '../../src/store/keys.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

const P31 = 2 ** 31;
const P32 = 2 ** 32;
const P53 = 2 ** 53;
/** A clock decades ahead (2100-01-01), for the script-level tests. */
const T = 4_102_444_800_000;

function setup<D = unknown>() {
  const name = uniqueName();
  const keys = queueKeys('surety', name);
  const q = new Queue<D>(name, { connection: fx.url });
  open.push(q);
  return { name, keys, q };
}

/** Runs one worker (concurrency 1, no prefetch) over what is waiting; returns the ids in run order. */
async function runAll(name: string, expected: number): Promise<string[]> {
  const order: string[] = [];
  const w = new Worker(
    name,
    (job) => {
      order.push(job.id);
    },
    { connection: fx.url, concurrency: 1, prefetch: 0 },
  );
  open.push(w);
  await waitUntil(() => order.length >= expected, `${expected} jobs run`);
  await w.close();
  return order;
}

// Script-level helpers on an injected clock (lease expiry without waiting for it).
// Arguments are passed by name; names a script version does not take are ignored.
function call(
  spec: (typeof scripts)[keyof typeof scripts],
  keys: QueueKeys,
  args: Record<string, ArgValue>,
  rows: Record<string, ArgValue>[] = [],
) {
  return runScript(fx.redis, spec as never, keys, args as never, rows as never);
}
async function claim(keys: QueueKeys, now: number, count: number): Promise<{ id: string; token: string }[]> {
  const r = (await call(scripts.claim, keys, {
    now,
    count,
    defaultLeaseMs: 1_000,
    limit: 1_000,
    rateMax: 0,
    rateWindowMs: 0,
    eventsMaxLen: 0,
    claimer: '',
    nonce: '',
  })) as string[];
  const out: { id: string; token: string }[] = [];
  for (let i = 6; i < r.length; i += 2) out.push({ id: r[i]!, token: r[i + 1]!.split('|')[1]! });
  return out;
}
function recover(keys: QueueKeys, now: number) {
  return call(scripts.recover, keys, {
    now,
    limit: 1_000,
    defaultMaxAttempts: DEFAULT_MAX_ATTEMPTS,
    keepCount: 1_000,
    keepAgeMs: 86_400_000,
    wakeChannel: keys.wakeChannel,
    doneChannel: keys.doneChannel,
    eventsMaxLen: 0,
  });
}
function complete(keys: QueueKeys, now: number, id: string, token: string) {
  return call(
    scripts.complete,
    keys,
    {
      now,
      keepCount: 1_000,
      keepAgeMs: 86_400_000,
      limit: 1_000,
      doneChannel: keys.doneChannel,
      wakeChannel: keys.wakeChannel,
      eventsMaxLen: 0,
      starts: '',
    },
    [{ id, token, result: '"ok"' }],
  ) as Promise<string[]>;
}

/** The lease-id part of a fencing token (`<lease id>.<claim ms>`), exactly. */
const leaseId = (token: string) => BigInt(token.split('.')[0]!);

describe('priority order over the life of a queue', () => {
  for (const start of [P31 - 3, P32 - 3, P53 - 3]) {
    it(`jobs of one priority run in add order while the order counter passes ${start + 3}`, async () => {
      const { name, keys, q } = setup();
      const first = await q.add({}, { priority: 5 });
      await fx.redis.set(keys.seq, String(start));
      const ids = [first.id];
      for (let i = 0; i < 4; i++) ids.push((await q.add({}, { priority: 5 })).id);
      const bulk = await q.addBulk(Array.from({ length: 4 }, () => ({ data: {}, opts: { priority: 5 } })));
      ids.push(...bulk.map((b) => b.id));
      const urgent = (
        await q.addBulk([
          { data: {}, opts: { priority: -2 } },
          { data: {}, opts: { priority: -2 } },
        ])
      ).map((b) => b.id);
      const plain = (await q.add({})).id;
      expect(await runAll(name, ids.length + 3)).toEqual([...urgent, plain, ...ids]);
      // The counter stays in its band (it restarts once the prio set is empty).
      expect(Number(await fx.redis.get(keys.seq))).toBeLessThan(P31);
    });
  }

  it('recovered jobs go to the front of their priority, each before the earlier ones, across a renumbering', async () => {
    const { keys, q } = setup();
    const ids = (await q.addBulk(Array.from({ length: 6 }, () => ({ data: {}, opts: { priority: 3 } })))).map(
      (b) => b.id,
    );
    const claimed = await claim(keys, T, 2);
    expect(claimed.map((c) => c.id)).toEqual(ids.slice(0, 2));
    // The first front insert takes the last offset in the band, the second would leave it.
    await fx.redis.set(keys.seq, String(P31 - 2));
    await recover(keys, T + 2_000);
    expect((await claim(keys, T + 2_001, 10)).map((c) => c.id)).toEqual(ids);
    expect(Number(await fx.redis.get(keys.seq))).toBeLessThan(P31);
  });

  it('a renumbering keeps the order inside and across priorities, negative ones included', async () => {
    const { name, keys, q } = setup();
    const byPriority = new Map<number, string[]>([
      [-7, []],
      [2, []],
      [9, []],
    ]);
    const addTo = async (priority: number) =>
      byPriority.get(priority)!.push((await q.add({}, { priority })).id);
    for (let round = 0; round < 3; round++) for (const p of [9, -7, 2]) await addTo(p);
    // The next insert would take offset 2^31: it renumbers all three bands first.
    await fx.redis.set(keys.seq, String(P31 - 1));
    for (const p of [2, 9, -7]) await addTo(p);
    expect(await runAll(name, 12)).toEqual([
      ...byPriority.get(-7)!,
      ...byPriority.get(2)!,
      ...byPriority.get(9)!,
    ]);
    expect(Number(await fx.redis.get(keys.seq))).toBeLessThan(100);
  });

  it('a prio set scored by an earlier version (counter shared with lease ids, past 2^31) keeps its order', async () => {
    const { name, keys, q } = setup();
    const legacy = (
      await q.addBulk(Array.from({ length: 3 }, () => ({ data: {}, opts: { priority: 4 } })))
    ).map((b) => b.id);
    // As the earlier version left them: offsets seq % 2^31 taken just before the counter wrapped,
    // and the shared counter since moved on by claims.
    for (const [i, id] of legacy.entries()) await fx.redis.zadd(keys.prio, 4 * P32 + P31 + (P31 - 3 + i), id);
    await fx.redis.set(keys.seq, String(P31 + 50));
    const later = (
      await q.addBulk(Array.from({ length: 2 }, () => ({ data: {}, opts: { priority: 4 } })))
    ).map((b) => b.id);
    expect(await runAll(name, 5)).toEqual([...legacy, ...later]);
  });
});

describe('fencing tokens over the life of a queue', () => {
  it('lease ids stay exact and unique past 10^14, continuing from a queue whose lease ids came from seq', async () => {
    const { keys, q } = setup();
    await fx.redis.set(keys.seq, String(1e14 - 5));
    await q.addBulk(Array.from({ length: 10 }, () => ({ data: {} })));
    const tokens = (await claim(keys, T, 10)).map((c) => c.token);
    const leases = tokens.map(leaseId);
    expect(new Set(tokens).size).toBe(10);
    expect(leases[0]!).toBeGreaterThan(BigInt(1e14 - 5));
    expect(leases).toEqual(leases.map((_, i) => leases[0]! + BigInt(i)));
  });

  it('near the lease-id maximum (2^53), a recovered job gets a new token and the stale holder is refused', async () => {
    const { keys, q } = setup();
    await fx.redis.set(keys.tokens, String(P53 - 10));
    const { id } = await q.add({});
    const [first] = await claim(keys, T, 1);
    await recover(keys, T + 1_001);
    const [second] = await claim(keys, T + 1_002, 1);
    expect(second!.id).toBe(id);
    expect(second!.token).not.toBe(first!.token);
    expect(leaseId(first!.token)).toBe(BigInt(P53 - 9));
    expect(leaseId(second!.token)).toBe(leaseId(first!.token) + 1n);
    expect(leaseId(second!.token)).toBeLessThanOrEqual(BigInt(P53));
    expect(await complete(keys, T + 1_003, id, first!.token)).toEqual([id, 'STALE:a:0']);
    expect(await complete(keys, T + 1_004, id, second!.token)).toEqual([]);
    expect((await q.getJob(id))?.state).toBe('completed');
  });
});

describe('generated ids over the life of a queue', () => {
  for (const start of [P31 - 5, P32 - 5, 1e14 - 5, P53 - 50]) {
    it(`stay unique and exact when the id counter passes ${start + 5}`, async () => {
      const { keys, q } = setup<{ n: number }>();
      await fx.redis.set(keys.ids, String(start));
      const added = await q.addBulk(Array.from({ length: 20 }, (_, n) => ({ data: { n } })));
      for (let n = 20; n < 25; n++) added.push(await q.add({ n }));
      const ids = added.map((a) => a.id);
      expect(added.every((a) => a.isNew)).toBe(true);
      expect(new Set(ids).size).toBe(25);
      expect(ids.map(BigInt)).toEqual(ids.map((_, i) => BigInt(start) + BigInt(i + 1)));
      expect((await q.counts()).waiting).toBe(25);
      for (const [n, id] of ids.entries()) expect((await q.getJob(id))?.data).toEqual({ n });
    });
  }
});
