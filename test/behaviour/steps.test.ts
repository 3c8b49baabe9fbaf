/**
 * Durable steps (issue 15): job.step stores a step's result with the job, fenced by the attempt's
 * lease, and a later attempt (after a failure or a crash) gets it back without running the step
 * again; job.sleep is a durable sleep; job.updateData replaces the data, fenced too.
 */
import { fork } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { LeaseExpiredError, Queue, ValidationError, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
const children: ReturnType<typeof fork>[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
});

function queue<D = unknown>() {
  const q = new Queue<D>(uniqueName(), { connection: fx.url });
  open.push(q);
  return q;
}

describe('job.step', () => {
  it('runs a step once: a retried attempt gets the stored result back without running it', async () => {
    const q = queue();
    let charged = 0;
    const w = new Worker(
      q.name,
      async (job) => {
        const charge = await job.step('charge', () => {
          charged++;
          return { id: `ch_${charged}` };
        });
        const nothing = await job.step('log', () => undefined);
        if (job.attempt === 1) throw new Error('the mail server is down');
        return { charge, nothing };
      },
      { connection: fx.url, backoffStrategies: {} },
    );
    open.push(w);
    const { id } = await q.add({}, { backoff: { type: 'fixed', delayMs: 10 } });
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toEqual({ charge: { id: 'ch_1' } });
    expect(charged).toBe(1);
    const info = (await q.getJob(id))!;
    expect(info.attempts).toBe(2);
    expect(info.steps).toEqual({ charge: { id: 'ch_1' }, log: undefined });
    expect(Object.keys(info.steps!)).toEqual(['charge', 'log']);
  });

  it('a crashed worker (kill -9) leaves its stored steps: the next attempt replays them', async () => {
    const q = queue();
    const leaseMs = 500;
    const child = fork(
      new URL('../fixtures/step-child.ts', import.meta.url).pathname,
      [fx.url, q.name, String(leaseMs)],
      {
        execArgv: ['--import', 'tsx'],
        stdio: 'pipe',
      },
    );
    children.push(child);
    const stored = new Promise<string>((resolve) =>
      child.on('message', (m: { stored?: string; charge?: string }) => {
        if (m.stored) resolve(m.charge!);
      }),
    );
    const { id } = await q.add({}, { leaseMs });
    const charge = await stored;
    child.kill('SIGKILL');
    let ran = 0;
    const w = new Worker(
      q.name,
      (job) =>
        job.step('charge', () => {
          ran++;
          return 'charged again';
        }),
      { connection: fx.url, recoverIntervalMs: 50 },
    );
    open.push(w);
    expect(await q.waitFor(id, { timeoutMs: 15_000 })).toBe(charge);
    expect(ran).toBe(0);
  });

  it('an attempt that lost its job (cancelled, removed) runs no step body: job.step throws LeaseExpiredError', async () => {
    const q = queue();
    let ran = false;
    let release = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let thrown: unknown;
    const w = new Worker(
      q.name,
      async (job) => {
        await gate;
        try {
          await job.step('late', () => {
            ran = true;
            return 'x';
          });
        } catch (err) {
          thrown = err;
        }
      },
      { connection: fx.url },
    );
    open.push(w);
    const { id } = await q.add({});
    await waitUntil(async () => (await q.getJob(id))?.state === 'active', 'running');
    await q.cancel(id);
    await q.remove(id); // gone, as a job completed elsewhere and trimmed: nothing stored to find
    release();
    await waitUntil(() => thrown !== undefined, 'the step refused');
    expect(thrown).toBeInstanceOf(LeaseExpiredError);
    expect(ran).toBe(false);
    expect(await q.getJob(id)).toBeNull();
  });

  it('bounds the steps of a job at 1 000', async () => {
    const q = queue();
    const w = new Worker(
      q.name,
      async (job) => {
        // In parallel: 1 000 round trips one after the other take too long on a loaded machine.
        await Promise.all(Array.from({ length: 1_000 }, (_, i) => job.step(`s${i}`, () => i)));
        await job.step('s0', () => -1); // stored already: replayed, not a new step
        return job.step('one-too-many', () => 0);
      },
      { connection: fx.url },
    );
    open.push(w);
    const { id } = await q.add({}, { maxAttempts: 1 });
    await waitUntil(async () => (await q.getJob(id))?.state === 'dead', 'dead', 20_000);
    const info = (await q.getJob(id))!;
    expect(info.errors[0]!.message).toMatch(/at most 1000 steps per job/);
    expect(Object.keys(info.steps!)).toHaveLength(1_000);
  });

  it('bounds the steps of a job at 1 MiB, and refuses bad step names', async () => {
    const q = queue();
    const errors: string[] = [];
    const w = new Worker(
      q.name,
      async (job) => {
        for (const bad of ['', 'a\tb', 'x'.repeat(257), '~sleep:0']) {
          await job.step(bad, () => 1).catch((e: Error) => errors.push(e.constructor.name));
        }
        // writeStep is what a sandbox's job.step calls over its channel: it checks the name too.
        await job.writeStep('a\nb', 1).catch((e: Error) => errors.push(e.constructor.name));
        await job.step('big1', () => 'a'.repeat(400_000));
        await job.step('big2', () => 'b'.repeat(400_000));
        await job.step('big3', () => 'c'.repeat(400_000));
      },
      { connection: fx.url },
    );
    open.push(w);
    const { id } = await q.add({}, { maxAttempts: 1 });
    await waitUntil(async () => (await q.getJob(id))?.state === 'dead', 'dead');
    expect(errors).toEqual(Array(5).fill(ValidationError.name));
    const info = (await q.getJob(id))!;
    expect(info.errors[0]!.code).toBe('ERR_PAYLOAD_TOO_LARGE');
    expect(Object.keys(info.steps!)).toEqual(['big1', 'big2']);
  });
});

describe('job.sleep', () => {
  it('delays the job without spending its budget; the next attempt passes the sleep and replays steps', async () => {
    const q = queue();
    const log: string[] = [];
    const w = new Worker(
      q.name,
      async (job) => {
        log.push(`run ${job.attempt}`);
        const a = await job.step('a', () => {
          log.push('step a');
          return 1;
        });
        await job.sleep(300);
        log.push('woke');
        return a + 1;
      },
      { connection: fx.url },
    );
    open.push(w);
    const { id } = await q.add({}, { maxAttempts: 1 });
    await waitUntil(async () => (await q.getJob(id))?.state === 'delayed', 'asleep (delayed)');
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toBe(2);
    // Two starts, one charged: maxAttempts 1 still completes.
    expect(log).toEqual(['run 1', 'step a', 'run 2', 'woke']);
    expect(await q.getJob(id)).toMatchObject({
      state: 'completed',
      attempts: 2,
      attemptsLeft: 0,
      snoozes: 1,
      errors: [],
    });
  });
});

describe('job.updateData', () => {
  it('replaces the data for later attempts (large payloads too), fenced by the lease', async () => {
    const q = queue<{ n: number; pad?: string }>();
    const w = new Worker<{ n: number; pad?: string }>(
      q.name,
      async (job) => {
        if (job.attempt === 1) {
          await job.updateData({ n: job.data.n + 1, pad: 'p'.repeat(2_000) });
          expect(job.data.n).toBe(2);
          throw new Error('again');
        }
        return job.data.n;
      },
      { connection: fx.url },
    );
    open.push(w);
    const { id } = await q.add({ n: 1 }, { backoff: { type: 'fixed', delayMs: 10 } });
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toBe(2);
    expect((await q.getJob(id))!.data).toEqual({ n: 2, pad: 'p'.repeat(2_000) });
  });

  it('an attempt that lost its job cannot update its data', async () => {
    const q = queue<{ n: number }>();
    let release = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let thrown: unknown;
    const w = new Worker<{ n: number }>(
      q.name,
      async (job) => {
        await gate;
        await job.updateData({ n: 99 }).catch((e) => {
          thrown = e;
        });
      },
      { connection: fx.url },
    );
    open.push(w);
    const { id } = await q.add({ n: 1 });
    await waitUntil(async () => (await q.getJob(id))?.state === 'active', 'running');
    await q.cancel(id);
    release();
    await waitUntil(() => thrown !== undefined, 'refused');
    expect(thrown).toBeInstanceOf(LeaseExpiredError);
    expect((await q.getJob(id))!.data).toEqual({ n: 1 });
  });
});
