/**
 * Handoffs (add-one.lua, claim.lua, worker/handoff.ts): a claim that leaves free slots registers its
 * fetcher as idle, and the next plain add leases its job to that fetcher inside the add and sends it
 * on the fetcher's channel. The script-level tests play the fetcher by hand (a claim, a subscriber);
 * the worker tests go through the public API, and one kills a real worker child with SIGKILL.
 */
import { EventEmitter } from 'node:events';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { DEFAULT_LEASE_MS } from '../../src/defaults.js';
import { Queue, Worker } from '../../src/index.js';
import { decodeClaim } from '../../src/scripts/replies.js';
import { type RedisClient, runScript, scripts } from '../../src/scripts/specs.js';
import { handoffChannel, type QueueKeys, queueKeys } from '../../src/store/keys.js';
import { type ClaimReply, Fetcher, type HandoffArgs } from '../../src/worker/fetcher.js';
import { parseHandoff } from '../../src/worker/handoff.js';
import { claimAnswer } from '../helpers/claim-answer.js';
import { claimArgs } from '../helpers/claim-args.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';
import { useWorkerChildren } from '../helpers/worker-children.js';

const fx = useRedis();
const open = closeAfterEach();
const startChild = useWorkerChildren();

/** claim.lua as fetcher `fetcher` would send it: registering when left with free slots. */
async function claim(
  keys: QueueKeys,
  fetcher: string,
  nonce: number,
  o: {
    count?: number;
    freeSlots?: number;
    withdraw?: number;
    registerMs?: number;
    units?: number;
    withdrawUnits?: number;
    received?: number;
    now?: number;
  } = {},
) {
  const reply = await runScript(
    fx.redis,
    scripts.claim,
    keys,
    claimArgs({
      now: o.now ?? '',
      count: o.count ?? 1,
      eventsMaxLen: 100,
      claimer: `${fetcher}.0`,
      nonce: String(nonce),
      freeSlots: o.freeSlots ?? '',
      fetcher,
      withdraw: o.withdraw === undefined ? '' : String(o.withdraw),
      registerMs: o.registerMs ?? 10_000,
      registerUnits: o.units ?? 1,
      withdrawUnits: o.withdrawUnits ?? 1,
      received: o.received ?? 0,
    }),
  );
  return decodeClaim(reply);
}

/** A subscriber on `fetcher`'s handoff channel, collecting what it receives. */
async function listen(keys: QueueKeys, fetcher: string) {
  const sub = new Redis(fx.url);
  const received: string[] = [];
  sub.on('smessage', (_channel: string, message: string) => received.push(message));
  await sub.ssubscribe(handoffChannel(keys, fetcher));
  return { received, close: () => sub.disconnect() };
}

function track<T extends { close(): Promise<unknown> }>(c: T): T {
  open.push(c as { close(): Promise<void> });
  return c;
}

function setUp() {
  const name = uniqueName('handoff');
  const queue = track(new Queue(name, { connection: fx.url }));
  return { name, queue, keys: queueKeys('surety', name) };
}

describe('handoff, script level', () => {
  it('a plain add leases its job to the registered idle fetcher and sends it on its channel', async () => {
    const { queue, keys } = setUp();
    const first = await claim(keys, 'f1', 1);
    expect(first.jobs).toEqual([]);
    expect(first.registered).toBe(1);
    expect(await fx.redis.zscore(keys.idle, 'f1|1|1')).not.toBeNull();
    const sub = await listen(keys, 'f1');
    try {
      const added = await queue.add({ n: 1 }, { id: 'a' });
      expect(added.state).toBe('active');
      await waitUntil(() => sub.received.length === 1, 'the handoff message');
      const handed = parseHandoff(sub.received[0]!)!;
      expect(handed.nonce).toBe(1);
      expect(handed.job.id).toBe('a');
      // The record sent is the one stored: leased (token), nothing counted (its start mark counts the
      // attempt), payload in place.
      const record = (await fx.redis.hget(keys.jobs, 'a'))!;
      expect(handed.job.record).toBe(record);
      expect(record).toMatch(/^a\|\d+\.\d+\|0\|/);
      expect(record.endsWith('{"n":1}')).toBe(true);
      const deadline = Number(await fx.redis.zscore(keys.active, 'a'));
      expect(deadline).toBeGreaterThan(Date.now() + DEFAULT_LEASE_MS - 5_000);
      expect(await fx.redis.zcard(keys.idle)).toBe(0); // the registration was used
      expect(await fx.redis.llen(keys.waiting)).toBe(0);
      expect((await queue.getJob('a'))?.state).toBe('active');
      // The fetcher's next claim withdraws the registration and gets the job back (a lost message).
      const next = await claim(keys, 'f1', 2, { withdraw: 1 });
      expect(next.replayed).toEqual([{ id: 'a', record }]);
      expect(next.jobs).toEqual([]);
    } finally {
      sub.close();
    }
  });

  it('with nobody on the channel (the worker is gone) the job waits and nothing is leased', async () => {
    const { queue, keys } = setUp();
    await claim(keys, 'gone', 1);
    const added = await queue.add({ n: 1 }, { id: 'b' });
    expect(added.state).toBe('waiting');
    expect(await fx.redis.lrange(keys.waiting, 0, -1)).toEqual(['b']);
    expect(await fx.redis.zscore(keys.active, 'b')).toBeNull();
    expect((await fx.redis.hget(keys.jobs, 'b'))!.startsWith('w||0|')).toBe(true);
    expect(await fx.redis.zcard(keys.idle)).toBe(0); // the dead registration is dropped
    // The next claim takes it as usual.
    const next = await claim(keys, 'other', 1, { registerMs: 0 });
    expect(next.jobs.map((j) => j.id)).toEqual(['b']);
  });

  it('no handoff when the job cannot start at once: the registration stays for the next add', async () => {
    const { name, queue, keys } = setUp();
    await claim(keys, 'f', 1);
    const sub = await listen(keys, 'f');
    try {
      expect((await queue.add({ n: 1 }, { delayMs: 60_000 })).state).toBe('delayed');
      expect((await queue.add({ n: 2 }, { ttlMs: 60_000 })).state).toBe('waiting'); // an expiry
      // The payload lives in the annex (over 512 bytes): not sent over pub/sub.
      expect((await queue.add({ big: 'x'.repeat(2_000) })).state).toBe('waiting');
      await fx.redis.del(keys.waiting);
      await fx.redis.hset(keys.meta, 'paused', '1');
      expect((await queue.add({ n: 3 })).state).toBe('waiting');
      await fx.redis.hdel(keys.meta, 'paused');
      // A job waits before it (FIFO): the new one queues behind it.
      expect((await queue.add({ n: 4 })).state).toBe('waiting');
      await fx.redis.del(keys.waiting);
      await fx.redis.hset(keys.meta, 'concurrency', '5');
      expect((await queue.add({ n: 5 })).state).toBe('waiting');
      await fx.redis.hdel(keys.meta, 'concurrency');
      await fx.redis.del(keys.waiting);
      expect(await fx.redis.zscore(keys.idle, 'f|1|1')).not.toBeNull();
      expect(sub.received).toEqual([]);
      // An id that exists: nothing written, the registration kept.
      const again = await track(new Queue(name, { connection: fx.url })).add({ n: 6 }, { id: 'dup' });
      expect(again.state).toBe('active');
      expect((await queue.add({ n: 7 }, { id: 'dup' })).isNew).toBe(false);
      expect(await fx.redis.zcard(keys.idle)).toBe(0);
    } finally {
      sub.close();
    }
  });

  it('a registration past its deadline is dropped, not used', async () => {
    const { queue, keys } = setUp();
    await claim(keys, 'old', 1, { now: Date.now() - 60_000, registerMs: 1_000 });
    const sub = await listen(keys, 'old');
    try {
      expect((await queue.add({ n: 1 })).state).toBe('waiting');
      expect(await fx.redis.exists(keys.idle)).toBe(0);
      expect(sub.received).toEqual([]);
    } finally {
      sub.close();
    }
  });

  it('a claim that withdraws a standing registration claims as usual and registers again', async () => {
    const { queue, keys } = setUp();
    await claim(keys, 'f', 1);
    await fx.redis.rpush(keys.waiting, 'ghost'); // not a job: skipped by the claim
    await fx.redis.del(keys.waiting);
    const again = await claim(keys, 'f', 2, { withdraw: 1 });
    expect(again.replayed).toEqual([]);
    expect(again.registered).toBe(1);
    expect(await fx.redis.zrange(keys.idle, 0, -1)).toEqual(['f|2|1']);
    // A claim that gets as many jobs as it can start does not register.
    await queue.add({ n: 1 }, { id: 'x' }); // nobody listens on f's channel: waits
    const full = await claim(keys, 'f', 3, { withdraw: 2 });
    expect(full.jobs.map((j) => j.id)).toEqual(['x']);
    expect(full.registered).toBe(0);
    expect(await fx.redis.zcard(keys.idle)).toBe(0);
  });
});

/** A record's fencing token: `<lease id>.<time>`. */
const tokenOf = (record: string) => record.split('|')[1]!;

describe('handoff, a registration for several jobs', () => {
  it('covers up to registerUnits jobs, capped by the free slots; each plain add takes one', async () => {
    const { queue, keys } = setUp();
    // 5 wanted, 2 can start now, up to 5 units: registered for the 2 free slots.
    const first = await claim(keys, 'f', 1, { count: 5, freeSlots: 2, units: 5 });
    expect(first.registered).toBe(2);
    expect(await fx.redis.zrange(keys.idle, 0, -1)).toEqual(['f|1|1', 'f|1|2']);
    const sub = await listen(keys, 'f');
    try {
      expect((await queue.add({ n: 1 }, { id: 'a' })).state).toBe('active');
      expect((await queue.add({ n: 2 }, { id: 'b' })).state).toBe('active');
      expect((await queue.add({ n: 3 }, { id: 'c' })).state).toBe('waiting'); // no unit left
      await waitUntil(() => sub.received.length === 2, 'both handoff messages');
      const handed = sub.received.map((m) => parseHandoff(m)!);
      expect(handed.map((h) => [h.nonce, h.job.id])).toEqual([
        [1, 'a'],
        [1, 'b'],
      ]);
      // Recorded together, for the withdrawing claim's replay: each with its own handoff's token.
      const [ta, tb] = handed.map((h) => tokenOf(h.job.record));
      expect(ta).not.toBe(tb);
      const rec = (await fx.redis.hget(keys.claims, 'f.t'))!;
      expect(rec).toMatch(/^1\|\d+\|\|\d+\.\d+ a\n\d+\.\d+ b$/);
      expect(rec.split('||')[1]).toBe(`${ta} a\n${tb} b`);
      // Both arrived: the withdrawing claim replays nothing and claims as usual.
      const next = await claim(keys, 'f', 2, { withdraw: 1, withdrawUnits: 2, received: 2, count: 3 });
      expect(next.replayed).toEqual([]);
      expect(next.jobs.map((j) => j.id)).toEqual(['c']);
      expect(next.registered).toBe(1); // 3 wanted, 1 claimed: up to 1 unit (units 1 here)
    } finally {
      sub.close();
    }
  });

  it('a claim withdrawing a registration with handoffs not yet seen returns them last and claims that many fewer', async () => {
    const { queue, keys } = setUp();
    await claim(keys, 'f', 1, { count: 3, units: 3 });
    const sub = await listen(keys, 'f');
    try {
      const a = await queue.add({ n: 1 }, { id: 'a' });
      expect(a.state).toBe('active');
      // A job with an expiry is never handed off: it waits, while 2 units still stand.
      expect((await queue.add({ n: 2 }, { id: 'b', ttlMs: 60_000 })).state).toBe('waiting');
      const record = (await fx.redis.hget(keys.jobs, 'a'))!;
      // The fetcher saw no message (received 0) of the 1 handoff: `a` is replayed, 1 job claimed of 2.
      const next = await claim(keys, 'f', 2, {
        withdraw: 1,
        withdrawUnits: 3,
        received: 0,
        count: 2,
        units: 3,
      });
      expect(next.replayed).toEqual([{ id: 'a', record }]);
      expect(next.jobs.map((j) => j.id)).toEqual(['b']);
      // 2 wanted = 1 claimed + 1 replayed: no slot left to register.
      expect(next.registered).toBe(0);
      expect(await fx.redis.zcard(keys.idle)).toBe(0); // the 2 units left were withdrawn
      // A replayed job that completed meanwhile is not returned (only jobs still under that lease).
      await claim(keys, 'f', 3, { count: 1, units: 1 });
      await queue.add({ n: 3 }, { id: 'c' });
      const rc = (await fx.redis.hget(keys.jobs, 'c'))!;
      await runScript(fx.redis, scripts.release, keys, { wakeChannel: keys.wakeChannel, eventsMaxLen: 0 }, [
        { id: 'c', token: tokenOf(rc) },
      ]);
      const after = await claim(keys, 'f', 4, { withdraw: 3, withdrawUnits: 1, received: 0, count: 1 });
      expect(after.replayed).toEqual([]);
      expect(after.jobs.map((j) => j.id)).toEqual(['c']); // claimed afresh, with a new token
      expect(tokenOf(after.jobs[0]!.record)).not.toBe(tokenOf(rc));
    } finally {
      sub.close();
    }
  });

  it("a withdrawing claim also replays a handoff the previous version's producer recorded (times only)", async () => {
    const { queue, keys } = setUp();
    await claim(keys, 'f', 1, { count: 2, units: 2 });
    const sub = await listen(keys, 'f');
    expect((await queue.add({ n: 1 }, { id: 'a' })).state).toBe('active'); // the fetcher never sees it
    sub.close();
    const record = (await fx.redis.hget(keys.jobs, 'a'))!;
    const [, time] = tokenOf(record)!.split('.');
    // Rewritten as that version wrote it: field `f.h`, a `<time> <id>` line.
    const rec = (await fx.redis.hget(keys.claims, 'f.t'))!;
    await fx.redis.hdel(keys.claims, 'f.t');
    await fx.redis.hset(keys.claims, 'f.h', rec.replace(/\|\|.*$/s, `||${time} a`));
    const next = await claim(keys, 'f', 2, { withdraw: 1, withdrawUnits: 2, received: 0, count: 2 });
    expect(next.replayed).toEqual([{ id: 'a', record }]);
  });
});

describe('handoff, after a failover that lost the last writes', () => {
  it('a job id given again after the rollback gets a new token: the old holder cannot complete it', async () => {
    const { queue, keys } = setUp();
    await claim(keys, 'f', 1, { count: 3, units: 3 });
    const sub = await listen(keys, 'f');
    try {
      expect((await queue.add({ n: 1 })).state).toBe('active'); // the registration's first handoff
      // Every key of the queue as a replica has it: the next add's writes never reach it.
      const names = await fx.redis.keys(`${keys.tag}:*`);
      const saved = await Promise.all(names.map(async (k) => [k, await fx.redis.dumpBuffer(k)] as const));
      const lost = await queue.add({ n: 2 });
      expect(lost.state).toBe('active');
      const lostToken = tokenOf((await fx.redis.hget(keys.jobs, lost.id))!);
      // Failover: the replica, promoted, lacks that add (ids and lease-id counters rolled back too).
      await fx.redis.del(...names);
      for (const [k, v] of saved) if (v) await fx.redis.restore(k, 0, v);
      const ms = async () => {
        const [sec, micro] = await fx.redis.time();
        return Number(sec) * 1000 + Math.floor(Number(micro) / 1000);
      };
      const t0 = await ms();
      await waitUntil(async () => (await ms()) > t0 + 1, 'a later millisecond on the Redis clock');
      const again = await queue.add({ n: 3 });
      expect(again.id).toBe(lost.id); // the same generated id, handed off with the same unit
      expect(again.state).toBe('active');
      const token = tokenOf((await fx.redis.hget(keys.jobs, again.id))!);
      expect(token).not.toBe(lostToken);
      // The worker that ran the lost job completes it late, with the token it got: refused.
      const refused = await runScript(
        fx.redis,
        scripts.complete,
        keys,
        {
          now: '',
          keepCount: 10,
          keepAgeMs: 60_000,
          limit: 100,
          doneChannel: keys.doneChannel,
          wakeChannel: keys.wakeChannel,
          eventsMaxLen: 0,
          starts: '',
        },
        [{ id: lost.id, token: lostToken, result: '' }],
      );
      expect(refused).toEqual([lost.id, expect.stringMatching(/^STALE:a:/)]);
      expect((await queue.getJob(again.id))?.state).toBe('active');
    } finally {
      sub.close();
    }
  });
});

/**
 * Serial adds, each run before the next, until the worker stands registered for `units` jobs or more:
 * a fetcher asks for 1 unit at first and doubles while its registrations get used (each registration
 * made while the job that used the last one still runs).
 */
async function warmUp(queue: Queue, keys: QueueKeys, units: number, data: object): Promise<void> {
  for (let i = 0; i < 10 && (await fx.redis.zcard(keys.idle)) < units; i++) {
    const added = await queue.add(data);
    await waitUntil(async () => (await queue.getJob(added.id))?.state === 'completed', 'warm-up job done');
    await waitUntil(async () => (await fx.redis.zcard(keys.idle)) > 0, 'registered again');
  }
  await waitUntil(async () => (await fx.redis.zcard(keys.idle)) >= units, `registered for ${units}`);
}

describe('handoff, through the worker', () => {
  it('an idle worker starts each plain add by handoff and runs it exactly once', async () => {
    const { name, queue, keys } = setUp();
    const runs = new Map<string, number>();
    const worker = track(
      new Worker(
        name,
        async (job) => {
          runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
          return job.data;
        },
        { connection: fx.url, concurrency: 2 },
      ),
    );
    const states: string[] = [];
    for (let i = 0; i < 20; i++) {
      await waitUntil(
        async () => (await fx.redis.zcard(keys.idle)) >= 1,
        `the worker registered ${JSON.stringify(await fx.redis.zrange(keys.idle, 0, -1))} ${i}`,
      );
      const added = await queue.add({ i });
      states.push(added.state);
      await waitUntil(
        async () => (await queue.getJob(added.id))?.state === 'completed',
        `job ${i} completed`,
      );
    }
    expect(states).toEqual(Array(20).fill('active'));
    expect([...runs.values()]).toEqual(Array(20).fill(1));
    await worker.close();
    // Closing withdrew the registration.
    expect(await fx.redis.zcard(keys.idle)).toBe(0);
  });

  it('an idle worker takes serial adds by handoff without a claim per job', async () => {
    const { name, queue } = setUp();
    const runs = new Map<string, number>();
    const worker = track(
      new Worker(name, async (job) => void runs.set(job.id, (runs.get(job.id) ?? 0) + 1), {
        connection: fx.url,
        concurrency: 10,
      }),
    );
    await worker.start();
    const claimsBefore = worker.diagnostics().lanes.reduce((n, l) => n + l.claimsSent, 0);
    const states: string[] = [];
    for (let i = 0; i < 80; i++) states.push((await queue.add({ i })).state);
    await waitUntil(() => runs.size === 80, 'all 80 jobs ran');
    const claims = worker.diagnostics().lanes.reduce((n, l) => n + l.claimsSent, 0) - claimsBefore;
    // Registrations grow (1, 2, 4, then its free slots) while they get used, and the fetcher claims
    // again when fewer than half the units are left: measured 16 claims for the 80 jobs, where a
    // registration for one job cost a claim per job (about 80).
    expect(claims).toBeLessThanOrEqual(30);
    expect(states.filter((s) => s === 'active').length).toBeGreaterThanOrEqual(60);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
  });

  it('a worker whose claims keep returning one job (a group limited to 1) keeps its registrations at one unit', async () => {
    const { name, queue, keys } = setUp();
    await queue.setGroupLimits({ concurrency: 1 });
    await queue.addBulk(Array.from({ length: 30 }, (_, n) => ({ data: { n }, opts: { group: 'g' } })));
    let done = 0;
    const worker = track(new Worker(name, async () => void done++, { connection: fx.url, concurrency: 20 }));
    // Each claim gets the group's one job and leaves 19 slots free: a registration for all of them
    // would write 19 members per claim, for the next claim to withdraw unused.
    let most = 0;
    await waitUntil(async () => {
      most = Math.max(most, await fx.redis.zcard(keys.idle));
      return done === 30;
    }, 'the group drained');
    expect(most).toBeLessThanOrEqual(1);
    await worker.close();
  });

  it('a paused worker withdraws its registration before pause() resolves: an add then waits', async () => {
    const { name, queue, keys } = setUp();
    const ran: string[] = [];
    const worker = track(
      new Worker(name, async (job) => void ran.push(job.id), { connection: fx.url, concurrency: 4 }),
    );
    await warmUp(queue, keys, 2, { n: 0 });
    ran.length = 0;
    expect(await fx.redis.zcard(keys.idle)).toBeGreaterThan(0); // registered, idle
    await worker.pause();
    // No add is handed to a paused worker (it answered 'active', then the worker handed it back).
    expect(await fx.redis.zcard(keys.idle)).toBe(0);
    const first = await queue.add({ n: 1 });
    expect(first.state).toBe('waiting');
    expect((await queue.add({ n: 2 })).state).toBe('waiting');
    expect(ran).toEqual([]);
    worker.resume();
    await waitUntil(() => ran.length === 2, 'both ran after resume');
  });

  it('a job handed off while its worker closes goes back to waiting with no attempt spent', async () => {
    const states: string[] = [];
    for (let round = 0; round < 6; round++) {
      const { name, queue, keys } = setUp();
      let release!: () => void;
      const blocked = new Promise<void>((r) => {
        release = r;
      });
      const worker = new Worker<{ hold: boolean }>(
        name,
        async (job) => (job.data.hold ? blocked : undefined),
        {
          connection: fx.url,
          concurrency: 3,
        },
      );
      // Registered for 2 of its 3 slots: one handoff leaves one unit standing.
      await warmUp(queue, keys, 2, { hold: false });
      await queue.add({ hold: true }, { id: 'holder' }); // keeps close() waiting, one slot still free
      await waitUntil(async () => (await fx.redis.zcard(keys.idle)) === 1, 'one unit left');
      // Racing the close: handed off before the worker left its channel (then handed back), or not.
      let added: { state: string };
      let closing: Promise<void>;
      if (round % 2 === 0) {
        const adding = queue.add({ hold: false }, { id: 'late' });
        closing = worker.close();
        added = await adding;
      } else {
        closing = worker.close();
        added = await queue.add({ hold: false }, { id: 'late' });
      }
      states.push(added.state);
      release();
      await closing;
      const job = await queue.getJob('late');
      expect(job?.state, `round ${round}, add answered ${added.state}`).toBe('waiting');
      expect(job?.attempts).toBe(0);
      expect(await fx.redis.zscore(keys.active, 'late')).toBeNull();
    }
    // Which way each round went depends on which of two connections Redis reads first; both must end
    // as asserted above. (An `active` answer is a job handed off and then handed back by the close.)
    expect(states).toHaveLength(6);
  });

  it('a worker killed while registered loses no job: the next add waits for another worker', async () => {
    const { name, queue, keys } = setUp();
    const { child, messages } = startChild(fx.url, name, 30_000);
    await waitUntil(() => messages.some((m) => m.ready), 'the child worker is ready');
    await waitUntil(async () => (await fx.redis.zcard(keys.idle)) >= 1, 'the child registered');
    const [member] = await fx.redis.zrange(keys.idle, 0, 0);
    const channel = handoffChannel(keys, member!.split('|')[0]!);
    child.kill('SIGKILL');
    // Redis closes the child's connections: its channel has no subscriber left.
    await waitUntil(async () => {
      const [, n] = (await fx.redis.call('PUBSUB', 'SHARDNUMSUB', channel)) as [string, number];
      return n === 0;
    }, 'the dead worker unsubscribed');
    const added = await queue.add({ n: 1 });
    expect(added.state).toBe('waiting');
    const done: string[] = [];
    track(new Worker(name, async (job) => void done.push(job.id), { connection: fx.url }));
    await waitUntil(() => done.includes(added.id), 'another worker ran the job');
    expect((await queue.getJob(added.id))?.attempts).toBe(1);
  });
});

describe('handoff, the fetcher keeps the first copy of a handed job', () => {
  function fetcherHarness() {
    const subscriber = Object.assign(new EventEmitter(), {
      ssubscribe: async () => 1,
      sunsubscribe: async () => 1,
    }) as unknown as RedisClient;
    const claims: { handoff: HandoffArgs; resolve: (r: ClaimReply) => void }[] = [];
    const got: string[] = [];
    const fetcher = new Fetcher({
      subscriber,
      wakeChannel: 'wake',
      handoffChannel: (f) => `hand:${f}`,
      pollIntervalMs: 60_000,
      freeSlots: () => 1,
      claim: (_count, _ticket, handoff) => new Promise((resolve) => claims.push({ handoff, resolve })),
      onJobs: (jobs) => got.push(...jobs.map((j) => j.record)),
      onCancelled: () => {},
      onError: (err) => {
        throw err;
      },
    });
    const reply = claimAnswer;
    const handoff = (nonce: number, id: string, record: string) =>
      (subscriber as unknown as EventEmitter).emit(
        'smessage',
        `hand:${claims[0]!.handoff.fetcher}`,
        `${nonce}|0|${id.length}|${id}${record}`,
      );
    return { fetcher, claims, got, reply, handoff };
  }
  const tick = () => new Promise((r) => setImmediate(r));

  it('the message first, then the reply of a claim that withdrew the registration', async () => {
    const h = fetcherHarness();
    await h.fetcher.start();
    expect(h.claims[0]!.handoff.registerMs).toBe(120_000);
    h.claims[0]!.resolve(h.reply({ registered: 1 }));
    await tick();
    h.handoff(1, 'j', 'a|7.1|1|rec');
    expect(h.got).toEqual(['a|7.1|1|rec']);
    // It claims again at once (to register again); that claim withdraws nothing: the message said so.
    expect(h.claims).toHaveLength(2);
    expect(h.claims[1]!.handoff.withdraw).toBe('');
    await h.fetcher.stop();
  });

  it('the reply first (the claim was sent before the message came), then the message: one run', async () => {
    const h = fetcherHarness();
    await h.fetcher.start();
    h.claims[0]!.resolve(h.reply({ registered: 1 }));
    await tick();
    h.fetcher.wake(); // e.g. a `w` message: a claim that withdraws registration 1
    expect(h.claims[1]!.handoff.withdraw).toBe('1');
    h.claims[1]!.resolve(h.reply({ replayed: [{ id: 'j', record: 'a|7.1|1|rec' }] }));
    await tick();
    h.handoff(1, 'j', 'a|7.1|1|rec');
    expect(h.got).toEqual(['a|7.1|1|rec']);
    await h.fetcher.stop();
  });

  it('registered for 4: no claim per job; claims again when fewer than half its units are left', async () => {
    const h = fetcherHarness();
    await h.fetcher.start();
    h.claims[0]!.resolve(h.reply({ registered: 4 }));
    await tick();
    h.handoff(1, 'j1', 'a|7.5|1|r1');
    h.handoff(1, 'j2', 'a|8.5|1|r2');
    expect(h.claims).toHaveLength(1); // 2 of 4 left: no claim
    h.handoff(1, 'j3', 'a|9.5|1|r3');
    expect(h.claims).toHaveLength(2);
    expect(h.claims[1]!.handoff).toMatchObject({ withdraw: '1', withdrawUnits: 4, received: 3 });
    // A fourth arrives while that claim is in flight: no second claim.
    h.handoff(1, 'j4', 'a|10.5|1|r4');
    expect(h.claims).toHaveLength(2);
    // The reply replays j4 (sent before its message came) and j5 (whose message never comes): j4 runs
    // once, j5 runs from the reply; a late copy of j5's message is dropped.
    h.claims[1]!.resolve(
      h.reply({
        registered: 1,
        replayed: [
          { id: 'j4', record: 'a|10.5|1|r4' },
          { id: 'j5', record: 'a|11.5|1|r5' },
        ],
      }),
    );
    await tick();
    h.handoff(1, 'j5', 'a|11.5|1|r5');
    expect(h.got).toEqual(['a|7.5|1|r1', 'a|8.5|1|r2', 'a|9.5|1|r3', 'a|10.5|1|r4', 'a|11.5|1|r5']);
    // The same id under another lease (a later handoff of a job added again) is a new job.
    h.handoff(2, 'j1', 'a|12.7|1|r1b');
    expect(h.got).toHaveLength(6);
    await h.fetcher.stop();
  });

  it('stop withdraws a standing registration and takes the job a handoff took with it', async () => {
    const h = fetcherHarness();
    await h.fetcher.start();
    h.claims[0]!.resolve(h.reply({ registered: 1 }));
    await tick();
    await h.fetcher.stop();
    expect(h.claims).toHaveLength(2);
    expect(h.claims[1]!.handoff).toMatchObject({ withdraw: '1', registerMs: 0 });
    h.claims[1]!.resolve(h.reply({ replayed: [{ id: 'j', record: 'r' }] }));
    await tick();
    expect(h.got).toEqual(['r']); // the worker, closing, hands it back (runner.accept)
  });
});
