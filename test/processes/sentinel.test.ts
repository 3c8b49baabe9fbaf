/**
 * Redis Sentinel: Queue and Worker connect through three sentinels, keep working across a failover
 * (the master is killed with SIGKILL and the replica promoted), and every job whose add resolved after
 * the failover completes. Jobs acknowledged by the old master just before it died may be lost
 * (replication is asynchronous); the test reports how many.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, Worker } from '../../src/index.js';
import { MASTER_NAME, type SentinelSetup, startSentinelSetup } from '../helpers/sentinel.js';
import { closeAfterEach, uniqueName, waitUntil } from '../helpers/setup.js';

const open = closeAfterEach();
let setup: SentinelSetup;

beforeAll(async () => {
  setup = await startSentinelSetup();
}, 30_000);
afterAll(() => setup?.stop());

describe('Sentinel', () => {
  it('queue and worker carry on through a failover; every job added after it completes', async () => {
    const connection = { sentinels: setup.sentinels, name: MASTER_NAME };
    const name = uniqueName();
    // Short leases and frequent recovery: jobs that were active on the dead master come back quickly.
    const queue = new Queue<{ n: number }, number>(name, { connection, defaults: { leaseMs: 1_000 } });
    const ran = new Set<number>();
    const worker = new Worker<{ n: number }, number>(
      name,
      async (job) => {
        ran.add(job.data.n);
        // A little work per job, so part of the burst is still waiting or active at the kill.
        await new Promise((r) => setTimeout(r, 5));
        return job.data.n;
      },
      { connection, concurrency: 10, recoverIntervalMs: 200 },
    );
    const errors: string[] = [];
    worker.on('error', (err) => errors.push(err.code));
    open.push(worker, queue);

    // Before: jobs run through the master the sentinels point at.
    expect(await setup.currentMaster()).toEqual({ host: '127.0.0.1', port: setup.master.port });
    const first = await queue.add({ n: 0 });
    expect(await queue.waitFor(first.id, { timeoutMs: 5_000 })).toBe(0);

    // A burst acknowledged by the master, which is killed mid-burst (some jobs done, some active, most
    // waiting), before it may have replicated everything.
    const burst = await queue.addBulk(Array.from({ length: 500 }, (_, i) => ({ data: { n: 1 + i } })));
    await waitUntil(() => ran.size > 100, 'the worker to be busy with the burst', 10_000);
    await setup.master.kill();
    const killedAt = Date.now();
    const ranBeforeKill = ran.size;

    await waitUntil(
      async () => (await setup.currentMaster())?.port === setup.replica.port,
      'the sentinels to promote the replica',
      15_000,
    );
    const failoverMs = Date.now() - killedAt;

    // After: adds resolve against the new master, and the worker (same client, reconnected through
    // the sentinels) completes every one of them.
    const after: string[] = [];
    for (let i = 0; i < 20; i++) after.push((await queue.add({ n: 10_000 + i })).id);
    const results = await Promise.all(after.map((id) => queue.waitFor(id, { timeoutMs: 10_000 })));
    expect(results).toEqual(after.map((_, i) => 10_000 + i));

    // The burst: what reached the replica ends completed like any job; the rest is gone.
    await waitUntil(
      async () => {
        const c = await queue.counts();
        return c.waiting + c.delayed + c.active === 0;
      },
      'every surviving job of the burst to finish',
      10_000,
    );
    const survivors = await Promise.all(burst.map((b) => queue.getJob(b.id)));
    const lost = survivors.filter((j) => j === null).length;
    expect(survivors.filter((j) => j !== null && j.state !== 'completed')).toEqual([]);
    console.log(
      `sentinel failover: promoted ${failoverMs} ms after kill -9; ${lost} of ${burst.length} jobs ` +
        `acknowledged just before the kill were lost (async replication); ${ranBeforeKill - 1} of them had ` +
        `started before the kill; ${ran.size} distinct jobs ran in all; ` +
        `worker error events during the failover: ${errors.length}`,
    );

    // The worker did not hang: it closes promptly, with nothing left running.
    const closing = Date.now();
    await worker.close({ timeoutMs: 5_000 });
    expect(Date.now() - closing).toBeLessThan(5_000);
  }, 30_000);
});
