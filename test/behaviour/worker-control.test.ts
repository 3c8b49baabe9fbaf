/**
 * Everyday worker calls (issue 15): jobs routed by name to a map of processors, worker.pause() /
 * resume() (this worker only) and worker.concurrency changed at run time.
 */
import { describe, expect, it } from 'vitest';
import { Queue, SuretyError, ValidationError, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

function queue<D = unknown>() {
  const q = new Queue<D>(uniqueName(), { connection: fx.url });
  open.push(q);
  return q;
}

describe('a map of processors by job name', () => {
  it("runs each job's processor; '*' takes other names; a name without one ends dead unrun", async () => {
    const q = queue<number>();
    const w = new Worker<number, string>(
      q.name,
      {
        double: (job) => `double ${job.data * 2}`,
        square: (job) => `square ${job.data ** 2}`,
      },
      { connection: fx.url },
    );
    open.push(w);
    const a = await q.add(3, { name: 'double' });
    const b = await q.add(3, { name: 'square' });
    const c = await q.add(3, { name: 'cube' });
    const d = await q.add(3);
    expect(await q.waitFor(a.id)).toBe('double 6');
    expect(await q.waitFor(b.id)).toBe('square 9');
    for (const id of [c.id, d.id]) {
      await waitUntil(async () => (await q.getJob(id))?.state === 'dead', `${id} dead`);
      const info = (await q.getJob(id))!;
      expect(info.attempts).toBe(1);
      expect(info.errors[0]).toMatchObject({ code: 'ERR_UNRECOVERABLE' });
      expect(info.errors[0]!.message).toMatch(/no processor for job name/);
    }
    expect((await q.getJob(a.id))!.name).toBe('double');

    const w2 = new Worker<number, string>(
      q.name,
      { '*': (job) => `any ${job.name}` },
      { connection: fx.url },
    );
    open.push(w2);
    await w.close();
    const e = await q.add(1, { name: 'cube' });
    expect(await q.waitFor(e.id)).toBe('any cube');
  });

  it('refuses a map with no processor, or a value that is not a function', () => {
    expect(() => new Worker('q', {}, { connection: fx.url, autostart: false })).toThrow(ValidationError);
    expect(() => new Worker('q', { a: 'x' as never }, { connection: fx.url, autostart: false })).toThrow(
      ValidationError,
    );
    expect(() => new Worker('q', 42 as never, { connection: fx.url, autostart: false })).toThrow(SuretyError);
  });
});

describe('worker.pause() and resume()', () => {
  it('stops this worker claiming and hands its claimed jobs back; another worker runs them; resume claims again', async () => {
    const q = queue<number>();
    let release = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const ranBy: Record<string, string> = {};
    const a = new Worker<number>(
      q.name,
      async (job) => {
        ranBy[job.id] = 'a';
        if (job.data === 0) await gate;
      },
      { connection: fx.url, concurrency: 1, prefetch: 5 },
    );
    open.push(a);
    const first = await q.add(0);
    await waitUntil(() => ranBy[first.id] === 'a', 'a runs the first job');
    const rest = await q.addBulk(Array.from({ length: 5 }, (_, i) => ({ data: i + 1 })));
    await waitUntil(async () => (await q.counts()).active >= 2, 'a prefetched some');
    await a.pause();
    expect(a.isPaused).toBe(true);
    // Only the running job is still held: the prefetched ones went back at once.
    expect((await q.counts()).active).toBe(1);
    const b = new Worker<number>(
      q.name,
      (job) => {
        ranBy[job.id] = 'b';
      },
      { connection: fx.url },
    );
    open.push(b);
    for (const j of rest) await q.waitFor(j.id, { timeoutMs: 10_000 });
    expect(rest.map((j) => ranBy[j.id])).toEqual(Array(5).fill('b'));
    await b.close();
    // The running job finished while paused; with waitForRunning, pause resolves after it.
    const paused = a.pause({ waitForRunning: true });
    release();
    await paused;
    expect((await q.getJob(first.id))!.state).toBe('completed');
    a.resume();
    const later = await q.add(9);
    await q.waitFor(later.id, { timeoutMs: 10_000 });
    expect(ranBy[later.id]).toBe('a');
  });
});

describe('worker.concurrency', () => {
  it('raising it runs more jobs at once without a restart; lowering it runs fewer', async () => {
    const q = queue();
    let running = 0;
    let peak = 0;
    const gates: (() => void)[] = [];
    const w = new Worker(
      q.name,
      async () => {
        running++;
        peak = Math.max(peak, running);
        await new Promise<void>((r) => gates.push(r));
        running--;
      },
      { connection: fx.url, concurrency: 1, prefetch: 0 },
    );
    open.push(w);
    await q.addBulk(Array.from({ length: 8 }, () => ({ data: {} })));
    await waitUntil(() => running === 1, 'one running');
    expect(w.concurrency).toBe(1);
    w.concurrency = 4;
    await waitUntil(() => running === 4, 'four running');
    w.concurrency = 2;
    // Lowered: the four running finish, then never more than two run (4 jobs left: two rounds of 2).
    peak = 0;
    for (const g of gates.splice(0)) g();
    for (let round = 0; round < 2; round++) {
      await waitUntil(() => running === 2 && gates.length === 2, `round ${round} of two`);
      for (const g of gates.splice(0)) g();
    }
    await waitUntil(async () => (await q.counts()).completed === 8, 'all done');
    expect(peak).toBe(2);
    expect(() => {
      w.concurrency = 0;
    }).toThrow(ValidationError);
  });
});
