/**
 * The fetch loop's wake-up logic, with a fake subscriber and claims answered by hand, so the
 * interleavings that matter can be forced exactly (no Redis needed).
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { RedisClient } from '../src/scripts.js';
import { type ClaimReply, Fetcher } from '../src/worker/fetcher.js';

function harness(freeSlots = () => 10) {
  const subscriber = Object.assign(new EventEmitter(), {
    ssubscribe: async () => 1,
  }) as unknown as RedisClient;
  const claims: { count: number; resolve: (r: ClaimReply) => void }[] = [];
  const fetcher = new Fetcher({
    subscriber,
    wakeChannel: 'wake',
    pollIntervalMs: 60_000,
    freeSlots,
    claim: (count) => new Promise((resolve) => claims.push({ count, resolve })),
    onJobs: () => {},
    onCancelled: () => {},
    onError: (err) => {
      throw err;
    },
  });
  const reply = (jobs: number): ClaimReply => ({
    now: 0,
    nextDue: null,
    paused: false,
    limitedMs: 0,
    jobs: Array.from({ length: jobs * 2 }, (_, i) => `x${i}`),
  });
  const message = (m: string) => (subscriber as unknown as EventEmitter).emit('smessage', 'wake', m);
  return { fetcher, claims, reply, message };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('Fetcher', () => {
  it('a wake-up that arrives before the reply of a short claim is not lost', async () => {
    const h = harness();
    await h.fetcher.start();
    expect(h.claims).toHaveLength(1); // the initial claim, for all 10 slots
    // A job is added after the claim ran in Redis; its wake-up overtakes the claim's reply.
    h.message('w');
    expect(h.claims).toHaveLength(1); // no capacity left to ask for: the claim in flight asked for all
    h.claims[0]!.resolve(h.reply(0));
    await tick();
    expect(h.claims).toHaveLength(2); // it claims again instead of sleeping until the safety poll
    h.claims[1]!.resolve(h.reply(0));
    await tick();
    expect(h.claims).toHaveLength(2); // and with no further wake-up, it sleeps
    await h.fetcher.stop();
  });

  it('sleeps after a short claim with no wake-up since, and wakes on the next message', async () => {
    const h = harness();
    await h.fetcher.start();
    h.claims[0]!.resolve(h.reply(3));
    await tick();
    expect(h.claims).toHaveLength(1);
    h.message('w');
    expect(h.claims).toHaveLength(2);
    expect(h.claims[1]!.count).toBe(10);
    await h.fetcher.stop();
  });

  it('keeps at most two claims in flight and never asks for more than the free capacity', async () => {
    let free = 10;
    const h = harness(() => free);
    await h.fetcher.start();
    free = 0; // the 10 jobs it gets take every slot
    h.claims[0]!.resolve(h.reply(10)); // full: not drained
    await tick();
    expect(h.claims).toHaveLength(1);
    free = 20;
    h.fetcher.pump();
    expect(h.claims).toHaveLength(2);
    expect(h.claims[1]!.count).toBe(20);
    free = 40;
    h.fetcher.pump();
    h.fetcher.pump();
    expect(h.claims).toHaveLength(3);
    expect(h.claims[2]!.count).toBe(20);
    await h.fetcher.stop();
  });
});
