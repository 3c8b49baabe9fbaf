import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Queue, type QueueEvent, QueueEvents, UnrecoverableError, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
const EVENTS_MODULE = fileURLToPath(new URL('../../src/queue/events.ts', import.meta.url));

describe('lifecycle events', () => {
  it('every transition is appended to the stream and read back per job, from another connection', async () => {
    const name = uniqueName();
    const q = new Queue<{ fail?: boolean }>(name, { connection: fx.url });
    open.push(q);
    const ev = new QueueEvents(name, { connection: fx.url, from: '0' });
    open.push(ev);
    const seen: QueueEvent[] = [];
    ev.on('event', (e: QueueEvent) => seen.push(e));
    const w = new Worker<{ fail?: boolean }>(
      name,
      async (job) => {
        await job.progress(50);
        if (job.data.fail) {
          if (job.attempt === 1) throw new Error('flaky');
          throw new UnrecoverableError('give up');
        }
      },
      { connection: fx.url },
    );
    open.push(w);
    const ok = await q.add({});
    const bad = await q.add({ fail: true }, { backoff: { type: 'fixed', delayMs: 0 } });
    await q.waitFor(ok.id);
    await expect(q.waitFor(bad.id)).rejects.toThrow('give up');
    const removable = await q.add({}, { delayMs: 60_000 });
    await q.remove(removable.id);
    const of = (id: string) => seen.filter((e) => e.jobId === id).map((e) => e.event);
    await waitUntil(() => of(removable.id).includes('removed'), 'removed event');
    expect(of(ok.id)).toEqual(['added', 'active', 'progress', 'completed']);
    expect(of(bad.id)).toEqual([
      'added',
      'active',
      'progress',
      'failed',
      'retrying',
      'active',
      'progress',
      'failed',
      'dead',
    ]);
    expect(seen.find((e) => e.event === 'progress')!.data).toBe(50);
    const at = seen.map((e) => e.at);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
  });

  it('queue.events() is an async iterator starting from now, and events can be turned off', async () => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url });
    const quiet = new Queue(name, { connection: fx.url, events: false });
    open.push(q, quiet);
    await q.add({}, { id: 'before' });
    const controller = new AbortController();
    const got: string[] = [];
    const reading = (async () => {
      for await (const e of q.events({ signal: controller.signal })) {
        got.push(`${e.event}:${e.jobId}`);
        if (got.length === 1) break;
      }
    })();
    await quiet.add({}, { id: 'silent' });
    // The reader is blocked in XREAD; this add arrives after it started.
    await waitUntil(async () => {
      await q.add({}, { id: `after-${Date.now()}` });
      return got.length > 0;
    }, 'an event');
    await reading;
    expect(got[0]).toMatch(/^added:after-/);
    expect(got.some((g) => g.includes('before') || g.includes('silent'))).toBe(false);
    controller.abort();
  });
});

/** Every event of `name` from the start of its stream, collected as they arrive. */
function collect(name: string): { seen: QueueEvent[]; of: (event: string) => QueueEvent[] } {
  const ev = new QueueEvents(name, { connection: fx.url, from: '0' });
  open.push(ev);
  const seen: QueueEvent[] = [];
  ev.on('event', (e: QueueEvent) => seen.push(e));
  return { seen, of: (event) => seen.filter((e) => e.event === event) };
}

describe('queue-wide events and what adds did not add', () => {
  it('pause and resume appear once per change, as queue-wide events (jobId empty)', async () => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url });
    open.push(q);
    const { seen } = collect(name);
    await q.pause();
    await q.pause();
    await q.resume();
    await q.resume();
    await q.add({}, { id: 'marker' });
    await waitUntil(() => seen.some((e) => e.jobId === 'marker'), 'the marker job');
    expect(seen.map((e) => [e.event, e.jobId])).toEqual([
      ['paused', ''],
      ['resumed', ''],
      ['added', 'marker'],
    ]);
  });

  it("a worker's completions carry their results; drained comes once each time the workers empty the queue", async () => {
    const name = uniqueName();
    const q = new Queue<{ n: number }, { twice: number } | undefined>(name, { connection: fx.url });
    open.push(q);
    const { seen, of } = collect(name);
    // addBulk puts jobs in waiting (no handoff), so the workers' claims empty the queue.
    const first = await q.addBulk([1, 2, 3, 4].map((n) => ({ data: { n } })));
    const w = new Worker<{ n: number }, { twice: number } | undefined>(
      name,
      async (job) => (job.data.n === 3 ? undefined : { twice: job.data.n * 2 }),
      { connection: fx.url, concurrency: 1 },
    );
    open.push(w);
    await waitUntil(() => of('completed').length === 4 && of('drained').length >= 1, 'the first batch');
    expect(of('completed').map((e) => [e.jobId, e.result])).toEqual(
      first.map((a, i) => [a.id, i === 2 ? undefined : { twice: (i + 1) * 2 }]),
    );
    expect(of('completed')[2]).not.toHaveProperty('result');
    const second = await q.addBulk([{ data: { n: 5 } }, { data: { n: 6 } }]);
    await waitUntil(() => of('completed').length === 6 && of('drained').length >= 2, 'the second batch');
    for (const [i, a] of second.entries()) expect(await q.waitFor(a.id)).toEqual({ twice: (5 + i) * 2 });
    // Each drained follows the claim of its batch's last job and comes before the next batch is added:
    // the claims that found the queue empty in between appended none.
    const order = seen.filter((e) => e.event !== 'completed').map((e) => `${e.event}:${e.jobId}`);
    const lastActive = (ids: string[]) => Math.max(...ids.map((id) => order.indexOf(`active:${id}`)));
    const drained = order.flatMap((e, i) => (e === 'drained:' ? [i] : []));
    expect(drained).toHaveLength(2);
    expect(drained[0]).toBeGreaterThan(lastActive(first.map((a) => a.id)));
    expect(drained[0]).toBeLessThan(order.indexOf(`added:${second[0]!.id}`));
    expect(drained[1]).toBeGreaterThan(lastActive(second.map((a) => a.id)));
  });

  it('an add naming an existing id appends duplicated; one a dedupe key takes appends deduplicated with the holder and key', async () => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url });
    open.push(q);
    const { seen } = collect(name);
    await q.add({}, { id: 'plain' });
    await q.add({}, { id: 'plain' }); // add-one.lua
    await q.add({}, { id: 'urgent', priority: -1 });
    await q.add({}, { id: 'urgent', priority: -1 }); // add.lua
    await q.addBulk([
      { data: 1, opts: { id: 'twice' } },
      { data: 2, opts: { id: 'twice' } },
    ]);
    const holder = await q.add({ v: 1 }, { dedupe: { key: 'sync' } });
    const swallowed = await q.add({ v: 2 }, { dedupe: { key: 'sync' } });
    const pending = await q.add({ v: 1 }, { delayMs: 60_000, dedupe: { key: 'typing', mode: 'debounce' } });
    const rewritten = await q.add({ v: 2 }, { delayMs: 60_000, dedupe: { key: 'typing', mode: 'debounce' } });
    expect([swallowed.id, swallowed.isNew, rewritten.id, rewritten.isNew]).toEqual([
      holder.id,
      false,
      pending.id,
      false,
    ]);
    await q.add({}, { id: 'marker' });
    await waitUntil(() => seen.some((e) => e.jobId === 'marker'), 'the marker job');
    const notAdded = seen.filter((e) => e.event === 'duplicated' || e.event === 'deduplicated');
    expect(notAdded.map((e) => ({ event: e.event, jobId: e.jobId, key: e.key }))).toEqual([
      { event: 'duplicated', jobId: 'plain', key: undefined },
      { event: 'duplicated', jobId: 'urgent', key: undefined },
      { event: 'duplicated', jobId: 'twice', key: undefined },
      { event: 'deduplicated', jobId: holder.id, key: 'sync' },
      { event: 'deduplicated', jobId: pending.id, key: 'typing' },
    ]);
    expect(seen.filter((e) => e.event === 'added').map((e) => e.jobId)).toEqual([
      'plain',
      'urgent',
      'twice',
      holder.id,
      pending.id,
      'marker',
    ]);
  });

  it('clean appends cleaned with the number of jobs it deleted and their state', async () => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url });
    open.push(q);
    const { of } = collect(name);
    for (const id of ['a', 'b', 'c']) await q.cancel((await q.add({}, { id })).id);
    expect(await q.clean('dead')).toEqual({ removed: 3, more: false });
    expect(await q.clean('dead')).toEqual({ removed: 0, more: false });
    await waitUntil(() => of('cleaned').length === 1, 'the cleaned event');
    expect(of('cleaned').map(({ jobId, count, state }) => ({ jobId, count, state }))).toEqual([
      { jobId: '', count: 3, state: 'dead' },
    ]);
  });
});

describe('QueueEvents on a partitioned queue', () => {
  it('reads the events of every partition, each tagged with its partition', async () => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url, partitions: 3 });
    open.push(q);
    const before = await q.addBulk(Array.from({ length: 6 }, (_, i) => ({ data: { i } })));
    const ev = new QueueEvents(name, { connection: fx.url, from: '0' });
    open.push(ev);
    const added = new Map<string, number | undefined>();
    ev.on('added', (e: QueueEvent) => added.set(e.jobId, e.partition));
    await waitUntil(() => before.every((a) => added.has(a.id)), 'the added events of every partition');
    // Live events too, on whichever partition the job lands.
    const later = await q.addBulk(Array.from({ length: 3 }, (_, i) => ({ data: { later: i } })));
    await waitUntil(() => later.every((a) => added.has(a.id)), 'events added after the start');
    const all = [...before, ...later];
    expect(new Set(all.map((a) => added.get(a.id))).size).toBe(3);
    for (const a of all) expect(added.get(a.id)).toBe(Number(a.id.split('@')[1])); // generated ids: n@p
  });

  it('a pause appears once per partition, each tagged with its partition', async () => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url, partitions: 3 });
    open.push(q);
    await q.pause();
    const { of } = collect(name);
    await waitUntil(() => of('paused').length === 3, 'a paused event per partition');
    expect(
      of('paused')
        .map((e) => e.partition)
        .sort(),
    ).toEqual([0, 1, 2]);
  });
});

describe('QueueEvents.close', () => {
  it('leaves nothing that keeps the process alive: a script that closes it exits by itself', async () => {
    // The child closes a QueueEvents, waits for its socket to finish closing, then lists what still
    // holds its event loop: a timer (ioredis's 2 s disconnect timer, before the fix) or a socket would
    // show. Read from the process itself, not timed: a loaded machine may take long to close a socket.
    const script = `
      const { QueueEvents } = await import(${JSON.stringify(EVENTS_MODULE)});
      const ev = new QueueEvents('events-close', { connection: process.env.REDIS_URL });
      await new Promise((resolve) => setTimeout(resolve, 100));
      await ev.close();
      await ev.close();
      process.stdout.write('closed\\n');
      const holding = () => process.getActiveResourcesInfo().filter((k) => k === 'Timeout' || k.startsWith('TCP'));
      const deadline = Date.now() + 20_000;
      while (holding().some((k) => k.startsWith('TCP')) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      process.stdout.write(JSON.stringify(holding()) + '\\n');
      setTimeout(() => { process.stdout.write('still alive\\n'); process.exit(3); }, 20_000).unref();
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      env: { ...process.env, REDIS_URL: fx.url },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(stderr).toBe('');
    expect(stdout).toBe('closed\n[]\n');
    expect(code).toBe(0);
  });
});
