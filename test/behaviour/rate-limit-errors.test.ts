/**
 * RateLimitError is a pause only when the library made it (issue 33, defect 3): in a sandbox an
 * error is rebuilt as a library class by the marker the sandbox side sets from its prototype, never
 * by its name; a delay that its constructor would refuse makes an ordinary failure; and rate limits
 * count toward the Worker's maxSnoozes, so RateLimitError(0) thrown on every run cannot loop.
 */
import { describe, expect, it } from 'vitest';
import { type Job, Queue, RateLimitError, SnoozeLimitError, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
const LOOKALIKE = new URL('../fixtures/sandbox/lookalike-errors.mjs', import.meta.url);

function setup(processor: URL | ((job: Job) => unknown), opts: ConstructorParameters<typeof Worker>[2] = {}) {
  const name = uniqueName();
  const q = new Queue(name, { connection: fx.url });
  const w = new Worker(name, processor as URL, { connection: fx.url, ...opts });
  const failed: Error[] = [];
  let rateLimited = 0;
  w.on('failed', (_job: Job, err: Error) => failed.push(err));
  w.on('rateLimited', () => rateLimited++);
  open.push(w, q);
  return { q, failed, rateLimited: () => rateLimited };
}

describe('errors that only look like a RateLimitError', () => {
  it.each(['thread', 'process'] as const)(
    'in a %s sandbox, a class named RateLimitError, forged marker fields and a bad delayMs are ordinary failures',
    async (mode) => {
      const { q, failed, rateLimited } = setup(LOOKALIKE, { sandbox: mode });
      const modes = ['named', 'forged', 'bad-delay'];
      const jobs = await q.addBulk(modes.map((m) => ({ data: { mode: m }, opts: { maxAttempts: 1 } })));
      await waitUntil(() => failed.length === 3, 'three failed events', 20_000);
      for (const j of jobs) {
        const info = await q.getJob(j.id);
        expect(info).toMatchObject({ state: 'dead', attempts: 1, snoozes: 0 });
        expect(info!.errors).toHaveLength(1);
        expect(info!.errors[0]!.name).toBe('RateLimitError');
      }
      expect(failed.map((e) => e instanceof RateLimitError)).toEqual([false, false, true]);
      expect(rateLimited()).toBe(0);
      // The real class still pauses: its delayMs crosses with it.
      const real = await q.add({ mode: 'real' });
      expect(await q.waitFor(real.id)).toEqual({ snoozes: 1 });
      expect(rateLimited()).toBe(1);
    },
    60_000,
  );

  it('inline, a RateLimitError whose delayMs was changed to one the constructor refuses is an ordinary failure', async () => {
    const { q, failed, rateLimited } = setup(() => {
      const err = new RateLimitError(10);
      Object.defineProperty(err, 'delayMs', { value: -5 });
      throw err;
    });
    const job = await q.add({}, { maxAttempts: 1 });
    await waitUntil(() => failed.length === 1, 'the failed event');
    expect(await q.getJob(job.id)).toMatchObject({ state: 'dead', attempts: 1, snoozes: 0 });
    expect(rateLimited()).toBe(0);
  });
});

describe('rate limits count toward maxSnoozes', () => {
  it('a processor throwing RateLimitError(0) on every run ends with SnoozeLimitError after maxSnoozes', async () => {
    let runs = 0;
    const { q, failed, rateLimited } = setup(
      () => {
        runs++;
        throw new RateLimitError(0);
      },
      { maxSnoozes: 3 },
    );
    const job = await q.add({}, { maxAttempts: 1 });
    await waitUntil(() => failed.length === 1, 'the failed event');
    expect(failed[0]).toBeInstanceOf(SnoozeLimitError);
    const info = (await q.getJob(job.id))!;
    // Four starts: three gave their budget back, the fourth was charged (maxAttempts 1).
    expect(info).toMatchObject({ state: 'dead', attempts: 4, attemptsLeft: 0, snoozes: 3 });
    expect(info.errors.map((e) => e.code)).toEqual(['ERR_SNOOZE_LIMIT']);
    expect(runs).toBe(4);
    expect(rateLimited()).toBe(3);
  });
});
