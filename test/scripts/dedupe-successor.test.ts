/**
 * Dedupe with keepLastIfActive when the running job's worker dies (docs/groups.md): recover.lua puts
 * the job back or ends it, and its pending successor follows the job's real end, never its lease.
 * Claims, start marks, recoveries and completions run on an injected clock, so the lease expires
 * exactly when the test says, without waiting for it.
 */
import { describe, expect, it } from 'vitest';
import { Queue } from '../../src/index.js';
import { type ArgValue, type ScriptSpec, scripts } from '../../src/scripts/specs.js';
import { decodeClaimed } from '../../src/store/job-record.js';
import { dedupeKey, dedupeNextKey } from '../../src/store/keys.js';
import { runScriptAt } from '../helpers/run-script-at.js';
import { closeAfterEach, uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
const LEASE = 30_000; // runScriptAt's default lease
const keepLast = { key: 'k', mode: 'debounce', keepLastIfActive: true } as const;

function queue() {
  const q = new Queue<{ n: number }>(uniqueName('successor'), { connection: fx.url });
  open.push(q);
  return q;
}

async function redisNow(): Promise<number> {
  const [s, us] = await fx.redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

function run<A extends string, R extends string, T>(
  q: Queue<{ n: number }>,
  spec: ScriptSpec<A, R, T>,
  now: number,
  extra: Record<string, ArgValue>,
  rows: Record<R, ArgValue>[] = [],
) {
  return runScriptAt(fx.redis, q.keys, spec, now, extra, rows);
}

async function claimOne(q: Queue<{ n: number }>, now: number): Promise<{ id: string; token: string }> {
  const reply = (await run(q, scripts.claim, now, { count: 1 })) as unknown[];
  expect(reply.length).toBe(8);
  return { id: String(reply[6]), token: decodeClaimed(String(reply[7])).token };
}

/** The key's holder (`dd:`) and pending successor (`dn:`). */
async function keyState(q: Queue<{ n: number }>) {
  const [holder, next] = await Promise.all([
    fx.redis.get(dedupeKey(q.keys, 'k')),
    fx.redis.get(dedupeNextKey(q.keys, 'k')),
  ]);
  return { holder, next };
}

describe('keepLastIfActive when the running job loses its lease', () => {
  it('a lost lease puts the job back and its successor stays behind it until the job completes', async () => {
    const q = queue();
    const job = await q.add({ n: 1 }, { dedupe: keepLast });
    const t = await redisNow();
    const first = await claimOne(q, t);
    await run(q, scripts.start, t, {}, [first]);
    const succ = await q.add({ n: 2 }, { dedupe: keepLast });
    expect(succ.state).toBe('blocked');
    // Its worker died: the lease expires and the recovery pass charges the attempt, then requeues it.
    expect(await run(q, scripts.recover, t + LEASE + 1, {})).toEqual([[job.id], []]);
    expect((await q.getJob(job.id))?.state).toBe('waiting');
    expect((await q.getJob(succ.id))?.state).toBe('blocked');
    expect(await keyState(q)).toEqual({ holder: job.id, next: succ.id });
    // An add meanwhile rewrites the successor, not the job that waits for its next attempt.
    expect(await q.add({ n: 3 }, { dedupe: keepLast })).toEqual({
      id: succ.id,
      isNew: false,
      state: 'blocked',
    });
    const again = await claimOne(q, t + LEASE + 2);
    expect(again.id).toBe(job.id);
    await run(q, scripts.complete, t + LEASE + 3, {}, [{ id: job.id, token: again.token, result: '' }]);
    expect(await q.getJob(succ.id)).toMatchObject({ state: 'waiting', data: { n: 3 } });
    expect(await keyState(q)).toEqual({ holder: succ.id, next: null });
  });

  it('a lost lease that spends the last attempt ends the job dead and releases its successor', async () => {
    const q = queue();
    const job = await q.add({ n: 1 }, { dedupe: keepLast, maxAttempts: 1 });
    const t = await redisNow();
    const first = await claimOne(q, t);
    await run(q, scripts.start, t, {}, [first]);
    const succ = await q.add({ n: 2 }, { dedupe: keepLast });
    expect(await run(q, scripts.recover, t + LEASE + 1, {})).toEqual([[], [job.id]]);
    expect((await q.getJob(job.id))?.state).toBe('dead');
    expect((await q.getJob(succ.id))?.state).toBe('waiting');
    expect(await keyState(q)).toEqual({ holder: succ.id, next: null });
  });
});
