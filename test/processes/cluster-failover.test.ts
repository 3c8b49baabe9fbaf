/**
 * Failover on a real Redis Cluster (3 masters, 3 replicas on loopback): a master is killed (kill -9)
 * while producers add and a worker runs jobs. After its replica is promoted, producers and workers
 * carry on. Redis replicates asynchronously, so adds acknowledged just before the kill may be lost;
 * the test measures that window, and shows `durability: { waitReplicas: 1 }` closes it.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { DurabilityError, Queue, Worker } from '../../src/index.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { uniqueName, waitUntil } from '../helpers/setup.js';

let cluster: RedisCluster;
beforeAll(async () => {
  cluster = await new RedisCluster({ masters: 3, replicasPer: 1 }).start();
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
});

interface Sent {
  id: string;
  at: number;
}

/** Adds jobs one after another until stopped; remembers each add that resolved, and counts refusals. */
function produce(q: Queue<number>) {
  const sent: Sent[] = [];
  let refused = 0;
  let unreplicated = 0;
  let stop = false;
  const done = (async () => {
    for (let i = 0; !stop; i++) {
      try {
        const a = await q.add(i);
        sent.push({ id: a.id, at: Date.now() });
      } catch (err) {
        // DurabilityError: added on the master, but no replica confirmed it (the promoted replica has
        // none left). Others: in flight or refused during the failover (a caller would retry by id).
        if (err instanceof DurabilityError) unreplicated++;
        else refused++;
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  })();
  return {
    sent,
    attempts: () => sent.length + refused + unreplicated,
    unreplicated: () => unreplicated,
    refused: () => refused,
    stop: async () => {
      stop = true;
      await done;
    },
  };
}

it('producers and workers carry on after a master dies; waitReplicas closes the loss window', async () => {
  const name = uniqueName();
  const connection = cluster.url;
  const defaults = { leaseMs: 1_000 };
  const fast = new Queue<number>(`${name}-async`, { connection, partitions: 3, defaults });
  const durable = new Queue<number>(`${name}-durable`, {
    connection,
    partitions: 3,
    defaults,
    durability: { waitReplicas: 1, timeoutMs: 300 },
  });
  const workers = [fast, durable].map(
    (q) =>
      new Worker<number>(q.name, () => 'ok', {
        connection,
        partitions: 3,
        concurrency: 20,
        recoverIntervalMs: 500,
      }),
  );
  const executed = new Set<string>();
  for (const w of workers) {
    w.on('error', () => {}); // connection errors during the failover are expected
    w.on('completed', (job) => executed.add(`${job.queueName}\n${job.id}`));
  }
  const producers = [produce(fast), produce(durable)];
  await waitUntil(() => producers.every((p) => p.sent.length >= 200), '200 adds each', 20_000);

  // Kill a master that serves a partition of the durable queue, and of the fast one if it can.
  const probe = new Redis({ port: cluster.nodes[0]!.port });
  const masterOfTag = async (jobsKey: string) =>
    (await cluster.masterOf(Number(await probe.cluster('KEYSLOT', jobsKey)))).port;
  const tags = (q: Queue<number>) => [0, 1, 2].map((p) => q.keys.jobs.replace(/:0\}/, `:${p}}`));
  const durableMasters = await Promise.all(tags(durable).map(masterOfTag));
  const fastMasters = new Set(await Promise.all(tags(fast).map(masterOfTag)));
  probe.disconnect();
  const victimPort = durableMasters.find((p) => fastMasters.has(p)) ?? durableMasters[0]!;
  const victim = cluster.nodes.find((n) => n.port === victimPort)!;
  const fastOnVictim = fastMasters.has(victimPort);
  const killedAt = Date.now();
  await victim.kill();
  await cluster.waitFailover(victim);
  const failedOverAt = Date.now();
  const countsAtFailover = producers.map((p) => p.attempts());
  await waitUntil(
    () => producers.every((p, i) => p.attempts() >= countsAtFailover[i]! + 60),
    `60 more adds each after the failover (${producers.map((p) => `${p.sent.length} ok, ${p.refused()} refused, ${p.unreplicated()} unreplicated`).join('; ')})`,
    30_000,
  );
  for (const p of producers) await p.stop();

  // Every acknowledged add ends completed, except (without waitReplicas) some acknowledged in the
  // moments before the kill, which the promoted replica had not received.
  const outcome = async (q: Queue<number>, sent: Sent[]) => {
    let lost: Sent[] = [];
    await waitUntil(
      async () => {
        lost = [];
        for (const s of sent) {
          // Completed jobs are trimmed by retention: a job the worker completed counts as run.
          if (executed.has(`${q.name}\n${s.id}`)) continue;
          const job = await q.getJob(s.id);
          if (!job) lost.push(s);
          else if (job.state !== 'completed') return false;
        }
        return true;
      },
      `every job of ${q.name} settled`,
      30_000,
    );
    return lost;
  };
  const lostFast = await outcome(fast, producers[0]!.sent);
  const lostDurable = await outcome(durable, producers[1]!.sent);
  const window = lostFast.length > 0 ? killedAt - Math.min(...lostFast.map((s) => s.at)) : 0;
  console.log(
    `failover: killed port ${victim.port}, replica promoted after ${failedOverAt - killedAt} ms; ` +
      `without waitReplicas ${lostFast.length} of ${producers[0]!.sent.length} acknowledged adds lost ` +
      `(all acknowledged within ${window} ms before the kill); with waitReplicas: 1, ${lostDurable.length} of ` +
      `${producers[1]!.sent.length} lost; adds refused during the failover: ${producers.map((p) => p.refused()).join(' / ')}; ` +
      `durable adds reported unreplicated (partition left without a replica): ${producers[1]!.unreplicated()}; ` +
      `fast queue had a partition on the killed master: ${fastOnVictim}`,
  );
  expect(lostDurable).toEqual([]);
  // The promoted replica has no replica of its own: waitReplicas cannot be met there, and says so.
  expect(producers[1]!.unreplicated()).toBeGreaterThan(0);
  // Only writes acknowledged shortly before the kill can be lost; nothing acknowledged after the failover.
  for (const s of lostFast) {
    expect(s.at).toBeLessThanOrEqual(failedOverAt);
    expect(killedAt - s.at).toBeLessThan(1_000);
  }
  for (const w of workers) await w.close();
  await fast.close();
  await durable.close();
}, 120_000);
