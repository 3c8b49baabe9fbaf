/**
 * The fetch loop's wake-up logic, with a fake subscriber and claims answered by hand, so the
 * interleavings that matter can be forced exactly (no Redis needed).
 */
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { RedisClient } from '../../src/scripts/specs.js';
import { type ClaimReply, type ClaimTicket, Fetcher } from '../../src/worker/fetcher.js';
import { claimAnswer } from '../helpers/claim-answer.js';

function harness(freeSlots = () => 10, errors?: unknown[]) {
  const subscriber = Object.assign(new EventEmitter(), {
    ssubscribe: async () => 1,
  }) as unknown as RedisClient;
  const claims: {
    count: number;
    ticket: ClaimTicket;
    resolve: (r: ClaimReply) => void;
    reject: (e: Error) => void;
  }[] = [];
  const fetcher = new Fetcher({
    subscriber,
    wakeChannel: 'wake',
    pollIntervalMs: 60_000,
    freeSlots,
    claim: (count, ticket) =>
      new Promise((resolve, reject) => claims.push({ count, ticket, resolve, reject })),
    onJobs: () => {},
    onCancelled: () => {},
    onError: (err) => {
      if (!errors) throw err;
      errors.push(err);
    },
  });
  const reply = (jobs: number): ClaimReply =>
    claimAnswer({ jobs: Array.from({ length: jobs }, (_, i) => ({ id: `x${i}`, record: '' })) });
  const message = (m: string) => (subscriber as unknown as EventEmitter).emit('smessage', 'wake', m);
  const ready = () => (subscriber as unknown as EventEmitter).emit('ready');
  return { fetcher, claims, reply, message, ready };
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

  it('a failed claim is sent again with the same ticket before any new claim, however many wake-ups come', async () => {
    const errors: unknown[] = [];
    const h = harness(() => 10, errors);
    await h.fetcher.start();
    const first = h.claims[0]!;
    first.reject(new Error('connection lost after the claim was sent'));
    await tick();
    expect(errors).toHaveLength(1);
    h.message('w');
    h.fetcher.pump();
    expect(h.claims).toHaveLength(1); // nothing new while the failed claim waits for its retry
    await waitFor(() => h.claims.length === 2);
    expect(h.claims[1]!.ticket).toEqual(retryOf(first.ticket));
    h.message('w');
    expect(h.claims).toHaveLength(2); // nothing new while the retry is in flight either
    // The retry's reply (a replay of the lost claim's jobs) is delivered; then claiming goes on.
    h.claims[1]!.resolve(h.reply(2));
    await tick();
    expect(h.claims).toHaveLength(3);
    expect(h.claims[2]!.ticket.claimer).toBe(first.ticket.claimer); // the slot is free again
    expect(h.claims[2]!.ticket.nonce).not.toMatch(new RegExp(`^r?${first.ticket.nonce}$`));
    await h.fetcher.stop();
  });

  it('two claims in flight have tickets of their own slots, and both are retried after both fail', async () => {
    const errors: unknown[] = [];
    let free = 10;
    const h = harness(() => free, errors);
    await h.fetcher.start();
    free = 0;
    h.claims[0]!.resolve(h.reply(10));
    await tick();
    free = 20;
    h.fetcher.pump();
    free = 40;
    h.fetcher.pump();
    expect(h.claims).toHaveLength(3);
    const [a, b] = [h.claims[1]!, h.claims[2]!];
    expect(a.ticket.claimer).not.toBe(b.ticket.claimer);
    a.reject(new Error('lost'));
    b.reject(new Error('lost'));
    await waitFor(() => h.claims.length === 5);
    expect(h.claims.slice(3).map((c) => c.ticket)).toEqual([retryOf(a.ticket), retryOf(b.ticket)]);
    await h.fetcher.stop();
  });

  it('a retry that fails again keeps its ticket', async () => {
    const h = harness(() => 10, []);
    await h.fetcher.start();
    const ticket = h.claims[0]!.ticket;
    h.claims[0]!.reject(new Error('lost'));
    await waitFor(() => h.claims.length === 2);
    h.claims[1]!.reject(new Error('lost again'));
    await waitFor(() => h.claims.length === 3);
    expect(h.claims[2]!.ticket).toEqual(retryOf(ticket));
    await h.fetcher.stop();
  });

  it('stop() sends each failed claim once more as a replay only (count 0), and nothing else', async () => {
    const h = harness(() => 10, []);
    await h.fetcher.start();
    const ticket = h.claims[0]!.ticket;
    h.claims[0]!.reject(new Error('lost'));
    await tick();
    await h.fetcher.stop();
    expect(h.claims).toHaveLength(2);
    expect(h.claims[1]).toMatchObject({ count: 0, ticket: retryOf(ticket) });
    h.claims[1]!.resolve(h.reply(0));
    await tick();
    expect(h.claims).toHaveLength(2);
  });

  it('a failed claim is retried as soon as the subscriber reconnects, not after the backoff', async () => {
    const h = harness(() => 10, []);
    await h.fetcher.start();
    h.claims[0]!.reject(new Error('lost'));
    await tick();
    expect(h.claims).toHaveLength(1);
    h.ready();
    expect(h.claims).toHaveLength(2);
    expect(h.claims[1]!.ticket).toEqual(retryOf(h.claims[0]!.ticket));
    await h.fetcher.stop();
  });
});

/** The ticket a retry of `t` carries: same claim slot, same nonce marked as a retry. */
const retryOf = (t: ClaimTicket): ClaimTicket => ({ claimer: t.claimer, nonce: `r${t.nonce}` });

/** Polls until `cond` holds (retries come after a short backoff timer). */
async function waitFor(cond: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
