import { describe, expect, it } from 'vitest';
import { type Job, Queue, SnoozeError, Worker, type WorkerOptions } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

function queue(name: string): Queue<{ n: number }, unknown> {
  const q = new Queue<{ n: number }, unknown>(name, { connection: fx.url });
  open.push(q);
  return q;
}

function batchWorker(
  name: string,
  fn: (jobs: Job<{ n: number }>[]) => unknown,
  batch: { size: number; minSize?: number; waitMs?: number },
  opts: WorkerOptions = {},
): Worker<{ n: number }, unknown> {
  const w = new Worker<{ n: number }, unknown>(
    name,
    fn as (jobs: Job<{ n: number }>[]) => Promise<unknown[]>,
    { connection: fx.url, ...opts, batch },
  );
  open.push(w);
  return w;
}

async function addMany(q: Queue<{ n: number }, unknown>, count: number, opts = {}) {
  return q.addBulk(Array.from({ length: count }, (_, n) => ({ data: { n }, opts })));
}

describe('a batch worker', () => {
  it('is given up to batch.size jobs per call and completes each with its own result', async () => {
    const name = uniqueName();
    const q = queue(name);
    const added = await addMany(q, 23);
    const sizes: number[] = [];
    batchWorker(
      name,
      (jobs) => {
        sizes.push(jobs.length);
        return jobs.map((j) => j.data.n * 10);
      },
      { size: 10 },
    );
    const results = await Promise.all(added.map((a) => q.waitFor(a.id)));
    expect(results).toEqual(added.map((_, n) => n * 10));
    expect(Math.max(...sizes)).toBeLessThanOrEqual(10);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(23);
    for (const a of added) expect(await q.getJob(a.id)).toMatchObject({ state: 'completed', attempts: 1 });
  });

  it('fails, snoozes and retries each job on its own: an Error element fails only its job', async () => {
    const name = uniqueName();
    const q = queue(name);
    const added = await addMany(q, 6, { backoff: { type: 'fixed', delayMs: 0 } });
    batchWorker(
      name,
      (jobs) =>
        jobs.map((j) => {
          if (j.data.n === 1 && j.attempt === 1) return new Error('first try of 1');
          if (j.data.n === 2 && j.snoozes === 0) return new SnoozeError(10);
          if (j.data.n === 3) return new Error('always 3');
          return `ok ${j.data.n}`;
        }),
      { size: 6 },
    );
    await expect(q.waitFor(added[3]!.id)).rejects.toMatchObject({ code: 'ERR_JOB_DEAD' });
    for (const n of [0, 1, 2, 4, 5]) expect(await q.waitFor(added[n]!.id)).toBe(`ok ${n}`);
    const info = async (n: number) => (await q.getJob(added[n]!.id))!;
    expect(await info(0)).toMatchObject({ attempts: 1, errors: [] });
    expect(await info(1)).toMatchObject({ attempts: 2, errors: [{ attempt: 1, message: 'first try of 1' }] });
    expect(await info(2)).toMatchObject({ attempts: 2, snoozes: 1, errors: [] });
    const dead = await info(3);
    expect(dead).toMatchObject({ state: 'dead', attempts: 3 });
    expect(dead.errors.map((e) => e.message)).toEqual(['always 3', 'always 3', 'always 3']);
  });

  it('fails every job of the batch with the error it throws, and with ERR_BATCH_RESULT for a bad return', async () => {
    const name = uniqueName();
    const q = queue(name);
    const added = await addMany(q, 4, { maxAttempts: 1 });
    let call = 0;
    batchWorker(
      name,
      () => {
        call++;
        if (call === 1) throw new Error('batch broke');
        if (call === 2) return [1];
        return 'not a list';
      },
      { size: 2, minSize: 2, waitMs: 5_000 },
    );
    for (const a of added) await expect(q.waitFor(a.id)).rejects.toMatchObject({ code: 'ERR_JOB_DEAD' });
    const errors = await Promise.all(added.map(async (a) => (await q.getJob(a.id))!.errors[0]!));
    expect(errors.map((e) => e.code ?? e.message).sort()).toEqual([
      'ERR_BATCH_RESULT',
      'ERR_BATCH_RESULT',
      'batch broke',
      'batch broke',
    ]);
    expect(
      errors.find((e) => e.code === 'ERR_BATCH_RESULT' && e.message.includes('2 jobs, 1 outcomes')),
    ).toBeDefined();
    expect(call).toBe(2);
  });

  it('a job that times out fails alone; the batch slot frees when the processor returns', async () => {
    const name = uniqueName();
    const q = queue(name);
    const slow = await q.add({ n: 1 }, { timeoutMs: 100, maxAttempts: 1 });
    const fast = await q.add({ n: 2 }, { maxAttempts: 1 });
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    batchWorker(
      name,
      async (jobs) => {
        await gate;
        return jobs.map((j) => j.data.n);
      },
      { size: 2, minSize: 2, waitMs: 5_000 },
    );
    await expect(q.waitFor(slow.id)).rejects.toMatchObject({ code: 'ERR_JOB_DEAD' });
    expect((await q.getJob(slow.id))!.errors[0]!.code).toBe('ERR_TIMEOUT');
    // Not settled yet: the job without a timeout waits for the batch.
    expect((await q.getJob(fast.id))!.state).toBe('active');
    release();
    expect(await q.waitFor(fast.id)).toBe(2);
  });

  it('counts batches in concurrency: concurrency x size jobs run at once', async () => {
    const name = uniqueName();
    const q = queue(name);
    const added = await addMany(q, 20);
    const releases: (() => void)[] = [];
    let batches = 0;
    let jobsIn = 0;
    let mostBatches = 0;
    let mostJobs = 0;
    batchWorker(
      name,
      (jobs) => {
        batches++;
        jobsIn += jobs.length;
        mostBatches = Math.max(mostBatches, batches);
        mostJobs = Math.max(mostJobs, jobsIn);
        return new Promise((r) =>
          releases.push(() => {
            batches--;
            jobsIn -= jobs.length;
            r(jobs.map(() => 'done'));
          }),
        );
      },
      { size: 5 },
      { concurrency: 2, closeTimeoutMs: 100 },
    );
    await waitUntil(() => jobsIn === 10, 'two full batches running');
    const finished = Promise.all(added.map((a) => q.waitFor(a.id)));
    let settled = false;
    void finished.then(() => (settled = true));
    while (!settled) {
      const release = await waitUntil(() => releases.shift() ?? (settled ? () => {} : undefined), 'a batch');
      release();
    }
    expect(await finished).toEqual(added.map(() => 'done'));
    expect(mostBatches).toBe(2);
    expect(mostJobs).toBe(10);
  });

  it('claims nothing behind a running batch: its slot is busy until the processor returns', async () => {
    const name = uniqueName();
    const q = queue(name);
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const sizes: number[] = [];
    const w = batchWorker(
      name,
      async (jobs) => {
        sizes.push(jobs.length);
        if (sizes.length === 1) await gate;
        return jobs.map(() => 'ok');
      },
      { size: 5 },
      // No prefetch: 'auto' may claim a job or two ahead, as for single jobs (not the batch's 3 free places).
      { concurrency: 1, prefetch: 0, closeTimeoutMs: 100 },
    );
    const first = await addMany(q, 2);
    await waitUntil(() => sizes.length === 1, 'the first batch');
    const later = await addMany(q, 6);
    // While the first batch (2 jobs of its 5) runs, none of the later jobs is claimed into the
    // worker's buffer: they stay waiting, free for other workers, and hold no group slot.
    for (let i = 0; i < 5; i++) {
      await new Promise((r) => setImmediate(r));
      expect(w.diagnostics().buffered).toBe(0);
    }
    expect(await q.counts()).toMatchObject({ active: 2, waiting: 6 });
    release();
    for (const a of [...first, ...later]) expect(await q.waitFor(a.id)).toBe('ok');
    expect(sizes[0]).toBe(2);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(5);
  });

  it('waits up to waitMs for minSize jobs, then starts with what it has', async () => {
    const name = uniqueName();
    const q = queue(name);
    const calls: { size: number; at: number }[] = [];
    batchWorker(
      name,
      (jobs) => {
        calls.push({ size: jobs.length, at: Date.now() });
        return jobs.map(() => 'ok');
      },
      { size: 10, minSize: 5, waitMs: 300 },
    );
    const at = Date.now();
    const added = await addMany(q, 2);
    for (const a of added) await q.waitFor(a.id);
    expect(calls.map((c) => c.size)).toEqual([2]);
    // Timers may fire a millisecond early; the wait is 300 ms from when the short batch came up.
    expect(calls[0]!.at - at).toBeGreaterThanOrEqual(290);
  });

  it('refuses bad batch options with a typed error', () => {
    const fn = async () => [];
    const bad: [unknown, RegExp][] = [
      [{ size: 0 }, /batch.size must be an integer from 1 to 1000, got 0/],
      [{ size: 1_001 }, /batch.size/],
      [{ size: 10, minSize: 11 }, /batch.minSize/],
      [{ size: 10, waitMs: -1 }, /batch.waitMs/],
      [{ size: 10, extra: 1 }, /extra/],
    ];
    for (const [batch, message] of bad) {
      expect(() => new Worker('q', fn, { connection: fx.url, autostart: false, batch } as never)).toThrow(
        message,
      );
    }
    expect(
      () =>
        new Worker('q', fn, {
          connection: fx.url,
          autostart: false,
          concurrency: 11,
          batch: { size: 1_000 },
        }),
    ).toThrow(/concurrency x batch.size must be at most 10000 jobs, got 11 x 1000/);
    expect(
      () => new Worker('q', { a: fn }, { connection: fx.url, autostart: false, batch: { size: 2 } } as never),
    ).toThrow(/batch applies to a function processor/);
  });
});
