/**
 * Job control from inside a processor (issue 15): SnoozeError puts a job back delayed without spending
 * an attempt or writing an error; RateLimitError puts it back waiting and pauses claims (the queue's,
 * or the job's group's) for a while. Both are fenced like any outcome: a worker whose lease was lost
 * cannot snooze or pause anything.
 */
import { describe, expect, it } from 'vitest';
import { Queue, RateLimitError, SnoozeError, ValidationError, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

function queue<D = unknown>(name = uniqueName()) {
  const q = new Queue<D>(name, { connection: fx.url });
  open.push(q);
  return q;
}

describe('SnoozeError', () => {
  it('puts the job back delayed, spends none of its budget, writes no error, and counts the snooze and the start', async () => {
    const q = queue<{ n: number }>();
    const seen: { attempt: number; snoozes: number; at: number }[] = [];
    const snoozed: number[] = [];
    const w = new Worker<{ n: number }>(
      q.name,
      (job) => {
        seen.push({ attempt: job.attempt, snoozes: job.snoozes, at: Date.now() });
        if (job.snoozes < 2) throw new SnoozeError(200);
        return 'done';
      },
      { connection: fx.url, pollIntervalMs: 60_000 },
    );
    w.on('snoozed', (_job, ms) => snoozed.push(ms));
    open.push(w);
    const { id } = await q.add({ n: 1 }, { maxAttempts: 1 });
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toBe('done');
    const info = (await q.getJob(id))!;
    // Three starts, one charged (maxAttempts 1): each snooze gave its budget back, not its start.
    expect(info).toMatchObject({ state: 'completed', attempts: 3, attemptsLeft: 0, snoozes: 2, errors: [] });
    expect(seen.map((s) => [s.attempt, s.snoozes])).toEqual([
      [1, 0],
      [2, 1],
      [3, 2],
    ]);
    expect(snoozed).toEqual([200, 200]);
    // Each run came after its snooze (Redis clock and ours agree within a few ms on one machine).
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(150);
  });

  it('a snoozed job is delayed until its due time (state and runAt), then runs', async () => {
    const q = queue();
    let release = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const w = new Worker(
      q.name,
      async (job) => {
        if (job.snoozes === 0) throw new SnoozeError(60_000);
        await gate;
        return 'late';
      },
      { connection: fx.url },
    );
    open.push(w);
    const { id } = await q.add({});
    await waitUntil(async () => (await q.getJob(id))?.state === 'delayed', 'snoozed job delayed');
    const info = (await q.getJob(id))!;
    expect(info.runAt - Date.now()).toBeGreaterThan(50_000);
    // It started (attempts counts starts), but spent none of its budget.
    expect(info).toMatchObject({ attempts: 1, attemptsLeft: 3, snoozes: 1, errors: [] });
    await q.promote(id);
    release();
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toBe('late');
  });

  it('past maxSnoozes the attempt fails with SnoozeLimitError, recorded and retried like any error', async () => {
    const q = queue();
    const w = new Worker(
      q.name,
      () => {
        throw new SnoozeError(0);
      },
      { connection: fx.url, maxSnoozes: 2 },
    );
    open.push(w);
    const { id } = await q.add({}, { maxAttempts: 1 });
    await waitUntil(async () => (await q.getJob(id))?.state === 'dead', 'dead after the snooze limit');
    const info = (await q.getJob(id))!;
    expect(info).toMatchObject({ attempts: 3, attemptsLeft: 0, snoozes: 2 });
    expect(info.errors.map((e) => [e.attempt, e.code])).toEqual([[3, 'ERR_SNOOZE_LIMIT']]);
  });

  it('refuses a bad delay with a ValidationError', () => {
    expect(() => new SnoozeError(-1)).toThrow(ValidationError);
    expect(() => new SnoozeError(1.5)).toThrow(ValidationError);
    expect(() => new RateLimitError(Number.NaN)).toThrow(ValidationError);
  });
});

describe('RateLimitError', () => {
  it('puts the job back first in line with none of its budget spent, and no worker claims until the pause ends', async () => {
    const q = queue<{ n: number }>();
    const runs: { n: number; at: number }[] = [];
    let limitedAt = 0;
    const processor = (job: { data: { n: number }; snoozes: number; attempt: number }) => {
      runs.push({ n: job.data.n, at: Date.now() });
      if (job.data.n === 0 && limitedAt === 0) {
        limitedAt = Date.now();
        throw new RateLimitError(2_000);
      }
      return job.data.n;
    };
    const limited: number[] = [];
    for (let i = 0; i < 2; i++) {
      const w = new Worker<{ n: number }>(q.name, processor, {
        connection: fx.url,
        concurrency: 1,
        prefetch: 0, // a prefetched job would start first when the pause ends
      });
      w.on('rateLimited', (_job, ms) => limited.push(ms));
      open.push(w);
    }
    const jobs = await q.addBulk(
      Array.from({ length: 4 }, (_, n) => ({ data: { n }, opts: { maxAttempts: 1 } })),
    );
    // Job 0 hits the limit; during the pause it waits first in line (a RateLimitError loses no turn).
    await waitUntil(() => limited.length === 1, 'the rate limit hit');
    const waiting = await q.getJobs('waiting');
    expect(waiting[0]?.id).toBe(jobs[0]!.id);
    expect(waiting[0]).toMatchObject({ attempts: 1, attemptsLeft: 1, errors: [] });
    await Promise.all(jobs.map((j) => q.waitFor(j.id, { timeoutMs: 10_000 })));
    expect(limited).toEqual([2_000]);
    const first = (await q.getJob(jobs[0]!.id))!;
    expect(first).toMatchObject({ state: 'completed', attempts: 2, attemptsLeft: 0, errors: [] });
    // Nothing started during the pause (a start already under way at that moment may slip in).
    const during = runs.filter((r) => r.at > limitedAt + 50 && r.at < limitedAt + 1_900);
    expect(during).toEqual([]);
    expect(runs.filter((r) => r.n === 0)).toHaveLength(2);
  });

  it('explain says RATE_LIMITED until the pause ends, and GROUP_HELD for a group paused this way', async () => {
    const q = queue<{ g?: string }>();
    const w = new Worker<{ g?: string }>(
      q.name,
      () => {
        throw new RateLimitError(60_000);
      },
      { connection: fx.url },
    );
    open.push(w);
    const plain = await q.add({});
    const grouped = await q.add({ g: 'x' }, { group: 'x' });
    await waitUntil(async () => {
      const [a, b] = await Promise.all([q.explain(plain.id), q.explain(grouped.id)]);
      return (
        a.reasons.some((r) => r.code === 'RATE_LIMITED') || b.reasons.some((r) => r.code === 'GROUP_HELD')
      );
    }, 'a pause explained');
    // Whichever ran first paused the queue (ungrouped) or its group: both are explained with a time.
    const reasons = [...(await q.explain(plain.id)).reasons, ...(await q.explain(grouped.id)).reasons];
    const paused = reasons.filter((r) => r.code === 'RATE_LIMITED' || r.code === 'GROUP_HELD');
    expect(paused.length).toBeGreaterThan(0);
    for (const r of paused) expect(r.until! - Date.now()).toBeGreaterThan(50_000);
  });

  it('queue.resume() lifts a pause a RateLimitError set', async () => {
    const q = queue();
    let limited = false;
    const w = new Worker(
      q.name,
      () => {
        if (!limited) {
          limited = true;
          throw new RateLimitError(600_000);
        }
        return 'ran';
      },
      { connection: fx.url },
    );
    open.push(w);
    const { id } = await q.add({});
    await waitUntil(
      async () => (await q.explain(id)).reasons.some((r) => r.code === 'RATE_LIMITED'),
      'paused',
    );
    await q.resume();
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toBe('ran');
  });

  it("a grouped job's RateLimitError pauses only its group", async () => {
    const q = queue<{ g: string; n: number }>();
    const runs: string[] = [];
    let limited = false;
    const w = new Worker<{ g: string; n: number }>(
      q.name,
      (job) => {
        if (job.data.g === 'slow' && !limited) {
          limited = true;
          throw new RateLimitError(60_000);
        }
        runs.push(`${job.data.g}${job.data.n}`);
        return null;
      },
      { connection: fx.url, concurrency: 2 },
    );
    open.push(w);
    await q.add({ g: 'slow', n: 0 }, { group: 'slow' });
    const fast = await q.addBulk(
      Array.from({ length: 5 }, (_, n) => ({ data: { g: 'fast', n }, opts: { group: 'fast' } })),
    );
    for (const j of fast) await q.waitFor(j.id, { timeoutMs: 10_000 });
    expect(runs).toEqual(['fast0', 'fast1', 'fast2', 'fast3', 'fast4']);
    expect(limited).toBe(true);
    // The slow group is parked: its job waits, not run again, while the queue stays open.
    expect((await q.counts()).waiting).toBe(1);
    await q.add({ g: 'other', n: 9 }, { id: 'other' });
    expect(await q.waitFor('other', { timeoutMs: 10_000 })).toBeNull();
    expect(runs).not.toContain('slow0');
  });
});
