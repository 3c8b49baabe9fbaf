import { describe, expect, it } from 'vitest';
import { type Job, Queue, UnrecoverableError, Worker } from '../../src/index.js';
import { closeAfterEach, nextEvent, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
function queue<D = unknown, R = unknown>(name: string): Queue<D, R> {
  const q = new Queue<D, R>(name, { connection: fx.url });
  open.push(q);
  return q;
}
function worker<D, R>(name: string, fn: (job: Job<D>) => R | Promise<R>, opts = {}) {
  const w = new Worker<D, R>(name, fn, { connection: fx.url, ...opts });
  open.push(w);
  return w;
}

describe('Worker', () => {
  it('stores the processor result on the job and emits completed after it is persisted', async () => {
    const name = uniqueName();
    const q = queue<{ n: number }, number>(name);
    const w = worker<{ n: number }, number>(name, (job) => job.data.n * 2);
    const added = await q.add({ n: 21 });
    const [job, result] = await nextEvent<[Job<{ n: number }>, number]>(w, 'completed');
    expect(job.id).toBe(added.id);
    expect(result).toBe(42);
    const info = await q.getJob(added.id);
    expect(info).toMatchObject({ state: 'completed', result: 42, attempts: 1 });
    expect(info!.finishedAt).toBeGreaterThanOrEqual(info!.startedAt!);
  });

  it('diagnostics() reports the lease held and the job running, then nothing once it completed', async () => {
    const name = uniqueName();
    const q = queue(name);
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const w = worker(name, () => gate);
    const added = await q.add({});
    await waitUntil(() => w.activeCount === 1, 'running');
    const busy = w.diagnostics();
    expect(busy.running).toBe(1);
    expect(busy.lanes).toHaveLength(1);
    expect(busy.lanes[0]).toMatchObject({ partition: 0, held: [added.id], heldCount: 1, running: 1 });
    release();
    await q.waitFor(added.id);
    await waitUntil(() => w.diagnostics().lanes[0]!.heldCount === 0, 'lease forgotten');
    expect(w.diagnostics().lanes[0]).toMatchObject({ running: 0, outcomesPending: 0 });
  });

  it('a large payload is kept out of the record, yet every reader sees it; it goes with the job', async () => {
    const name = uniqueName();
    const q = queue<{ blob: string; n: number }, number>(name);
    const blob = 'é'.repeat(3_000);
    const seen: string[] = [];
    worker<{ blob: string; n: number }, number>(
      name,
      (job) => {
        seen.push(job.data.blob);
        return job.data.n;
      },
      { retention: { completed: { maxCount: 1 } } },
    );
    const big = await q.add({ blob, n: 1 }, { delayMs: 60_000 });
    // The record stays small: claim and complete rewrite it without copying the payload.
    expect((await fx.redis.hget(q.keys.jobs, big.id))!.length).toBeLessThan(100);
    expect((await q.getJob(big.id))!.data).toEqual({ blob, n: 1 });
    expect((await q.getJobs('delayed'))[0]!.data.blob).toBe(blob);
    await q.promote(big.id);
    expect(await q.waitFor(big.id)).toBe(1);
    expect(seen).toEqual([blob]);
    expect((await q.getJob(big.id))!.data.blob).toBe(blob);
    // Retention trims it (maxCount 1) once another job completes: the payload goes too.
    const next = await q.add({ blob: 'small', n: 2 });
    await q.waitFor(next.id);
    await waitUntil(async () => (await q.getJob(big.id)) === null, 'trimmed');
    expect(await fx.redis.hexists(q.keys.annex, `${big.id}\x01b`)).toBe(0);
  });

  it('never runs more than `concurrency` jobs at once', async () => {
    const name = uniqueName();
    const q = queue(name);
    let running = 0;
    let peak = 0;
    worker(
      name,
      async () => {
        running++;
        peak = Math.max(peak, running);
        await new Promise((r) => setImmediate(r));
        await new Promise((r) => setTimeout(r, 2));
        running--;
      },
      { concurrency: 4 },
    );
    const added = await q.addBulk(Array.from({ length: 60 }, () => ({ data: {} })));
    await q.waitFor(added[59]!.id);
    await waitUntil(async () => (await q.counts()).completed === 60, 'all completed');
    expect(peak).toBe(4);
  });

  it('retries a failing job with backoff and keeps every attempt error', async () => {
    const name = uniqueName();
    const q = queue<unknown, string>(name);
    const starts: number[] = [];
    worker(name, (job) => {
      starts.push(Date.now());
      if (job.attempt < 3) throw new TypeError(`flaky ${job.attempt}`);
      return 'third time';
    });
    const job = await q.add({}, { backoff: { type: 'fixed', delayMs: 150 } });
    expect(await q.waitFor(job.id)).toBe('third time');
    const info = await q.getJob(job.id);
    expect(info!.attempts).toBe(3);
    expect(info!.errors.map((e) => [e.attempt, e.name, e.message])).toEqual([
      [1, 'TypeError', 'flaky 1'],
      [2, 'TypeError', 'flaky 2'],
    ]);
    expect(info!.errors[0]!.stack).toContain('flaky 1');
    // Backoff is decided on the Redis clock; the worker clock is the same machine's here.
    expect(starts[1]! - starts[0]!).toBeGreaterThanOrEqual(145);
    expect(starts[2]! - starts[1]!).toBeGreaterThanOrEqual(145);
  });

  it('exponential backoff doubles, capped at maxDelayMs; a custom strategy is called by name', async () => {
    const name = uniqueName();
    const q = queue(name);
    const calls: number[] = [];
    const runAts = new Map<string, number[]>();
    const w = worker(
      name,
      (job) => {
        runAts.set(job.id, [...(runAts.get(job.id) ?? []), job.runAt]);
        throw new Error('no');
      },
      {
        backoffStrategies: {
          linear: (attempt: number) => {
            calls.push(attempt);
            return attempt * 10;
          },
        },
      },
    );
    const delays: number[] = [];
    w.on('failed', (job, _err, outcome) => {
      if (outcome === 'delayed') delays.push(job.attempt);
    });
    const exp = await q.add(
      {},
      { maxAttempts: 4, backoff: { type: 'exponential', delayMs: 20, maxDelayMs: 50 } },
    );
    const custom = await q.add({}, { maxAttempts: 3, backoff: { type: 'custom', name: 'linear' } });
    await expect(q.waitFor(exp.id)).rejects.toThrow('no');
    await expect(q.waitFor(custom.id)).rejects.toThrow('no');
    // Each retry is due its backoff after the failure before it (both times come from the failing
    // script's one clock read), so the backoff is checked exactly: a bound on the time between failures
    // would also measure how soon a busy machine got to run the retry.
    const backoffs = async (id: string) => {
      const { errors } = (await q.getJob(id))!;
      return runAts
        .get(id)!
        .slice(1)
        .map((due, i) => due - errors[i]!.at);
    };
    expect(await backoffs(exp.id)).toEqual([20, 40, 50]); // 20, 40, then 80 capped at 50
    expect(await backoffs(custom.id)).toEqual([10, 20]); // linear: attempt * 10
    // And each attempt ended at least its backoff after the one before.
    const info = await q.getJob(exp.id);
    const gaps = info!.errors.slice(1).map((e, i) => e.at - info!.errors[i]!.at);
    expect(gaps[0]).toBeGreaterThanOrEqual(20);
    expect(gaps[1]).toBeGreaterThanOrEqual(40);
    expect(gaps[2]).toBeGreaterThanOrEqual(50);
    expect(calls).toEqual([1, 2]);
  });

  it('emits active as each attempt starts, before its outcome; a throwing active listener changes nothing', async () => {
    const name = uniqueName();
    const q = queue(name);
    const seen: string[] = [];
    const errors: unknown[] = [];
    const w = worker(name, (job) => {
      seen.push(`run ${job.attempt}`);
      if (job.attempt === 1) throw new Error('again');
      return 'ok';
    });
    w.on('error', (err) => errors.push(err));
    w.on('active', (job) => {
      seen.push(`active ${job.attempt}`);
      throw new Error('listener bug');
    });
    w.on('failed', (job) => seen.push(`failed ${job.attempt}`));
    w.on('completed', (job) => seen.push(`completed ${job.attempt}`));
    const added = await q.add({}, { backoff: { type: 'fixed', delayMs: 0 } });
    expect(await q.waitFor(added.id)).toBe('ok');
    await waitUntil(() => seen.includes('completed 2'), 'the completed event');
    expect(seen).toEqual(['active 1', 'run 1', 'failed 1', 'active 2', 'run 2', 'completed 2']);
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatchObject({ code: 'ERR_LISTENER', event: 'active' });
    expect(await q.getJob(added.id)).toMatchObject({ state: 'completed', attempts: 2 });
  });

  it('a custom strategy that returns -1 or false ends the job dead at once, with the attempt error', async () => {
    const name = uniqueName();
    const q = queue(name);
    const errors: unknown[] = [];
    const runs = new Map<string, number>();
    const w = worker(
      name,
      (job) => {
        runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
        throw new Error(`failed ${(job.data as { n: number }).n}`);
      },
      {
        backoffStrategies: {
          // Retry once after 5 ms, then give up: -1 on the second failure.
          minusOne: (attempt: number) => (attempt < 2 ? 5 : -1),
          never: () => false,
          // Neither a delay nor "no retry": reported, and retried at once.
          odd: (attempt: number) => (attempt < 2 ? -2 : false),
        },
      },
    );
    w.on('error', (err) => errors.push(err));
    const opts = (strategy: string) =>
      ({ maxAttempts: 5, backoff: { type: 'custom', name: strategy } }) as const;
    const a = await q.add({ n: 1 }, opts('minusOne'));
    const b = await q.add({ n: 2 }, opts('never'));
    const c = await q.add({ n: 3 }, opts('odd'));
    for (const [job, msg] of [
      [a, 'failed 1'],
      [b, 'failed 2'],
      [c, 'failed 3'],
    ] as const)
      await expect(q.waitFor(job.id)).rejects.toMatchObject({
        code: 'ERR_JOB_DEAD',
        message: expect.stringContaining(msg),
      });
    expect([runs.get(a.id), runs.get(b.id), runs.get(c.id)]).toEqual([2, 1, 2]);
    for (const [job, attempts] of [
      [a, 2],
      [b, 1],
      [c, 2],
    ] as const) {
      const info = (await q.getJob(job.id))!;
      expect(info).toMatchObject({ state: 'dead', attempts });
      expect(info.errors).toHaveLength(attempts);
    }
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({
      code: 'ERR_INVALID_OPTION',
      message: expect.stringContaining('returned -2'),
    });
  });

  it('an UnrecoverableError ends the job dead at once, without retries', async () => {
    const name = uniqueName();
    const q = queue(name);
    let runs = 0;
    worker(name, () => {
      runs++;
      throw new UnrecoverableError('card declined');
    });
    const job = await q.add({}, { maxAttempts: 5 });
    await expect(q.waitFor(job.id)).rejects.toMatchObject({ code: 'ERR_JOB_DEAD' });
    const info = await q.getJob(job.id);
    expect(runs).toBe(1);
    expect(info).toMatchObject({ state: 'dead', attempts: 1 });
    expect(info!.errors[0]).toMatchObject({
      name: 'UnrecoverableError',
      code: 'ERR_UNRECOVERABLE',
      message: 'card declined',
    });
  });

  it('a job that throws a non-Error still fails cleanly', async () => {
    const name = uniqueName();
    const q = queue(name);
    worker(name, () => {
      throw 'a string';
    });
    const job = await q.add({}, { maxAttempts: 1 });
    await expect(q.waitFor(job.id)).rejects.toThrow('a string');
  });

  it('a result that is not JSON fails the attempt with ERR_NOT_SERIALIZABLE', async () => {
    const name = uniqueName();
    const q = queue(name);
    worker(name, () => new Map([[1, 2]]));
    const job = await q.add({}, { maxAttempts: 1 });
    await expect(q.waitFor(job.id)).rejects.toThrow(/Map/);
    expect((await q.getJob(job.id))!.errors[0]!.code).toBe('ERR_NOT_SERIALIZABLE');
  });

  it('retention keeps only the newest completed jobs, and maxCount 0 deletes them at once', async () => {
    const name = uniqueName();
    const q = queue(name);
    worker(name, () => null, { retention: { completed: { maxCount: 5 } }, concurrency: 10 });
    const added = await q.addBulk(Array.from({ length: 40 }, () => ({ data: {} })));
    await waitUntil(async () => {
      const c = await q.counts();
      return c.waiting === 0 && c.active === 0;
    }, 'all processed');
    expect((await q.counts()).completed).toBe(5);
    expect(await q.getJob(added[0]!.id)).toBeNull();
    expect(await fx.redis.hlen(q.keys.jobs)).toBe(5);

    const name2 = uniqueName();
    const q2 = queue(name2);
    worker(name2, () => null, { retention: { completed: { maxCount: 0 } } });
    await q2.addBulk(Array.from({ length: 10 }, () => ({ data: {} })));
    await waitUntil(async () => (await fx.redis.hlen(q2.keys.jobs)) === 0, 'records deleted');
    expect(await q2.counts()).toEqual({
      waiting: 0,
      delayed: 0,
      blocked: 0,
      active: 0,
      completed: 0,
      dead: 0,
    });
  });

  it('close waits for running jobs to finish and persists their outcome', async () => {
    const name = uniqueName();
    const q = queue(name);
    let started!: () => void;
    const startedP = new Promise<void>((r) => {
      started = r;
    });
    const w = new Worker(
      name,
      async () => {
        started();
        await new Promise((r) => setTimeout(r, 100));
        return 'finished';
      },
      { connection: fx.url },
    );
    const job = await q.add({});
    await startedP;
    const closing = w.close();
    const more = await q.add({});
    await closing;
    expect(await q.getJob(job.id)).toMatchObject({ state: 'completed', result: 'finished' });
    // Closing stopped claiming: a job added meanwhile is still waiting.
    expect((await q.getJob(more.id))!.state).toBe('waiting');
  });

  it('close with a timeout aborts the signal of jobs still running and fails their attempt with ERR_CLOSED at once', async () => {
    const name = uniqueName();
    const q = queue(name);
    let signal!: AbortSignal;
    const w = new Worker(
      name,
      (job) => {
        signal = job.signal;
        return new Promise(() => {}); // never settles
      },
      { connection: fx.url },
    );
    const job = await q.add({});
    await waitUntil(() => signal, 'job running');
    await w.close({ timeoutMs: 50 });
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toMatchObject({ code: 'ERR_CLOSED' });
    // Recorded and retried like any failure (not left active until the lease expires).
    const info = await q.getJob(job.id);
    expect(info).toMatchObject({ state: 'delayed', attempts: 1 });
    expect(info!.errors.map((e) => e.code)).toEqual(['ERR_CLOSED']);
  });

  it('starts a delayed job no earlier than its due time', async () => {
    const name = uniqueName();
    const q = queue(name);
    const started = new Map<string, number>();
    worker(
      name,
      (job) => {
        started.set(job.id, Date.now());
      },
      { concurrency: 5 },
    );
    const jobs = await Promise.all([100, 250, 400].map((delayMs) => q.add({}, { delayMs })));
    await Promise.all(jobs.map((j) => q.waitFor(j.id)));
    for (const j of jobs) {
      const info = await q.getJob(j.id);
      // startedAt is on the Redis clock, as is runAt: never early.
      expect(info!.startedAt).toBeGreaterThanOrEqual(info!.runAt);
      // Generous bound; precise lateness is measured by the benchmark.
      expect(info!.startedAt! - info!.runAt).toBeLessThan(1_000);
    }
  });

  it('many workers promoting the same due jobs never run one twice', async () => {
    const name = uniqueName();
    const q = queue(name);
    const runs = new Map<string, number>();
    for (let i = 0; i < 5; i++) {
      worker(
        name,
        (job) => {
          runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
        },
        { concurrency: 20 },
      );
    }
    const due = Date.now() + 300;
    const added = await q.addBulk(Array.from({ length: 500 }, () => ({ data: {}, opts: { runAt: due } })));
    await waitUntil(async () => (await q.counts()).completed >= 500 || runs.size === 500, '500 runs', 15_000);
    await waitUntil(async () => (await q.counts()).active === 0, 'no active');
    expect(runs.size).toBe(500);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(added.every((a) => a.state === 'delayed')).toBe(true);
  });
});
