/**
 * queue.updateData, changePriority, changeDelay, drain and obliterate (src/queue/job-edits.ts), through
 * the public API: states accepted and refused, claim order, groups, partitions, dedupe keys,
 * dependencies, batches of drain, and what obliterate leaves (nothing).
 */
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium } from 'playwright-core';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { createDashboard, toNodeListener } from '../../src/dashboard/index.js';
import {
  DependencyFailedError,
  InvalidStateError,
  type Job,
  JobNotFoundError,
  NotSerializableError,
  PayloadTooLargeError,
  Queue,
  QueueActiveError,
  type SuretyError,
  ValidationError,
  Worker,
} from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
function queue<D = unknown, R = unknown>(name = uniqueName(), opts = {}): Queue<D, R> {
  const q = new Queue<D, R>(name, { connection: fx.url, ...opts });
  open.push(q);
  return q;
}
function worker<D, R>(name: string, fn: (job: Job<D>) => R | Promise<R>, opts = {}): Worker<D, R> {
  const w = new Worker<D, R>(name, fn, { connection: fx.url, concurrency: 1, ...opts });
  open.push(w);
  return w;
}
/** A processor that holds its job until `release()`. */
function gate(): { wait: Promise<void>; release: () => void } {
  let release = () => {};
  const wait = new Promise<void>((r) => {
    release = r;
  });
  return { wait, release };
}
async function refusal(p: Promise<unknown>): Promise<SuretyError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err, 'expected a refusal').not.toBeNull();
  return err as SuretyError;
}
/** Every key whose name contains the queue's name (all its tags: `{surety:name}`, `{surety:name:p}`). */
async function keysOf(name: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await fx.redis.scan(cursor, 'MATCH', `*${name}*`, 'COUNT', 1000);
    found.push(...keys);
    cursor = next;
  } while (cursor !== '0');
  return found.sort();
}
async function waitingIds(q: Queue, group?: string): Promise<string[]> {
  return (await q.getJobs('waiting', group ? { group } : {})).map((j) => j.id);
}

describe('queue.updateData', () => {
  it('replaces the data of a waiting, delayed, blocked or dead job and keeps its state', async () => {
    const q = queue();
    const { id: w } = await q.add({ v: 1 });
    const { id: d } = await q.add({ v: 1 }, { delayMs: 3_600_000 });
    const { id: b } = await q.add({ v: 1 }, { dependsOn: [d] });
    await q.cancel(w);
    for (const id of [w, d, b]) await q.updateData(id, { v: 2, id });
    expect((await q.getJob(w))?.state).toBe('dead');
    for (const id of [w, d, b]) expect((await q.getJob(id))?.data).toEqual({ v: 2, id });
    expect((await q.getJob(b))?.state).toBe('blocked');
    // A dead job with fixed data, retried, runs with it.
    await q.retry(w);
    worker(q.name, (job) => job.data);
    expect(await q.waitFor(w)).toEqual({ v: 2, id: w });
  });

  it("keeps a completed job's result, and moves a large payload to the annex and back", async () => {
    const q = queue();
    const { id } = await q.add({ small: true });
    worker(q.name, () => ({ done: 1 }));
    await q.waitFor(id);
    const big = { text: 'x'.repeat(5_000) };
    await q.updateData(id, big);
    expect(await q.getJob(id)).toMatchObject({ state: 'completed', data: big, result: { done: 1 } });
    await q.updateData(id, { small: 2 });
    expect(await q.getJob(id)).toMatchObject({ data: { small: 2 }, result: { done: 1 } });
    expect(await fx.redis.hexists(q.keys.annex, `${id}\x01b`)).toBe(0);
  });

  it('refuses an active job (InvalidStateError), an unknown id and data add() would refuse', async () => {
    const q = queue(uniqueName(), { maxPayloadBytes: 1_000 });
    const g = gate();
    const { id } = await q.add({ v: 1 });
    worker(q.name, () => g.wait);
    await waitUntil(async () => (await q.getJob(id))?.state === 'active', 'the job to start');
    const err = await refusal(q.updateData(id, { v: 2 }));
    expect(err).toBeInstanceOf(InvalidStateError);
    expect(err.code).toBe('ERR_INVALID_STATE');
    expect(err.message).toContain('it is active');
    g.release();
    await q.waitFor(id);
    expect((await q.getJob(id))?.data).toEqual({ v: 1 });
    expect(await refusal(q.updateData('nope', {}))).toBeInstanceOf(JobNotFoundError);
    expect(await refusal(q.updateData(id, { at: new Date() }))).toBeInstanceOf(NotSerializableError);
    expect(await refusal(q.updateData(id, 'x'.repeat(2_000)))).toBeInstanceOf(PayloadTooLargeError);
    expect(await refusal(q.updateData('', {}))).toBeInstanceOf(ValidationError);
  });
});

describe('queue.changePriority', () => {
  it('moves a waiting job to its new place in the claim order, and workers follow it', async () => {
    const q = queue<string>();
    for (const [id, priority] of [
      ['a', 0],
      ['b', 0],
      ['c', 0],
      ['d', 5],
      ['e', -1],
    ] as const) {
      await q.add(id, { id, priority });
    }
    expect(await waitingIds(q)).toEqual(['e', 'a', 'b', 'c', 'd']);
    await q.changePriority('c', -5); // first of all
    await q.changePriority('a', 10); // last of all
    await q.changePriority('e', 0); // back of the priority-0 list
    await q.changePriority('b', 0); // same priority: keeps its place
    expect(await waitingIds(q)).toEqual(['c', 'b', 'e', 'd', 'a']);
    expect((await q.getJob('a'))?.priority).toBe(10);
    expect((await q.getJob('e'))?.priority).toBe(0);
    const order: string[] = [];
    worker<string, void>(q.name, (job) => {
      order.push(job.data);
    });
    await waitUntil(() => order.length === 5, 'five jobs run');
    expect(order).toEqual(['c', 'b', 'e', 'd', 'a']);
  });

  it('keeps the new priority of a delayed or blocked job for when it becomes waiting', async () => {
    const q = queue();
    await q.add('first', { id: 'first' });
    await q.add('later', { id: 'later', delayMs: 3_600_000 });
    await q.add('child', { id: 'child', dependsOn: ['later'] });
    await q.changePriority('later', -3);
    await q.changePriority('child', 7);
    await q.promote('later');
    expect(await waitingIds(q)).toEqual(['later', 'first']);
    expect((await q.getJob('child'))?.priority).toBe(7);
  });

  it("reorders a grouped job inside its group's list; the group's counts stay right", async () => {
    const q = queue<string>();
    for (const id of ['a', 'b', 'c']) await q.add(id, { id, group: 'g1' });
    await q.add('z', { id: 'z', group: 'g2' });
    await q.changePriority('c', -1);
    expect(await waitingIds(q, 'g1')).toEqual(['c', 'a', 'b']);
    await q.changePriority('a', 2);
    expect(await waitingIds(q, 'g1')).toEqual(['c', 'b', 'a']);
    const groups = await q.groups();
    expect(groups.groups.find((g) => g.group === 'g1')).toMatchObject({ waiting: 3 });
    expect((await q.counts()).waiting).toBe(4);
    const order: string[] = [];
    worker<string, void>(q.name, (job) => {
      order.push(job.data);
    });
    await waitUntil(() => order.length === 4, 'four jobs run');
    expect(order.filter((id) => id !== 'z')).toEqual(['c', 'b', 'a']);
    expect((await q.groups()).groups).toEqual([]);
  });

  it('refuses active and finished jobs, unknown ids and priorities add() would refuse', async () => {
    const q = queue();
    const { id } = await q.add({});
    worker(q.name, () => 'ok');
    await q.waitFor(id);
    const err = await refusal(q.changePriority(id, 1));
    expect(err).toBeInstanceOf(InvalidStateError);
    expect(err.message).toContain('it is completed');
    expect(await refusal(q.changePriority('nope', 1))).toBeInstanceOf(JobNotFoundError);
    for (const bad of [1.5, 1_000_001, -1_000_001, Number.NaN, '3' as unknown as number]) {
      const e = await refusal(q.changePriority(id, bad));
      expect(e).toBeInstanceOf(ValidationError);
      expect(e.message).toContain('priority');
    }
  });
});

describe('queue.changeDelay', () => {
  it('gives a delayed job a new due time on the Redis clock; 0 makes it waiting at once', async () => {
    const q = queue();
    const { id } = await q.add({}, { delayMs: 3_600_000 });
    const t0 = Date.now();
    await q.changeDelay(id, 120_000);
    const job = await q.getJob(id);
    expect(job?.state).toBe('delayed');
    // Redis and this process share a clock here: within a second of now + 120 s.
    expect(Math.abs((job?.runAt ?? 0) - (t0 + 120_000))).toBeLessThan(1_000);
    await q.changeDelay(id, 0);
    expect((await q.getJob(id))?.state).toBe('waiting');
    expect(await waitingIds(q)).toEqual([id]);
    const { id: soon } = await q.add({}, { delayMs: 3_600_000 });
    await q.changeDelay(soon, 50);
    worker(q.name, () => 'ran');
    expect(await q.waitFor(soon, { timeoutMs: 5_000 })).toBe('ran');
  });

  it('makes a waiting job delayed (grouped too) and leaves a blocked one due later once released', async () => {
    const q = queue();
    const { id: w } = await q.add({});
    const { id: gw } = await q.add({}, { group: 'g' });
    await q.changeDelay(w, 3_600_000);
    await q.changeDelay(gw, 3_600_000);
    expect(await q.counts()).toMatchObject({ waiting: 0, delayed: 2 });
    expect((await q.groups()).groups).toEqual([]);
    await q.changeDelay(gw, 0);
    expect(await waitingIds(q, 'g')).toEqual([gw]);

    const { id: parent } = await q.add({}, { delayMs: 3_600_000 });
    const { id: child } = await q.add({}, { dependsOn: [parent] });
    await q.changeDelay(child, 3_600_000);
    expect((await q.getJob(child))?.state).toBe('blocked');
    await q.remove(w);
    await q.changeDelay(parent, 0);
    worker(q.name, () => 'ok');
    await q.waitFor(parent);
    await waitUntil(async () => (await q.getJob(child))?.state === 'delayed', 'the child delayed');
  });

  it('refuses active and dead jobs, unknown ids and bad delays', async () => {
    const q = queue();
    const g = gate();
    const { id } = await q.add({});
    const { id: dead } = await q.add({});
    await q.cancel(dead);
    worker(q.name, () => g.wait);
    await waitUntil(async () => (await q.getJob(id))?.state === 'active', 'the job to start');
    const err = await refusal(q.changeDelay(id, 1_000));
    expect(err).toBeInstanceOf(InvalidStateError);
    expect(err.code).toBe('ERR_INVALID_STATE');
    expect(await refusal(q.changeDelay(dead, 0))).toBeInstanceOf(InvalidStateError);
    g.release();
    expect(await refusal(q.changeDelay('nope', 0))).toBeInstanceOf(JobNotFoundError);
    for (const bad of [-1, 1.5, 10 * 365 * 24 * 3_600_000 + 1]) {
      expect((await refusal(q.changeDelay(dead, bad))).message).toContain('delayMs');
    }
  });
});

describe('per-job edits in a partitioned queue', () => {
  it('find the job in whichever partition holds it, and refuse an unknown id', async () => {
    const q = queue<{ v: number }>(uniqueName(), { partitions: 3 });
    // partitionKey puts these away from their ids' home partitions (some of them, at least).
    const added = await q.addBulk(
      Array.from({ length: 6 }, (_, i) => ({ data: { v: i }, opts: { id: `j${i}`, partitionKey: 'k' } })),
    );
    for (const { id } of added) {
      await q.updateData(id, { v: 100 });
      await q.changePriority(id, 2);
      await q.changeDelay(id, 60_000);
    }
    const jobs = await Promise.all(added.map(({ id }) => q.getJob(id)));
    expect(jobs.map((j) => [j?.state, j?.priority, j?.data])).toEqual(
      Array(6).fill(['delayed', 2, { v: 100 }]),
    );
    expect(await refusal(q.changeDelay('j-none', 0))).toBeInstanceOf(JobNotFoundError);
  });

  it("have typed signatures: the data is the queue's Data", () => {
    const q = queue<{ v: number }>();
    expectTypeOf(q.updateData).parameter(1).toEqualTypeOf<{ v: number }>();
    expectTypeOf(q.changePriority).returns.resolves.toBeVoid();
    expectTypeOf(q.drain).returns.resolves.toBeNumber();
    expectTypeOf(q.obliterate).parameter(0).toEqualTypeOf<{ force?: boolean } | undefined>();
  });
});

describe('queue.drain', () => {
  it('deletes 2 600 waiting and delayed jobs of a partitioned queue in several batches', async () => {
    const q = queue(uniqueName(), { partitions: 3 });
    const items = Array.from({ length: 2_600 }, (_, i) => ({
      data: { i },
      opts: i % 3 === 0 ? { delayMs: 3_600_000 } : i % 5 === 0 ? { priority: 2 } : {},
    }));
    await q.addBulk(items);
    expect(await q.counts()).toMatchObject({ waiting: 1_733, delayed: 867 });
    const events: string[] = [];
    const ac = new AbortController();
    const reading = (async () => {
      for await (const e of q.events({ from: '0', signal: ac.signal })) {
        if (e.event === 'removed') events.push(e.jobId);
        if (events.length === 2_600) break;
      }
    })();
    expect(await q.drain()).toBe(2_600);
    expect(await q.counts()).toMatchObject({ waiting: 0, delayed: 0 });
    await reading;
    ac.abort();
    expect(new Set(events).size).toBe(2_600);
    expect(await q.drain()).toBe(0);
  });

  it('leaves active jobs running and finished ones in place', async () => {
    const q = queue();
    const g = gate();
    const { id: running } = await q.add({});
    worker(q.name, () => g.wait.then(() => 'done'));
    await waitUntil(async () => (await q.getJob(running))?.state === 'active', 'the job to start');
    const { id: done } = await q.add({}, { delayMs: 3_600_000 });
    await q.cancel(done);
    await q.addBulk([{ data: 1 }, { data: 2 }, { data: 3, opts: { delayMs: 60_000 } }]);
    expect(await q.drain()).toBe(3);
    expect(await q.counts()).toMatchObject({ waiting: 0, delayed: 0, active: 1, dead: 1 });
    g.release();
    expect(await q.waitFor(running)).toBe('done');
  });

  it('frees the dedupe key of a drained job, and cleans groups so they run again', async () => {
    const q = queue();
    await q.add({ n: 1 }, { dedupe: { key: 'sync' } });
    await q.add({ n: 2 }, { group: 'g', dedupe: { key: 'other', mode: 'debounce', ttlMs: 60_000 } });
    await q.add({ n: 3 }, { group: 'g', priority: 3 });
    await q.add({ n: 4 }, { group: 'h' });
    expect(await q.drain()).toBe(4);
    expect((await q.groups()).groups).toEqual([]);
    expect(await fx.redis.get(q.keys.groupWaiting)).toBe('0');
    expect((await keysOf(q.name)).filter((k) => k.includes(':g:') || k.includes(':dd:'))).toEqual([]);
    expect((await q.add({ n: 5 }, { dedupe: { key: 'sync' } })).isNew).toBe(true);
    const { id } = await q.add({ n: 6 }, { group: 'g' });
    worker(q.name, () => 'ok');
    expect(await q.waitFor(id)).toBe('ok');
  });

  it('fails the jobs blocked on a drained parent, or drains them too with { blocked: true }', async () => {
    const q = queue();
    const { id: parent } = await q.add({}, { delayMs: 3_600_000 });
    const { id: child } = await q.add({}, { dependsOn: [parent] });
    const { id: grandchild } = await q.add({}, { dependsOn: [child] });
    expect(await q.drain()).toBe(1);
    const dead = await q.getJob(child);
    expect(dead?.state).toBe('dead');
    expect(dead?.errors.at(-1)?.name).toBe(DependencyFailedError.name);
    expect((await q.getJob(grandchild))?.state).toBe('dead');

    const { id: p2 } = await q.add({ big: 'y'.repeat(2_000) });
    const { id: c2 } = await q.add({}, { dependsOn: [p2] });
    await q.add({}, { dependsOn: [c2] });
    expect(await q.drain({ blocked: true })).toBe(3);
    expect(await q.counts()).toMatchObject({ waiting: 0, blocked: 0, dead: 2 });
    expect(await fx.redis.exists(q.keys.deps, q.keys.dependents)).toBe(0);
    // Only the two dead jobs' annex fields (their errors, parents) remain: none of the drained ones'.
    const annex = await fx.redis.hkeys(q.keys.annex);
    expect(annex.every((f) => f.startsWith(child) || f.startsWith(grandchild))).toBe(true);
    expect(await refusal(q.drain({ blocked: 'yes' } as never))).toBeInstanceOf(ValidationError);
    expect(await refusal(q.drain({ blockd: true } as never))).toBeInstanceOf(ValidationError);
  });
  it('keeps delayed jobs with { delayed: false }, due or not, in every partition; children of kept jobs stay blocked', async () => {
    const q = queue(uniqueName(), { partitions: 2 });
    const later = await q.addBulk(
      Array.from({ length: 6 }, (_, i) => ({ data: { i }, opts: { delayMs: 3_600_000 } })),
    );
    const waiting = await q.addBulk(
      Array.from({ length: 1_203 }, (_, i) => ({ data: { i }, opts: i % 2 ? { priority: 4 } : {} })),
    );
    const { id: child } = await q.add({}, { dependsOn: [later[0]!.id] });
    // Added last (an add that enqueues promotes the due jobs of its partition first).
    const { id: due } = await q.add({ due: true }, { delayMs: 1 });
    const dueAt = (await q.getJob(due))!.runAt;
    await waitUntil(async () => {
      const [s, us] = await fx.redis.time();
      return Number(s) * 1000 + Number(us) / 1000 > dueAt;
    }, 'the due time on the Redis clock');
    expect(await q.drain({ delayed: false })).toBe(waiting.length);
    expect(await q.counts()).toMatchObject({ waiting: 0, delayed: 7, blocked: 1 });
    // A delayed job already due is kept too: drain promotes nothing.
    expect((await q.getJob(due))?.state).toBe('delayed');
    expect((await q.getJob(child))?.state).toBe('blocked');
    expect(await q.drain({ delayed: false })).toBe(0);
    // The default is unchanged: delayed jobs go (and the child of a drained parent fails).
    expect(await q.drain()).toBe(7);
    expect(await q.counts()).toMatchObject({ delayed: 0, blocked: 0, dead: 1 });
    expect(await refusal(q.drain({ delayed: 0 } as never))).toBeInstanceOf(ValidationError);
  });

  it('counts drained batch members as dead; the callback job the finished batch adds is drained too', async () => {
    const q = queue();
    const b = await q.addBatch([{ data: 1 }, { data: 2 }], { id: 'b1', onComplete: { data: { note: 'x' } } });
    expect(await q.drain()).toBe(3);
    const info = await q.batch('b1');
    expect(info).toMatchObject({ total: 2, pending: 0, dead: 2 });
    expect(info?.deadIds.sort()).toEqual(b.jobs.map((j) => j.id).sort());
    expect(info?.callbackId).toBeDefined();
    expect(await q.getJob(info?.callbackId ?? '')).toBeNull();
    expect((await q.counts()).waiting).toBe(0);
  });
});

describe('queue.obliterate', () => {
  it('deletes every key of a partitioned queue; a new Queue of that name starts from nothing', async () => {
    const name = uniqueName();
    const q = queue(name, { partitions: 3 });
    await q.addBulk(
      Array.from({ length: 30 }, (_, i) => ({ data: i, opts: i % 2 ? { delayMs: 60_000 } : {} })),
    );
    await q.add({}, { group: 'g', dedupe: { key: 'k', ttlMs: 60_000 } });
    await q.addBatch([{ data: 1 }, { data: 2 }]);
    await q.schedule('tick', { everyMs: 60_000 }, { data: {} });
    await q.setGroupLimits({ concurrency: 2 });
    await q.setRateLimit({ max: 100, durationMs: 1_000 });
    const { id } = await q.add({ last: true });
    worker(name, () => 'ok', { partitions: 3 });
    await q.waitFor(id);
    await q.pause();
    await open.pop()?.close(); // the worker: stopped before the queue is deleted
    expect((await keysOf(name)).length).toBeGreaterThan(20);
    await q.obliterate();
    expect(await keysOf(name)).toEqual([]);
    await q.obliterate(); // again: nothing to do, no error
    const fresh = queue(name, { partitions: 'auto' });
    expect(await fresh.counts()).toEqual({
      waiting: 0,
      delayed: 0,
      blocked: 0,
      active: 0,
      completed: 0,
      dead: 0,
    });
    expect(await fresh.schedules()).toEqual([]);
    expect(await fresh.isPaused()).toBe(false);
    expect(fresh.partitions).toBe(1); // no partition count recorded any more
    // q itself records its count again at its next call.
    expect((await q.add({})).id).toMatch(/^1@\d$/); // the id counters start again
    const later = queue(name, { partitions: 'auto' });
    expect(await later.counts()).toMatchObject({ waiting: 1 });
    expect(later.partitions).toBe(3);
  });

  it("refuses while a job is active; with force, the worker's late outcome is refused", async () => {
    const name = uniqueName();
    const q = queue(name);
    const g = gate();
    const { id } = await q.add({ v: 1 });
    await q.add({ v: 2 }, { delayMs: 60_000 });
    const w = worker(name, () => g.wait.then(() => 'late'));
    const errors: string[] = [];
    w.on('error', (e) => errors.push(e.code));
    await waitUntil(async () => (await q.getJob(id))?.state === 'active', 'the job to start');
    const err = await refusal(q.obliterate());
    expect(err).toBeInstanceOf(QueueActiveError);
    expect(err.code).toBe('ERR_QUEUE_ACTIVE');
    expect((err as QueueActiveError).active).toBe(1);
    expect(await q.counts()).toMatchObject({ active: 1, delayed: 1 });

    await q.obliterate({ force: true });
    expect(await q.getJob(id)).toBeNull();
    g.release();
    await waitUntil(() => errors.includes('ERR_STALE_JOB'), 'the refused completion');
    // The refused completion wrote nothing: no record, finished set, event or metric.
    const outcomeKeys = /:(jobs|errors|completed|dead|events|stats|active)$/;
    expect((await keysOf(name)).filter((k) => outcomeKeys.test(k))).toEqual([]);
    await w.close();
    // What a worker left running writes (its heartbeat, claim bookkeeping) goes with a second obliterate.
    expect(await q.counts()).toEqual({
      waiting: 0,
      delayed: 0,
      blocked: 0,
      active: 0,
      completed: 0,
      dead: 0,
    });
    await q.obliterate();
    expect(await keysOf(name)).toEqual([]);
    expect(await refusal(q.obliterate({ force: 1 } as never))).toBeInstanceOf(ValidationError);
  });
});

describe("the dashboard's drain", () => {
  /** A dashboard on a random loopback port, closed after the test. */
  async function dashboard(): Promise<{ url: string; csrf: string }> {
    const d = createDashboard({ connection: fx.url });
    const server = createServer(toNodeListener(d));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    open.push({
      close: async () => {
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
        await d.close();
      },
    });
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, csrf: d.csrfToken };
  }

  it('POST /api/queues/:q/drain drains (blocked=1: blocked jobs too); it needs the CSRF header and POST', async () => {
    const q = queue();
    const { id: parent } = await q.add({}, { delayMs: 60_000 });
    await q.add({}, { dependsOn: [parent] });
    await q.add({});
    const d = await dashboard();
    const path = `${d.url}/api/queues/${q.name}/drain?blocked=1`;
    expect((await fetch(path, { method: 'POST' })).status).toBe(403);
    expect((await fetch(path)).status).toBe(405);
    expect(await q.counts()).toMatchObject({ waiting: 1, delayed: 1, blocked: 1 });
    const res = await fetch(path, { method: 'POST', headers: { 'x-surety-csrf': d.csrf } });
    expect(await res.json()).toEqual({ queue: q.name, blocked: true, removed: 3 });
    expect(await q.counts()).toMatchObject({ waiting: 0, delayed: 0, blocked: 0, dead: 0 });
  });

  const CHROMIUM = '/usr/bin/chromium';
  it.skipIf(!existsSync(CHROMIUM))(
    'the queue page has a Drain button that asks for a second click',
    async () => {
      const q = queue();
      await q.addBulk([{ data: 1 }, { data: 2 }, { data: 3, opts: { delayMs: 60_000 } }]);
      const d = await dashboard();
      const browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: ['--headless', '--no-sandbox'],
      });
      open.push(browser);
      const page = await browser.newPage();
      await page.goto(`${d.url}/#/queue/${encodeURIComponent(q.name)}?state=waiting`);
      const drain = page.locator('button[data-action="drain"]');
      await drain.click(); // arms it: nothing deleted yet
      await page.getByText('Confirm drain').waitFor();
      expect((await q.counts()).waiting).toBe(2);
      await drain.click();
      await page.getByText('drained: removed 3 waiting and delayed jobs').waitFor();
      expect(await q.counts()).toMatchObject({ waiting: 0, delayed: 0 });
      await expect.poll(() => page.locator('button[data-action="drain"]').count()).toBe(0);
    },
  );
});
