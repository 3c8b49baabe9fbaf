/**
 * Network faults between a worker (or a producer) and Redis, made real by a loopback TCP proxy
 * (chaos/tcp-proxy.ts): resets (connections destroyed, new ones refused for a while) and black holes
 * (connections open, no byte moves, then everything delivered). Jobs are added directly, not through
 * the proxy. The promise under test: a claim (or an add) either reaches its caller or never runs, so
 * no job is leased to nobody and none ends dead without having run (issue 12, defect 3).
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { TcpProxy } from '../../chaos/tcp-proxy.js';
import { ConnectionError, Queue, Worker, type WorkerOptions } from '../../src/index.js';
import { repairSchedules } from '../../src/queue/schedules.js';
import { connect } from '../../src/redis/connection.js';
import { offlineQueues } from '../../src/redis/in-flight.js';
import { runScript, scripts } from '../../src/scripts/specs.js';
import { decodeClaimed } from '../../src/store/job-record.js';
import { queueKeys } from '../../src/store/keys.js';
import { claimArgs } from '../helpers/claim-args.js';
import { runScriptAt } from '../helpers/run-script-at.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const proxies: TcpProxy[] = [];
// Registered before closeAfterEach: after-hooks run in reverse order, so workers and queues close
// first (a proxy's close waits for its connections, which a live client would keep reopening).
afterEach(async () => {
  await Promise.all(proxies.splice(0).map((p) => p.close()));
});
const open = closeAfterEach();

async function proxy(): Promise<{ proxy: TcpProxy; url: string }> {
  const target = new URL(fx.url);
  const p = await TcpProxy.start({ host: '127.0.0.1', port: Number(target.port) });
  proxies.push(p);
  target.port = String(p.port);
  return { proxy: p, url: target.toString() };
}

/** Jobs end dead quickly if they are leased to nobody: 1 attempt, a 1 s lease, a fast recovery loop. */
const JOB = { maxAttempts: 1, leaseMs: 1_000 } as const;
const WORKER: WorkerOptions = { pollIntervalMs: 20, recoverIntervalMs: 100 };

/** A worker behind `url` that counts the runs of each job. */
function countingWorker(name: string, url: string, opts: WorkerOptions = {}) {
  const runs = new Map<string, number>();
  const worker = new Worker(
    name,
    (job) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
      return job.id;
    },
    { ...WORKER, ...opts, connection: url },
  );
  worker.on('error', () => {}); // connection errors are expected here; outcomes are checked below
  open.push(worker);
  return { worker, runs };
}

/** Waits until every id has finished, then checks each completed after exactly one run. */
async function expectAllRanOnce(queue: Queue, ids: string[], runs: Map<string, number>) {
  await waitUntil(
    async () => {
      const jobs = await Promise.all(ids.map((id) => queue.getJob(id)));
      return jobs.every((j) => j && (j.state === 'completed' || j.state === 'dead'));
    },
    'every job finished',
    20_000,
  );
  const jobs = await Promise.all(ids.map((id) => queue.getJob(id)));
  const dead = jobs.filter((j) => j?.state === 'dead').map((j) => `${j!.id}: ${j!.errors[0]?.name}`);
  expect(dead).toEqual([]);
  for (const j of jobs) {
    expect(j!.attempts, j!.id).toBe(1);
    expect(runs.get(j!.id), j!.id).toBe(1);
  }
}

/**
 * A worker behind a proxy with one slot, busy with job `first` until `releaseFirst()`: jobs added
 * meanwhile wait, and the claim that leases the next one runs when `first` finishes, so a test can
 * black-hole the replies just before and catch that claim's reply in flight.
 */
async function busyWorker() {
  const { proxy: p, url } = await proxy();
  const name = uniqueName();
  const queue = new Queue(name, { connection: fx.url });
  open.push(queue);
  let releaseFirst = () => {};
  const firstDone = new Promise<void>((r) => {
    releaseFirst = r;
  });
  const runs = new Map<string, number>();
  const worker = new Worker(
    name,
    async (job) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
      if (job.id === 'first') await firstDone;
      return job.id;
    },
    { ...WORKER, concurrency: 1, prefetch: 0, connection: url },
  );
  worker.on('error', () => {});
  open.push(worker);
  await queue.add({}, { ...JOB, leaseMs: 30_000, id: 'first' });
  await waitUntil(() => runs.get('first') === 1, 'the first job running');
  return { p, queue, runs, releaseFirst };
}

describe('a worker behind a network that fails', () => {
  it('jobs added while its connections are reset and refused for 3 s all run once, none ends dead unrun', async () => {
    const { proxy: p, url } = await proxy();
    const name = uniqueName();
    const queue = new Queue(name, { connection: fx.url });
    open.push(queue);
    const { worker, runs } = countingWorker(name, url, { concurrency: 4 });
    await worker.start();
    await queue.add({}, { ...JOB, id: 'before' });
    // Completed before the cut: an outage longer than its lease would otherwise rightly end it dead.
    await waitUntil(async () => (await queue.getJob('before'))?.state === 'completed', 'the first job done');

    p.reset(3_000);
    const ids: string[] = ['before'];
    const until = Date.now() + 3_000;
    for (let i = 0; Date.now() < until; i++) {
      ids.push(`blip-${i}`);
      await queue.add({}, { ...JOB, id: `blip-${i}` });
      await new Promise((r) => setTimeout(r, 25)); // spreads the adds over the outage (pacing only)
    }
    expect(ids.length).toBeGreaterThan(20);
    await expectAllRanOnce(queue, ids, runs);
  });

  it('jobs added while its connections are black-holed for longer than a lease all run once when healed', async () => {
    const { proxy: p, url } = await proxy();
    const name = uniqueName();
    const queue = new Queue(name, { connection: fx.url });
    open.push(queue);
    const { worker, runs } = countingWorker(name, url);
    await worker.start();
    p.blackhole();
    const ids = Array.from({ length: 20 }, (_, i) => `hole-${i}`);
    for (const id of ids) await queue.add({}, { ...JOB, id });
    // Held for 2.5 leases: nothing may be claimed meanwhile (the claims are held in the proxy).
    const until = Date.now() + 2_500;
    await waitUntil(() => Date.now() > until, 'the black hole to last 2.5 s', 5_000);
    expect((await queue.counts()).waiting).toBe(20);
    p.heal();
    await expectAllRanOnce(queue, ids, runs);
  });

  it('a claim that ran but whose reply was lost hands its jobs to the worker on retry, no attempt lost', async () => {
    const { p, queue, runs, releaseFirst } = await busyWorker();
    // The worker's only slot is busy, so these wait; the next claim comes when `first` finishes.
    const ids = ['second', 'third'];
    for (const id of ids) await queue.add({}, { ...JOB, id });
    // From now on requests reach Redis but replies do not come back.
    p.blackhole('toClient');
    releaseFirst();
    // `first`'s completion and the next claim run in Redis: `second` is leased, its reply held.
    await waitUntil(async () => (await queue.getJob('second'))?.state === 'active', 'second leased');
    p.reset(); // the held reply is lost with the connection
    p.heal(); // new connections work both ways
    await expectAllRanOnce(queue, ['first', ...ids], runs);
  });

  it('a claim whose reply is lost for longer than the lease: the job goes back free, and runs', async () => {
    // Chaos found this one (a single-attempt job dead unrun after a 2.4 s netReset with a 1 s lease):
    // the retried claim comes too late to replay, so recovery must not charge the lost lease (the
    // job's start was never marked).
    const { p, queue, runs, releaseFirst } = await busyWorker();
    await queue.add({}, { ...JOB, id: 'lost-reply' }); // waits: the only slot is busy
    p.blackhole('toClient'); // requests reach Redis, replies do not come back
    releaseFirst(); // the next claim runs in Redis and leases `lost-reply`; its reply is held
    await waitUntil(async () => (await queue.getJob('lost-reply'))?.state === 'active', 'leased, reply held');
    // The lease (1 s) runs out while the reply is held; recovery (any process) puts the job back.
    await waitUntil(
      async () => {
        await queue.recoverExpired();
        return (await queue.getJob('lost-reply'))?.state === 'waiting';
      },
      'recovered while the reply is still held',
      5_000,
    );
    expect(runs.get('lost-reply')).toBeUndefined();
    p.reset(); // the held reply is lost with the connection
    p.heal();
    await waitUntil(
      async () => (await queue.getJob('lost-reply'))?.state === 'completed',
      'completed',
      20_000,
    );
    expect((await queue.getJob('first'))?.state).toBe('completed');
    const job = (await queue.getJob('lost-reply'))!;
    expect(runs.get('lost-reply')).toBe(1);
    expect(job).toMatchObject({ attempts: 1, maxAttempts: 1, result: 'lost-reply', errors: [] });
  });
});

describe('reads on the worker path behind a network that fails', () => {
  it('job.parentResults() whose reply is lost fails the attempt instead of hanging it (and its lease) forever', async () => {
    const { proxy: p, url } = await proxy();
    const name = uniqueName();
    const queue = new Queue(name, { connection: fx.url });
    open.push(queue);
    await queue.add({}, { id: 'parent' });
    let started = () => {};
    const running = new Promise<void>((r) => {
      started = r;
    });
    let go = () => {};
    const gate = new Promise<void>((r) => {
      go = r;
    });
    const outcomes: string[] = [];
    const worker = new Worker(
      name,
      async (job) => {
        if (job.id === 'parent') return 'p';
        started();
        await gate;
        return job.parentResults().then(
          () => 'read',
          (e: { code?: string }) => {
            outcomes.push(e.code ?? 'no code');
            throw e;
          },
        );
      },
      { ...WORKER, connection: url },
    );
    worker.on('error', () => {});
    open.push(worker);
    await queue.add({}, { id: 'child', dependsOn: ['parent'] });
    await running;
    p.blackhole('toClient');
    go();
    await waitUntil(() => p.heldBytes > 0, 'the read sent, its reply held');
    p.reset();
    p.heal();
    await waitUntil(() => outcomes.length > 0, 'parentResults settled', 5_000);
    expect(outcomes).toEqual(['ERR_CONNECTION']);
  });

  it("the recovery loop's schedule repair settles when its read's reply is lost, so the loop goes on", async () => {
    const { proxy: p, url } = await proxy();
    const client = connect(url, 'worker').client; // Surety's options: nothing is re-sent blindly
    try {
      await client.ping();
      p.blackhole('toClient');
      const repair = repairSchedules(client, queueKeys('surety', uniqueName())).then(
        () => 'settled',
        (e: { code?: string }) => e.code,
      );
      await waitUntil(() => p.heldBytes > 0, 'the read sent, its reply held');
      p.reset();
      p.heal();
      expect(await Promise.race([repair, new Promise((r) => setTimeout(() => r('hung'), 5_000))])).toBe(
        'ERR_CONNECTION',
      );
    } finally {
      client.disconnect();
    }
  });
});

describe('closing behind a network that fails', () => {
  it('worker.close() returns while its connections are black-holed (no reply ever comes)', async () => {
    const { proxy: p, url } = await proxy();
    const { worker } = countingWorker(uniqueName(), url);
    await worker.start();
    p.blackhole();
    const started = Date.now();
    const closed = await Promise.race([
      worker.close({ timeoutMs: 200 }).then(() => true),
      new Promise<false>((r) => setTimeout(() => r(false), 10_000)),
    ]);
    expect(closed).toBe(true);
    // The close timeout, the outcome grace, then each connection's QUIT wait (1 s) before dropping it.
    expect(Date.now() - started).toBeLessThan(6_000);
  });
});

describe('a producer behind a network that fails', () => {
  it('an add made while the connection is down is refused and never runs, not even once it is back', async () => {
    const { proxy: p, url } = await proxy();
    const queue = new Queue(uniqueName(), { connection: url });
    open.push(queue);
    await queue.add({}, { id: 'warm-up' });
    p.reset(1_500);
    const client = (queue as unknown as { conn: { client: Redis } }).conn.client;
    await waitUntil(() => client.status !== 'ready', 'the producer noticed the reset');
    // Made while reconnecting: ioredis holds it in its offline queue; the next refused attempt closes.
    const err = await queue.add({ n: 1 }, { id: 'during' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectionError);
    expect((err as Error).message).toMatch(/never ran/);
    // Once the connection is back, the refused add must not have been sent after all.
    await waitUntil(
      () =>
        queue.add({}, { id: 'after' }).then(
          () => true,
          () => false,
        ),
      'the connection back',
    );
    expect(await queue.getJob('during')).toBeNull();
  });

  it('an add waiting for replicas (durability) whose WAIT reply is lost rejects with a typed ConnectionError', async () => {
    const { proxy: p, url } = await proxy();
    // No replica exists: WAIT blocks on the server for its timeout, long enough to cut it.
    const queue = new Queue(uniqueName(), {
      connection: url,
      durability: { waitReplicas: 1, timeoutMs: 3_000 },
    });
    open.push(queue);
    const outcome = queue.add({}, { id: 'durable' }).then(
      () => 'resolved',
      (e: { code?: string }) => e.code,
    );
    await waitUntil(
      async () => /cmd=wait/.test(String(await fx.redis.call('CLIENT', 'LIST'))),
      'the WAIT blocking on the server',
    );
    p.reset();
    p.heal();
    expect(await Promise.race([outcome, new Promise((r) => setTimeout(() => r('hung'), 6_000))])).toBe(
      'ERR_CONNECTION',
    );
  });

  it("the queue's admin reads reject with ConnectionError when their reply is lost, instead of hanging", async () => {
    const { proxy: p, url } = await proxy();
    const queue = new Queue(uniqueName(), { connection: url });
    open.push(queue);
    await queue.add({}, { id: 'j' });
    const reads = {
      getJob: () => queue.getJob('j'),
      counts: () => queue.counts(),
      getJobs: () => queue.getJobs('waiting'),
      isPaused: () => queue.isPaused(),
      getGlobalConcurrency: () => queue.getGlobalConcurrency(),
    };
    const client = (queue as unknown as { conn: { client: Redis } }).conn.client;
    for (const [name, read] of Object.entries(reads)) {
      await waitUntil(() => client.status === 'ready', `${name}: connected again`);
      p.blackhole('toClient');
      const outcome = read().then(
        () => 'settled',
        (e: { code?: string }) => e.code,
      );
      await waitUntil(() => p.heldBytes > 0, `${name}: its request sent, its reply held`);
      p.reset();
      p.heal();
      expect([
        name,
        await Promise.race([outcome, new Promise((r) => setTimeout(() => r('hung'), 5_000))]),
      ]).toEqual([name, 'ERR_CONNECTION']);
    }
  });

  it('an admin read made while the connection is down waits for the reconnect and answers', async () => {
    const { proxy: p, url } = await proxy();
    const queue = new Queue(uniqueName(), { connection: url });
    open.push(queue);
    await queue.add({}, { id: 'j' });
    p.reset(1_000);
    const client = (queue as unknown as { conn: { client: Redis } }).conn.client;
    await waitUntil(() => client.status !== 'ready', 'the producer noticed the reset');
    // Not sent yet: unlike an add, a read is left in the offline queue across the refused reconnects.
    expect((await queue.getJob('j'))?.id).toBe('j');
    expect((await queue.counts()).waiting).toBe(1);
  });

  it('ioredis keeps unsent calls in an offline queue of the shape untilClosed withdraws them from', async () => {
    const client = new Redis(fx.url, { lazyConnect: true });
    const queues = offlineQueues(client);
    expect(queues).toHaveLength(1);
    const sent = client.ping();
    expect(queues![0]!.toArray().map((item) => item.command?.promise)).toContain(sent);
    await sent;
    client.disconnect();
  });
});

describe('claim.lua with a ticket (claimer, nonce)', () => {
  const claim = (queue: Queue, now: number, count: number, claimer: string, nonce: string) =>
    runScript(
      fx.redis,
      scripts.claim,
      queue.keys,
      claimArgs({ now, count, defaultLeaseMs: 1_000, claimer, nonce }),
    ) as Promise<string[]>;
  const ids = (reply: string[]) => reply.filter((_, i) => i >= 6 && i % 2 === 0);

  it('the same ticket again returns the jobs of that claim still under its leases, and claims nothing new', async () => {
    const queue = new Queue(uniqueName(), { connection: fx.url });
    open.push(queue);
    for (const id of ['a', 'b', 'c', 'd']) await queue.add({ big: 'x'.repeat(600) }, { id });
    const now = Date.now();
    const first = await claim(queue, now, 2, 'w1.0', '7');
    expect(ids(first)).toEqual(['a', 'b']);
    const again = await claim(queue, now + 5, 2, 'w1.0', 'r7');
    expect(again.slice(6)).toEqual(first.slice(6)); // same ids, same records (payloads put in place)
    expect((await queue.counts()).waiting).toBe(2);
    // `a` is no longer active under that lease (here: marked completed): it is not handed out again.
    await fx.redis.hset(
      queue.keys.jobs,
      'a',
      (await fx.redis.hget(queue.keys.jobs, 'a'))!.replace(/^a\|/, 'c|'),
    );
    expect(ids(await claim(queue, now + 6, 2, 'w1.0', 'r7'))).toEqual(['b']);
    // A new nonce (or another claimer) is a new claim.
    expect(ids(await claim(queue, now + 7, 1, 'w1.0', '8'))).toEqual(['c']);
    expect(ids(await claim(queue, now + 8, 1, 'w1.1', 'r7'))).toEqual(['d']);
  });

  it('a retry returns only the leases its claim gave, not a later lease of the same job in the same ms', async () => {
    const queue = new Queue(uniqueName(), { connection: fx.url });
    open.push(queue);
    for (const id of ['a', 'b']) await queue.add({}, { id });
    const now = Date.now();
    const first = await claim(queue, now, 2, 'w1.0', '1');
    expect(ids(first)).toEqual(['a', 'b']);
    // `a` fails at once and another worker leases it again within the same millisecond.
    const token = decodeClaimed(first[7]!).token;
    const error = JSON.stringify({ name: 'Error', message: 'boom' });
    await runScriptAt(fx.redis, queue.keys, scripts.fail, now, {}, [
      { id: 'a', token, retryDelayMs: 0, error },
    ]);
    const other = await claim(queue, now, 1, 'w2.0', '1');
    expect(ids(other)).toEqual(['a']);
    // w1's retry gets `b` only: `a` is w2's now, and w1 must never hold w2's token.
    expect(ids(await claim(queue, now, 2, 'w1.0', 'r1'))).toEqual(['b']);
  });

  it('a ticket whose claim never ran claims afresh; a claim without a claimer records nothing', async () => {
    const queue = new Queue(uniqueName(), { connection: fx.url });
    open.push(queue);
    for (const id of ['a', 'b']) await queue.add({}, { id });
    expect(ids(await claim(queue, Date.now(), 1, '', ''))).toEqual(['a']);
    expect(await fx.redis.hlen(queue.keys.claims)).toBe(0);
    expect(ids(await claim(queue, Date.now(), 1, 'w2.0', 'r1'))).toEqual(['b']); // never ran: claims afresh
    expect(await fx.redis.hget(queue.keys.claims, 'w2.0')).toMatch(/^1\|\d+\|\d+\.\d+\|b$/);
  });

  it('a claim that creates a field prunes expired fields of stopped workers, keeping live ones', async () => {
    const queue = new Queue(uniqueName(), { connection: fx.url });
    open.push(queue);
    const now = Date.now();
    await fx.redis.hset(
      queue.keys.claims,
      'gone.0',
      `1|${now - 1}|${now - 1_001}|x`,
      'live.0',
      `1|${now + 60_000}|${now}|y`,
    );
    await queue.add({}, { id: 'a' });
    await claim(queue, now, 1, 'w3.0', '1');
    expect((await fx.redis.hkeys(queue.keys.claims)).sort()).toEqual(['live.0', 'w3.0']);
  });
});

describe('a hand-back behind a network that fails', () => {
  /**
   * Worker `a` behind a proxy, one slot and prefetch 5, busy with job `first` until `release()`; a
   * direct queue; `ranByA` lists the jobs whose processor started in `a`.
   */
  async function busyPrefetcher() {
    const { proxy: p, url } = await proxy();
    const name = uniqueName();
    const queue = new Queue(name, { connection: fx.url });
    open.push(queue);
    let release = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const ranByA: string[] = [];
    const a = new Worker(
      name,
      async (job) => {
        ranByA.push(job.id);
        if (job.id === 'first') await gate;
        return 'a';
      },
      { ...WORKER, connection: url, concurrency: 1, prefetch: 5 },
    );
    a.on('error', () => {});
    open.push(a);
    return { p, name, queue, a, ranByA, release };
  }

  /** A worker on a direct connection; `ranByB` lists the jobs it ran. */
  function directWorker(name: string) {
    const ranByB: string[] = [];
    const b = new Worker(name, (job) => void ranByB.push(job.id), { ...WORKER, connection: fx.url });
    open.push(b);
    return ranByB;
  }

  it('a prefetched job whose lease ran out unseen (renewals black-holed) is not started when a slot frees', async () => {
    const { p, name, queue, a, ranByA, release } = await busyPrefetcher();
    await queue.add({}, { id: 'first', leaseMs: 30_000 });
    await waitUntil(() => ranByA.includes('first'), 'first running');
    await queue.add({}, { id: 'p1', leaseMs: 1_000 });
    await waitUntil(async () => (await queue.counts()).active === 2, 'a prefetched p1');
    // A's renewals never arrive: p1's lease runs out, recovery puts it back free, and b runs it.
    p.blackhole();
    const ranByB = directWorker(name);
    await waitUntil(async () => (await queue.getJob('p1'))?.state === 'completed', 'b completed p1', 20_000);
    // A's slot frees: it still thinks it holds p1, but knows the lease it had runs out, so p1 must not
    // start there (its first attempt already ran; a second run would repeat its effects).
    release();
    await waitUntil(() => a.diagnostics().running === 0, "first's slot freed");
    expect(ranByA).toEqual(['first']);
    expect(ranByB).toEqual(['p1']);
    expect(await queue.getJob('p1')).toMatchObject({ state: 'completed', attempts: 1 });
    p.heal(); // so that a's outcome for `first` lands and it closes at once
  }, 60_000);

  it("a paused worker's failed hand-back leaves its prefetched jobs to their lease: another worker runs them", async () => {
    const { p, name, queue, a, release } = await busyPrefetcher();
    await queue.add({}, { id: 'first', leaseMs: 1_000 });
    await waitUntil(async () => (await queue.getJob('first'))?.startedAt !== undefined, 'first started');
    const ids = ['p1', 'p2', 'p3'];
    await queue.addBulk(ids.map((id) => ({ data: {}, opts: { id, leaseMs: 1_000 } })));
    await waitUntil(async () => (await queue.counts()).active === 4, 'a prefetched the three');
    // The hand-back never reaches Redis: its call fails with the connection.
    p.blackhole('toServer');
    const paused = a.pause();
    await waitUntil(() => p.heldBytes > 0, 'the release sent, and held');
    p.reset();
    p.heal();
    await paused;
    // A worker whose hand-back failed no longer renews those leases: they expire, and recovery puts the
    // jobs back free (never started), for another worker. (They used to be renewed for ever.)
    const ranByB = directWorker(name);
    await waitUntil(() => ids.every((id) => ranByB.includes(id)), 'b ran the three', 20_000);
    for (const id of ids) expect(await queue.getJob(id)).toMatchObject({ state: 'completed', attempts: 1 });
    release();
  }, 60_000);
});
