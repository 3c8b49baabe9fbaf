/**
 * Dedupe (add's `dedupe` option): throttle while the job is unfinished or for a ttl, debounce that
 * rewrites the pending job, concurrent adds from several processes, and the queue-wide stored rate
 * limit (setRateLimit).
 */
import { fork } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { Queue, ValidationError, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

function queue(name = uniqueName()) {
  const q = new Queue<{ n: number }>(name, { connection: fx.url });
  open.push(q);
  return q;
}

const ADDER = new URL('../fixtures/dedupe-adder.ts', import.meta.url).pathname;

describe('dedupe: throttle', () => {
  it('while the job is unfinished, adds with its key return it and enqueue nothing; its end frees the key', async () => {
    const q = queue();
    const first = await q.add({ n: 1 }, { dedupe: { key: 'sync:42' } });
    expect(first).toMatchObject({ isNew: true, state: 'waiting' });
    const again = await q.add({ n: 2 }, { dedupe: { key: 'sync:42' } });
    expect(again).toEqual({ id: first.id, isNew: false, state: 'waiting' });
    const [bulkA, bulkB] = await q.addBulk([
      { data: { n: 3 }, opts: { dedupe: { key: 'sync:42' } } },
      { data: { n: 4 }, opts: { dedupe: { key: 'other' } } },
    ]);
    expect(bulkA).toMatchObject({ id: first.id, isNew: false });
    expect(bulkB).toMatchObject({ isNew: true });
    expect((await q.counts()).waiting).toBe(2);
    expect((await q.getJob(first.id))?.data).toEqual({ n: 1 });
    const w = new Worker(q.name, () => 'ok', { connection: fx.url });
    open.push(w);
    await waitUntil(async () => (await q.counts()).completed === 2, 'both completed');
    const next = await q.add({ n: 5 }, { dedupe: { key: 'sync:42' } });
    expect(next.isNew).toBe(true);
    expect(next.id).not.toBe(first.id);
  });

  it('with ttlMs the window lasts from the add, also after the job finished, and ends with the ttl', async () => {
    const q = queue();
    const w = new Worker(q.name, () => 'ok', { connection: fx.url });
    open.push(w);
    const first = await q.add({ n: 1 }, { dedupe: { key: 'k', ttlMs: 400 } });
    await waitUntil(async () => (await q.getJob(first.id))?.state === 'completed', 'first completed');
    const during = await q.add({ n: 2 }, { dedupe: { key: 'k', ttlMs: 400 } });
    expect(during).toEqual({ id: first.id, isNew: false, state: 'completed' });
    const after = await waitUntil(async () => {
      const r = await q.add({ n: 3 }, { dedupe: { key: 'k', ttlMs: 400 } });
      return r.isNew ? r : null;
    }, 'a new job once the ttl passed');
    expect(after.id).not.toBe(first.id);
  });

  it('a dead, cancelled or removed job frees its key', async () => {
    const q = queue();
    const a = await q.add({ n: 1 }, { dedupe: { key: 'k' } });
    await q.cancel(a.id);
    const b = await q.add({ n: 2 }, { dedupe: { key: 'k' } });
    expect(b.isNew).toBe(true);
    await q.remove(b.id);
    const c = await q.add({ n: 3 }, { dedupe: { key: 'k' }, maxAttempts: 1 });
    expect(c.isNew).toBe(true);
    const w = new Worker(
      q.name,
      () => {
        throw new Error('no');
      },
      { connection: fx.url },
    );
    open.push(w);
    await waitUntil(async () => (await q.getJob(c.id))?.state === 'dead', 'c dead');
    expect((await q.add({ n: 4 }, { dedupe: { key: 'k' } })).isNew).toBe(true);
  });

  it('with ttlMs, a job removed, drained or cancelled before it ran gives its window back: the next add is new', async () => {
    const q = queue();
    const opts = { dedupe: { key: 'k', ttlMs: 60_000 } };
    const a = await q.add({ n: 1 }, opts);
    await q.remove(a.id);
    const b = await q.add({ n: 2 }, opts);
    expect(b).toMatchObject({ isNew: true, state: 'waiting' });
    expect(b.id).not.toBe(a.id);
    await q.cancel(b.id);
    const c = await q.add({ n: 3 }, { ...opts, delayMs: 60_000 });
    expect(c).toMatchObject({ isNew: true, state: 'delayed' });
    expect(await q.drain()).toBe(1);
    const d = await q.add({ n: 4 }, opts);
    expect(d.isNew).toBe(true);
    // A job that ran keeps its window after it is removed: the add answers it, as it ran.
    const w = new Worker(q.name, () => 'ok', { connection: fx.url });
    open.push(w);
    await waitUntil(async () => (await q.getJob(d.id))?.state === 'completed', 'd completed');
    await q.remove(d.id);
    expect(await q.add({ n: 5 }, opts)).toEqual({ id: d.id, isNew: false, state: 'completed' });
  });

  it('an explicit id that exists wins over the key; a key held by another job wins over a new id', async () => {
    const q = queue();
    await q.add({ n: 1 }, { id: 'mine' });
    const held = await q.add({ n: 2 }, { id: 'holder', dedupe: { key: 'k' } });
    expect(await q.add({ n: 3 }, { id: 'mine', dedupe: { key: 'k' } })).toMatchObject({
      id: 'mine',
      isNew: false,
    });
    expect(await q.add({ n: 4 }, { id: 'fresh', dedupe: { key: 'k' } })).toMatchObject({
      id: held.id,
      isNew: false,
    });
    expect(await q.getJob('fresh')).toBeNull();
  });
});

describe('dedupe: debounce', () => {
  it('adds within the window replace the pending job and push its due time back; only the last runs', async () => {
    const q = queue();
    const first = await q.add({ n: 1 }, { dedupe: { key: 'd', mode: 'debounce' }, delayMs: 300 });
    const before = (await q.getJob(first.id))!.runAt;
    const second = await q.add(
      { n: 2 },
      { dedupe: { key: 'd', mode: 'debounce' }, delayMs: 300, priority: 3 },
    );
    expect(second).toEqual({ id: first.id, isNew: false, state: 'delayed' });
    const job = (await q.getJob(first.id))!;
    expect(job.data).toEqual({ n: 2 });
    expect(job.priority).toBe(3);
    expect(job.runAt).toBeGreaterThanOrEqual(before);
    expect((await q.counts()).delayed).toBe(1);
    const ran: number[] = [];
    const w = new Worker<{ n: number }>(
      q.name,
      (j) => {
        ran.push(j.data.n);
      },
      { connection: fx.url },
    );
    open.push(w);
    await waitUntil(() => ran.length === 1, 'one run');
    // A job already running or finished is not affected: the next add starts a new window.
    const third = await q.add({ n: 3 }, { dedupe: { key: 'd', mode: 'debounce' } });
    expect(third.isNew).toBe(true);
    await waitUntil(() => ran.length === 2, 'second run');
    expect(ran).toEqual([2, 3]);
  });

  it('a job that started is never rewritten: an add while it sleeps in job.sleep makes a new job', async () => {
    const q = queue();
    const charges: string[] = [];
    const w = new Worker<{ n: number }>(
      q.name,
      async (job) => {
        await job.step('charge', () => {
          charges.push(`${job.id}:${job.data.n}`);
        });
        await job.sleep(1_500);
        return job.data.n;
      },
      { connection: fx.url },
    );
    open.push(w);
    const first = await q.add({ n: 1 }, { dedupe: { key: 'd', mode: 'debounce' } });
    await waitUntil(async () => (await q.getJob(first.id))?.state === 'delayed', 'asleep');
    const second = await q.add({ n: 2 }, { dedupe: { key: 'd', mode: 'debounce' } });
    expect(second.isNew).toBe(true);
    expect(second.id).not.toBe(first.id);
    expect((await q.getJob(first.id))?.data).toEqual({ n: 1 });
    expect(await q.waitFor(first.id, { timeoutMs: 20_000 })).toBe(1);
    expect(await q.waitFor(second.id, { timeoutMs: 20_000 })).toBe(2);
    // Each charge ran once, for its own job.
    expect(charges.sort()).toEqual([`${first.id}:1`, `${second.id}:2`].sort());
  });

  it('debounce rewrites a large payload and a grouped job in place', async () => {
    const q = queue();
    const big = 'x'.repeat(5_000);
    const a = await q.add({ n: 1, big } as never, { dedupe: { key: 'd', mode: 'debounce' }, group: 'g' });
    const b = await q.add({ n: 2 } as never, { dedupe: { key: 'd', mode: 'debounce' }, group: 'g' });
    expect(b).toEqual({ id: a.id, isNew: false, state: 'waiting' });
    expect((await q.getJob(a.id))?.data).toEqual({ n: 2 });
    expect(await q.counts()).toMatchObject({ waiting: 1 });
    expect((await q.groups()).groups).toEqual([expect.objectContaining({ group: 'g', waiting: 1 })]);
  });

  it('concurrent adds from several processes make exactly one job per key', async () => {
    const q = queue();
    const run = (mode: string) =>
      new Promise<void>((resolve, reject) => {
        const child = fork(ADDER, [fx.url, q.name, mode], { execArgv: ['--import', 'tsx'], stdio: 'pipe' });
        child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`adder exited ${code}`))));
      });
    await Promise.all([run('throttle'), run('throttle'), run('throttle'), run('debounce'), run('debounce')]);
    // Each adder adds 50 jobs over keys t0..t9 (throttle) or d0..d9 (debounce, delayed a minute).
    const counts = await q.counts();
    expect(counts.waiting).toBe(10);
    expect(counts.delayed).toBe(10);
  });

  it('bad dedupe options get typed errors and write nothing', async () => {
    const q = queue();
    await expect(q.add({ n: 1 }, { dedupe: { key: '' } })).rejects.toBeInstanceOf(ValidationError);
    await expect(q.add({ n: 1 }, { dedupe: { key: 'a\nb' } })).rejects.toBeInstanceOf(ValidationError);
    await expect(q.add({ n: 1 }, { dedupe: { key: 'k', mode: 'later' as never } })).rejects.toThrow(
      /dedupe.mode/,
    );
    await expect(q.add({ n: 1 }, { dedupe: { key: 'k', ttlMs: 0 } })).rejects.toThrow(/dedupe.ttlMs/);
    await expect(q.add({ n: 1 }, { dedupe: { key: 'k', other: 1 } as never })).rejects.toBeInstanceOf(
      ValidationError,
    );
    await q.add({ n: 0 }, { id: 'p' });
    await expect(q.add({ n: 1 }, { dedupe: { key: 'k' }, dependsOn: ['p'] })).rejects.toThrow(/dependsOn/);
    expect((await q.counts()).waiting).toBe(1);
  });
});

/** A gate a processor waits on until the test opens it. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

describe('dedupe: debounce with keepLastIfActive', () => {
  const keepLast = { key: 'k', mode: 'debounce', keepLastIfActive: true } as const;

  /**
   * A worker at concurrency 5 that logs each run's start and end; a run of data n = 1 waits for `hold`
   * (a function of the attempt, or one promise for every attempt).
   */
  function worker(
    q: Queue<{ n: number }>,
    hold: Promise<void> | ((attempt: number) => Promise<void>),
    fail?: (n: number, attempt: number) => boolean,
  ) {
    const runs: { id: string; n: number; start: number; end?: number }[] = [];
    const w = new Worker<{ n: number }>(
      q.name,
      async (job) => {
        const run: (typeof runs)[number] = { id: job.id, n: job.data.n, start: Date.now() };
        runs.push(run);
        if (job.data.n === 1) await (typeof hold === 'function' ? hold(job.attempt) : hold);
        run.end = Date.now();
        if (fail?.(job.data.n, job.attempt)) throw new Error('planned');
        return job.data.n;
      },
      { connection: fx.url, concurrency: 5 },
    );
    open.push(w);
    return runs;
  }

  it('adds while the job runs keep the last one as its successor, which runs after it, never beside it', async () => {
    const q = queue();
    const g = gate();
    const runs = worker(q, g.opened);
    const first = await q.add({ n: 1 }, { dedupe: keepLast });
    await waitUntil(() => runs.length === 1, 'first running');
    const second = await q.add({ n: 2 }, { dedupe: keepLast });
    expect(second).toMatchObject({ isNew: true, state: 'blocked' });
    const third = await q.add({ n: 3 }, { dedupe: keepLast });
    expect(third).toEqual({ id: second.id, isNew: false, state: 'blocked' });
    expect(await q.getJob(second.id)).toMatchObject({
      state: 'blocked',
      data: { n: 3 },
      dependsOn: [first.id],
    });
    expect(await q.counts()).toMatchObject({ active: 1, blocked: 1, waiting: 0 });
    expect((await q.explain(second.id)).reasons[0]).toEqual({
      code: 'BLOCKED',
      message: `waits for parent job(s) ${first.id} to finish (complete or end dead)`,
      parents: [first.id],
    });
    g.open();
    expect(await q.waitFor(second.id, { timeoutMs: 10_000 })).toBe(3);
    expect(runs.map((r) => r.n)).toEqual([1, 3]);
    expect(runs[1]!.start).toBeGreaterThanOrEqual(runs[0]!.end!);
    // The successor held the key once it ran; now that it has finished, the next add is a new job.
    const next = await q.add({ n: 4 }, { dedupe: keepLast });
    expect(next.isNew).toBe(true);
    expect(next.id).not.toBe(second.id);
  });

  it('a pending job that has not started is rewritten as by plain debounce: no successor', async () => {
    const q = queue();
    const a = await q.add({ n: 1 }, { dedupe: keepLast, delayMs: 60_000 });
    const b = await q.add({ n: 2 }, { dedupe: keepLast, delayMs: 60_000 });
    expect(b).toEqual({ id: a.id, isNew: false, state: 'delayed' });
    expect(await q.counts()).toMatchObject({ delayed: 1, blocked: 0 });
  });

  it('a retry keeps the successor behind the job until it completes; a job that ends dead releases it', async () => {
    const q = queue();
    const g1 = gate();
    const g2 = gate();
    // Data 1 fails its first attempt (retried after 100 ms); its second waits at the second gate.
    const runs = worker(
      q,
      (attempt) => (attempt === 1 ? g1.opened : g2.opened),
      (n, a) => n === 1 && a === 1,
    );
    const backoff = { type: 'fixed', delayMs: 100 } as const;
    const first = await q.add({ n: 1 }, { dedupe: keepLast, backoff });
    await waitUntil(() => runs.length === 1, 'first attempt running');
    const succ = await q.add({ n: 2 }, { dedupe: keepLast });
    expect(succ).toMatchObject({ isNew: true, state: 'blocked' });
    g1.open(); // the first attempt fails: the job waits for its retry, then runs again
    await waitUntil(() => runs.length === 2, 'second attempt running');
    // Still behind the job, which is running its retry: a new add rewrites the successor.
    expect(await q.getJob(succ.id)).toMatchObject({ state: 'blocked' });
    expect(await q.add({ n: 3 }, { dedupe: keepLast })).toEqual({
      id: succ.id,
      isNew: false,
      state: 'blocked',
    });
    g2.open();
    expect(await q.waitFor(first.id, { timeoutMs: 10_000 })).toBe(1);
    expect(await q.waitFor(succ.id, { timeoutMs: 10_000 })).toBe(3);
    expect(runs.map((r) => r.n)).toEqual([1, 1, 3]);
    expect(runs[2]!.start).toBeGreaterThanOrEqual(runs[1]!.end!);

    // Dead: maxAttempts 1 and a failure.
    const q2 = queue();
    const g3 = gate();
    const runs2 = worker(q2, g3.opened, (n) => n === 1);
    const doomed = await q2.add({ n: 1 }, { dedupe: keepLast, maxAttempts: 1 });
    await waitUntil(() => runs2.length === 1, 'doomed running');
    const after = await q2.add({ n: 2 }, { dedupe: keepLast });
    expect(after.state).toBe('blocked');
    g3.open();
    expect(await q2.waitFor(after.id, { timeoutMs: 10_000 })).toBe(2);
    expect((await q2.getJob(doomed.id))?.state).toBe('dead');
  });

  it('removing the successor leaves the key with the running job; cancelling the running job releases the next one', async () => {
    const q = queue();
    const g = gate();
    const runs = worker(q, g.opened);
    const first = await q.add({ n: 1 }, { dedupe: keepLast });
    await waitUntil(() => runs.length === 1, 'first running');
    const a = await q.add({ n: 2 }, { dedupe: keepLast });
    await q.remove(a.id);
    // The key is still the running job's: the next add waits behind it again.
    const b = await q.add({ n: 3 }, { dedupe: keepLast });
    expect(b).toMatchObject({ isNew: true, state: 'blocked' });
    expect(b.id).not.toBe(a.id);
    await q.cancel(first.id);
    expect(await q.waitFor(b.id, { timeoutMs: 10_000 })).toBe(3);
    expect((await q.getJob(first.id))?.state).toBe('dead');
    g.open();
  });

  it('refuses keepLastIfActive with throttle, with ttlMs, or not a boolean, and writes nothing', async () => {
    const q = queue();
    await expect(q.add({ n: 1 }, { dedupe: { key: 'k', keepLastIfActive: true } })).rejects.toThrow(
      'dedupe.keepLastIfActive needs mode \'debounce\', got mode "throttle"',
    );
    await expect(
      q.add({ n: 1 }, { dedupe: { key: 'k', mode: 'debounce', keepLastIfActive: true, ttlMs: 1_000 } }),
    ).rejects.toThrow(/keepLastIfActive cannot be combined with dedupe.ttlMs \(got ttlMs 1000\)/);
    const bad = q.add({ n: 1 }, { dedupe: { key: 'k', mode: 'debounce', keepLastIfActive: 'yes' as never } });
    await expect(bad).rejects.toBeInstanceOf(ValidationError);
    await expect(bad).rejects.toThrow('dedupe.keepLastIfActive must be true or false, got "yes"');
    expect(await q.counts()).toMatchObject({ waiting: 0 });
  });
});

describe('queue-wide stored rate limit', () => {
  it('setRateLimit holds across workers that set no limiter, and wins over a worker limiter', async () => {
    const q = queue();
    await q.setRateLimit({ max: 4, durationMs: 300 });
    expect(await q.getRateLimit()).toEqual({ max: 4, durationMs: 300 });
    const starts: number[] = [];
    for (let i = 0; i < 2; i++) {
      const w = new Worker(
        q.name,
        () => {
          starts.push(Date.now());
        },
        // This limiter would allow 100 per window: the stored limit wins.
        {
          connection: fx.url,
          concurrency: 10,
          ...(i === 0 ? { limiter: { max: 100, durationMs: 300 } } : {}),
        },
      );
      open.push(w);
    }
    await q.addBulk(Array.from({ length: 12 }, (_, n) => ({ data: { n } })));
    await waitUntil(async () => (await q.counts()).completed === 12, '12 completed');
    starts.sort((a, b) => a - b);
    expect(starts[11]! - starts[0]!).toBeGreaterThanOrEqual(2 * 300 - 20);
    for (let i = 0; i + 4 < starts.length; i++) expect(starts[i + 4]! - starts[i]!).toBeGreaterThan(250);
    await q.setRateLimit(null);
    expect(await q.getRateLimit()).toBeNull();
    await expect(q.setRateLimit({ max: 0, durationMs: 10 })).rejects.toBeInstanceOf(ValidationError);
  });
});
