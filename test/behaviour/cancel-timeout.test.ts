import { describe, expect, it } from 'vitest';
import { InvalidStateError, type Job, JobFailedError, Queue, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
function setup<D = unknown, R = unknown>(fn: (job: Job<D>) => R | Promise<R>, opts = {}) {
  const name = uniqueName();
  const q = new Queue<D, R>(name, { connection: fx.url });
  const w = new Worker<D, R>(name, fn, { connection: fx.url, ...opts });
  open.push(q, w);
  return { q, w };
}

describe('timeouts', () => {
  it('an attempt that runs past timeoutMs fails with TimeoutError, its signal aborts, and it is retried', async () => {
    const signals: AbortSignal[] = [];
    const { q } = setup<unknown, string>(async (job) => {
      signals.push(job.signal);
      if (job.attempt === 1) await new Promise(() => {}); // hangs
      return 'second try';
    });
    const job = await q.add({}, { timeoutMs: 100, backoff: { type: 'fixed', delayMs: 0 } });
    expect(await q.waitFor(job.id)).toBe('second try');
    const info = await q.getJob(job.id);
    expect(info!.errors).toEqual([
      expect.objectContaining({ attempt: 1, code: 'ERR_TIMEOUT', name: 'TimeoutError' }),
    ]);
    expect(info!.timeoutMs).toBe(100);
    expect(signals[0]!.aborted).toBe(true);
    expect(signals[0]!.reason).toMatchObject({ code: 'ERR_TIMEOUT' });
    expect(signals[1]!.aborted).toBe(false);
  });

  it('a processor that settles after its timeout does not change the outcome', async () => {
    let settledLate!: () => void;
    const late = new Promise<void>((r) => {
      settledLate = r;
    });
    const { q } = setup<unknown, string>(async () => {
      await new Promise((r) => setTimeout(r, 150));
      setImmediate(settledLate); // after the worker has seen this late result
      return 'too late';
    });
    const job = await q.add({}, { timeoutMs: 50, maxAttempts: 1 });
    const err = await q.waitFor(job.id).catch((e) => e);
    expect(err).toBeInstanceOf(JobFailedError);
    await late;
    expect(await q.getJob(job.id)).toMatchObject({ state: 'dead', attempts: 1 });
  });
});

describe('cancellation', () => {
  it('cancelling a waiting or delayed job ends it dead at once with a CancelledError', async () => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url });
    open.push(q);
    const a = await q.add({});
    const b = await q.add({}, { delayMs: 60_000, priority: 3 });
    await q.cancel(a.id);
    await q.cancel(b.id);
    expect(await q.counts()).toEqual({
      waiting: 0,
      delayed: 0,
      blocked: 0,
      active: 0,
      completed: 0,
      dead: 2,
    });
    const info = await q.getJob(b.id);
    expect(info).toMatchObject({ state: 'dead', attempts: 0 });
    expect(info!.errors[0]).toMatchObject({ code: 'ERR_CANCELLED', name: 'CancelledError' });
    await expect(q.waitFor(a.id)).rejects.toMatchObject({ code: 'ERR_JOB_DEAD' });
    await expect(q.cancel(a.id)).rejects.toBeInstanceOf(InvalidStateError);
    await expect(q.cancel('missing')).rejects.toMatchObject({ code: 'ERR_JOB_NOT_FOUND' });
  });

  it('a cancelled running job is aborted through its signal, goes dead and is not retried', async () => {
    let started = 0;
    let aborted: unknown;
    const { q, w } = setup((job) => {
      started++;
      return new Promise((_, reject) => {
        job.signal.addEventListener('abort', () => {
          aborted = job.signal.reason;
          reject(job.signal.reason);
        });
      });
    });
    const errors: unknown[] = [];
    w.on('error', (e) => errors.push(e));
    const job = await q.add({}, { maxAttempts: 5 });
    await waitUntil(async () => (await q.getJob(job.id))?.state === 'active', 'job running');
    await q.cancel(job.id);
    await waitUntil(() => aborted, 'signal aborted');
    expect(aborted).toMatchObject({ code: 'ERR_CANCELLED' });
    await waitUntil(() => w.activeCount === 0, 'slot freed');
    const info = await q.getJob(job.id);
    expect(info).toMatchObject({ state: 'dead', attempts: 1 });
    expect(info!.errors.map((e) => e.code)).toEqual(['ERR_CANCELLED']);
    expect(started).toBe(1);
    expect(errors).toEqual([]);
    // The worker carries on with other jobs.
    const next = await q.add({}, { timeoutMs: 50, maxAttempts: 1 });
    await expect(q.waitFor(next.id)).rejects.toMatchObject({ code: 'ERR_JOB_DEAD' });
  });
});
