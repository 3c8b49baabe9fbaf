/**
 * The Beginner (src/worker/beginner.ts) on a fake begin call: batching per event-loop turn, and what
 * happens when a begin's reply is lost (it is idempotent, so it is sent again) or its lease is lost.
 */
import { describe, expect, it } from 'vitest';
import { ConnectionError } from '../src/errors.js';
import { Beginner, type BeginOutcome } from '../src/worker/beginner.js';
import type { Job } from '../src/worker/job.js';

const job = (id: string) => ({ id, token: `t-${id}` }) as unknown as Job<unknown>;

function setup(
  replies: (string[] | Error)[],
  opts: { held?: (id: string) => boolean; closing?: (calls: string[][]) => boolean } = {},
) {
  const calls: string[][] = [];
  const outcomes: [string, BeginOutcome][] = [];
  const errors: unknown[] = [];
  const beginner = new Beginner({
    begin: async (rows) => {
      calls.push(rows.map((r) => r.id));
      const reply = replies.shift() ?? [];
      if (reply instanceof Error) throw reply;
      return reply;
    },
    isHeld: (j) => opts.held?.(j.id) ?? true,
    isClosing: () => opts.closing?.(calls) ?? false,
    onOutcome: (j, o) => outcomes.push([j.id, o]),
    onError: (err) => errors.push(err),
  });
  return { beginner, calls, outcomes, errors };
}

describe('Beginner', () => {
  it('jobs pushed in one event-loop turn share one begin call; refused ones are reported lost', async () => {
    const { beginner, calls, outcomes } = setup([['b']]);
    beginner.push(job('a'));
    beginner.push(job('b'));
    beginner.push(job('c'));
    await new Promise((r) => setImmediate(r));
    await beginner.settled();
    expect(calls).toEqual([['a', 'b', 'c']]);
    expect(outcomes).toEqual([
      ['a', 'begun'],
      ['b', 'lost'],
      ['c', 'begun'],
    ]);
  });

  it('a begin whose reply is lost is sent again until answered, dropping jobs whose lease is known lost', async () => {
    let bHeld = true;
    const lost = new ConnectionError('connection closed', undefined);
    const { beginner, calls, outcomes, errors } = setup([lost, lost, []], {
      held: (id) => id !== 'b' || bHeld,
    });
    beginner.push(job('a'));
    beginner.push(job('b'));
    await new Promise((r) => setImmediate(r));
    bHeld = false; // the renewer learned meanwhile that b's lease is gone
    await beginner.settled();
    expect(calls).toEqual([['a', 'b'], ['a'], ['a']]);
    expect(outcomes).toEqual([
      ['b', 'lost'],
      ['a', 'begun'],
    ]);
    expect(errors).toEqual([lost, lost]);
  });

  it('a begin that fails while the worker closes is not retried: its jobs are reported unknown (handed back)', async () => {
    // close() is called once the call is in flight.
    const { beginner, calls, outcomes } = setup([new ConnectionError('closed', undefined)], {
      closing: (sent) => sent.length > 0,
    });
    beginner.push(job('a'));
    await new Promise((r) => setImmediate(r));
    await beginner.settled();
    expect(calls).toEqual([['a']]);
    expect(outcomes).toEqual([['a', 'unknown']]);
  });

  it('jobs whose turn comes after close() was called are not begun at all', async () => {
    const { beginner, calls, outcomes } = setup([], { closing: () => true });
    beginner.push(job('a'));
    await new Promise((r) => setImmediate(r));
    await beginner.settled();
    expect(calls).toEqual([]);
    expect(outcomes).toEqual([['a', 'unknown']]);
  });
});
