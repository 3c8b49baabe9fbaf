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
});

describe('QueueEvents.close', () => {
  it('leaves nothing that keeps the process alive: a script that closes it exits by itself at once', async () => {
    // The child closes a QueueEvents, then arms an unref'd 1.5 s timer: it only fires (exit 3) if
    // something else (ioredis's 2 s disconnect timer, before the fix) still holds the event loop.
    const script = `
      const { QueueEvents } = await import(${JSON.stringify(EVENTS_MODULE)});
      const ev = new QueueEvents('events-close', { connection: process.env.REDIS_URL });
      await new Promise((resolve) => setTimeout(resolve, 100));
      await ev.close();
      await ev.close();
      process.stdout.write('closed\\n');
      setTimeout(() => { process.stdout.write('still alive\\n'); process.exit(3); }, 1_500).unref();
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
    expect(stdout).toBe('closed\n');
    expect(code).toBe(0);
  });
});
