/**
 * "FIFO within a priority" by due time, then insertion (issue 33, defect 9): delayed jobs due at the
 * same moment are claimed in the order they were added (not in the text order of their ids: 1, 10,
 * 11, 2...), and a job whose due time passed is claimed before jobs that became ready after it, though
 * promotion is lazy (no claim ran at its due time).
 *
 * Claims and failures run the scripts on an injected clock, so due times are exact, not raced.
 *
 * `lifo: true` (docs/data-layout.md): the job goes to the front of its priority (of its group's line)
 * each time it becomes waiting: at its add, when it falls due, on a retry, on promote.
 */
import { describe, expect, it } from 'vitest';
import { Queue } from '../../src/index.js';
import { type ArgValue, type ScriptSpec, scripts } from '../../src/scripts/specs.js';
import { decodeClaimed } from '../../src/store/job-record.js';
import { runScriptAt } from '../helpers/run-script-at.js';
import { closeAfterEach, uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

function queue() {
  const q = new Queue(uniqueName('order'), { connection: fx.url });
  open.push(q);
  return q;
}

async function redisNow(): Promise<number> {
  const [s, us] = await fx.redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

function run<A extends string, R extends string, T>(
  q: Queue,
  spec: ScriptSpec<A, R, T>,
  now: number,
  extra: Record<string, ArgValue>,
  rows: Record<R, ArgValue>[] = [],
) {
  return runScriptAt(fx.redis, q.keys, spec, now, extra, rows);
}

async function claim(q: Queue, now: number, count: number): Promise<{ id: string; token: string }[]> {
  const reply = (await run(q, scripts.claim, now, { count })) as unknown[];
  const out: { id: string; token: string }[] = [];
  for (let i = 6; i < reply.length; i += 2)
    out.push({ id: String(reply[i]), token: decodeClaimed(String(reply[i + 1])).token });
  return out;
}

/** Job `priority` added, claimed and failed at `now - 1000`, its retry due at `now - 500`. */
async function overdueRetry(q: Queue, now: number, priority: number): Promise<string> {
  const { id } = await q.add({}, { priority });
  const [job] = await claim(q, now - 1_000, 1);
  expect(job?.id).toBe(id);
  const error = JSON.stringify({ name: 'Error', message: 'boom' });
  await run(q, scripts.fail, now - 1_000, {}, [{ id, token: job!.token, retryDelayMs: 500, error }]);
  expect((await q.getJob(id))?.state).toBe('delayed');
  return id;
}

describe('claim order', () => {
  it('delayed jobs due at the same moment are claimed in the order they were added', async () => {
    const q = queue();
    const runAt = (await redisNow()) + 60_000;
    const added = await q.addBulk(Array.from({ length: 12 }, () => ({ data: {}, opts: { runAt } })));
    const later = await q.addBulk(Array.from({ length: 3 }, () => ({ data: {}, opts: { runAt } })));
    const claimed = await claim(q, runAt + 1, 20);
    expect(claimed.map((j) => j.id)).toEqual([...added, ...later].map((a) => a.id));
  });

  it('a retry whose due time passed is claimed before plain jobs added after that time', async () => {
    const q = queue();
    const now = await redisNow();
    const retry = await overdueRetry(q, now, 0);
    const plain = await q.addBulk(Array.from({ length: 3 }, () => ({ data: {} })));
    const single = await q.add({});
    const claimed = await claim(q, await redisNow(), 10);
    expect(claimed.map((j) => j.id)).toEqual([retry, ...plain.map((p) => p.id), single.id]);
  });

  it('the same holds within a priority', async () => {
    const q = queue();
    const now = await redisNow();
    const retry = await overdueRetry(q, now, 3);
    const plain = await q.addBulk(Array.from({ length: 3 }, () => ({ data: {}, opts: { priority: 3 } })));
    const claimed = await claim(q, await redisNow(), 10);
    expect(claimed.map((j) => j.id)).toEqual([retry, ...plain.map((p) => p.id)]);
  });
});

describe('claim order with lifo', () => {
  const ids = (xs: { id: string }[]) => xs.map((x) => x.id);

  it('lifo adds are claimed newest first, before the FIFO jobs of their priority (add and addBulk)', async () => {
    const q = queue();
    const fifo = await q.addBulk([{ data: {} }, { data: {} }]);
    const one = await q.add({}, { lifo: true }); // add-one.lua
    const bulk = await q.addBulk([
      { data: {}, opts: { lifo: true } },
      { data: {} },
      { data: {}, opts: { lifo: true } },
    ]);
    const claimed = await claim(q, await redisNow(), 10);
    expect(ids(claimed)).toEqual([bulk[2]!.id, bulk[0]!.id, one.id, ...ids(fifo), bulk[1]!.id]);
  });

  it('the same holds within a priority, and priorities still come first', async () => {
    const q = queue();
    const a = await q.add({}, { priority: 3 });
    const b = await q.add({}, { priority: 3, lifo: true });
    const c = await q.add({}, { priority: 3, lifo: true });
    const d = await q.add({}, { priority: 3 });
    const plain = await q.add({}, { lifo: true });
    const urgent = await q.add({}, { priority: -1 });
    const claimed = await claim(q, await redisNow(), 10);
    // Negative priorities, then priority 0, then positive ones (docs/data-layout.md).
    expect(ids(claimed)).toEqual([urgent.id, plain.id, c.id, b.id, a.id, d.id]);
  });

  it('a lifo job that falls due goes to the front, before jobs that were waiting already', async () => {
    const q = queue();
    const now = await redisNow();
    const later = await q.add({}, { runAt: now + 60_000, lifo: true });
    const fifo = await q.addBulk([{ data: {} }, { data: {} }]);
    const claimed = await claim(q, now + 60_001, 10);
    expect(ids(claimed)).toEqual([later.id, ...ids(fifo)]);
  });

  it('a lifo job retried without backoff goes back to the front; with a backoff, to the front when due', async () => {
    const q = queue();
    const now = await redisNow();
    const job = await q.add({}, { lifo: true });
    const fifo = await q.addBulk([{ data: {} }, { data: {} }]);
    const error = JSON.stringify({ name: 'Error', message: 'boom' });
    const [first] = await claim(q, now, 1);
    expect(first?.id).toBe(job.id);
    await run(q, scripts.fail, now, {}, [{ id: job.id, token: first!.token, retryDelayMs: 0, error }]);
    const [again] = await claim(q, now + 1, 1);
    expect(again?.id).toBe(job.id);
    await run(q, scripts.fail, now + 1, {}, [{ id: job.id, token: again!.token, retryDelayMs: 500, error }]);
    const claimed = await claim(q, now + 501, 10);
    expect(ids(claimed)).toEqual([job.id, ...ids(fifo)]);
  });

  it('promote and a manual retry put a lifo job at the front', async () => {
    const q = queue();
    const now = await redisNow();
    const delayed = await q.add({}, { delayMs: 3_600_000, lifo: true });
    const fifo = await q.add({});
    await q.promote(delayed.id);
    const [first] = await claim(q, await redisNow(), 1);
    expect(first?.id).toBe(delayed.id);
    await run(q, scripts.complete, now, {}, [{ id: delayed.id, token: first!.token, result: '' }]);
    await q.retry(delayed.id);
    const claimed = await claim(q, await redisNow(), 10);
    expect(ids(claimed)).toEqual([delayed.id, fifo.id]);
  });

  it("in a group, a lifo job goes to the front of its group's line", async () => {
    const q = queue();
    const a = await q.add({}, { group: 'g' });
    const b = await q.add({}, { group: 'g' });
    const c = await q.add({}, { group: 'g', lifo: true });
    const claimed = await claim(q, await redisNow(), 10);
    expect(ids(claimed)).toEqual([c.id, a.id, b.id]);
  });
});
