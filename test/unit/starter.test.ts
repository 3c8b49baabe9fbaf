/**
 * The Starter (src/worker/starter.ts) on a fake start call: marks go in one call, ride on another call
 * when taken, are dropped once their attempt settled, are sent again after a failed call, and a refused
 * mark stops its attempt. test/scripts/redis-cost.test.ts bounds the script calls a drain makes with them.
 */
import { describe, expect, it } from 'vitest';
import { ConnectionError } from '../../src/errors.js';
import type { Job } from '../../src/worker/job.js';
import { encodeMarks, Starter } from '../../src/worker/starter.js';
import { waitUntil } from '../helpers/setup.js';

const job = (id: string, decided = false) => ({ id, token: `t-${id}`, decided }) as unknown as Job<unknown>;

function setup(replies: (string[] | Error)[], held: (id: string) => boolean = () => true) {
  const calls: string[][] = [];
  const lost: string[][] = [];
  const errors: unknown[] = [];
  const starter = new Starter({
    start: async (rows) => {
      calls.push(rows.map((r) => r.id));
      const reply = replies.shift() ?? [];
      if (reply instanceof Error) throw reply;
      return reply;
    },
    wanted: (j) => !(j as unknown as { decided: boolean }).decided && held(j.id),
    onLost: (jobs) => lost.push(jobs.map((j) => j.id)),
    onError: (err) => errors.push(err),
  });
  return { starter, calls, lost, errors };
}

describe('Starter', () => {
  it('pending marks go in one call; refused ones stop their attempts', async () => {
    const { starter, calls, lost } = setup([['b']]);
    for (const id of ['a', 'b', 'c']) starter.push(job(id));
    starter.flush();
    await starter.settled();
    expect(calls).toEqual([['a', 'b', 'c']]);
    expect(lost).toEqual([['b']]);
    starter.flush(); // nothing pending: no call
    expect(calls).toHaveLength(1);
  });

  it('marks taken to ride on another call leave nothing to send; settled or no longer held ones are dropped', () => {
    let bHeld = true;
    const { starter, calls } = setup([], (id) => id !== 'b' || bHeld);
    starter.push(job('a'));
    starter.push(job('b'));
    starter.push(job('c', true)); // its outcome is on its way: the outcome counts the start
    bHeld = false;
    const taken = starter.take();
    expect(taken.map((j) => j.id)).toEqual(['a']);
    expect(encodeMarks(taken)).toBe('a\nt-a');
    expect(encodeMarks([job('a'), job('b')])).toBe('a\nt-a\nb\nt-b');
    starter.flush();
    expect(calls).toEqual([]);
  });

  it('a call that failed is sent again with the marks pushed since', async () => {
    const down = new ConnectionError('connection closed', undefined);
    const { starter, calls, errors } = setup([down, []]);
    starter.push(job('a'));
    starter.flush();
    await starter.settled();
    starter.push(job('b'));
    await waitUntil(() => calls.length === 2, 'sent again after the back-off');
    await starter.settled();
    expect(calls).toEqual([['a'], ['a', 'b']]);
    expect(errors).toEqual([down]);
    starter.stop();
  });

  it('marks put back after a failed carrier go with the next call, first', async () => {
    const { starter, calls } = setup([[]]);
    const taken = [job('a')];
    starter.push(job('b'));
    starter.putBack(taken);
    starter.flush();
    await starter.settled();
    expect(calls).toEqual([['a', 'b']]);
  });
});
