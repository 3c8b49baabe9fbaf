/** queue.explain(id): why a job is where it is (issue 14's "why isn't this job running?"). */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type ExplainReason, JobNotFoundError, Queue, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
function queue(name: string, partitions?: number): Queue {
  const q = new Queue(name, { connection: fx.url, ...(partitions ? { partitions } : {}) });
  open.push(q);
  return q;
}
const codes = (reasons: ExplainReason[]) => reasons.map((r) => r.code);

describe('queue.explain', () => {
  it('a waiting job: how many jobs are claimed before it (priorities first), no workers, paused', async () => {
    const q = queue(uniqueName());
    await q.add({}, { id: 'a' });
    await q.add({}, { id: 'b' });
    await q.add({}, { id: 'urgent', priority: -5 });
    await q.add({}, { id: 'later', priority: 3 });
    const b = await q.explain('b');
    expect(b.state).toBe('waiting');
    expect(b.reasons[0]).toMatchObject({ code: 'QUEUED', ahead: 2 }); // urgent, a
    expect(codes(b.reasons)).toEqual(['QUEUED', 'NO_WORKERS']);
    expect((await q.explain('urgent')).reasons[0]).toMatchObject({ code: 'QUEUED', ahead: 0 });
    expect((await q.explain('later')).reasons[0]).toMatchObject({ code: 'QUEUED', ahead: 3 });
    await q.pause();
    expect(codes((await q.explain('a')).reasons)).toEqual(['QUEUED', 'PAUSED', 'NO_WORKERS']);
  });

  it('a job parked by waitForSignal names the signal and its deadline, and is no longer parked once signalled', async () => {
    const q = queue(uniqueName());
    const w = new Worker(q.name, (job) => job.waitForSignal('approved', { timeoutMs: 3_600_000 }), {
      connection: fx.url,
    });
    open.push(w);
    const { id } = await q.add({});
    const wait = await waitUntil(async () => (await q.getJob(id))?.waitingForSignal, 'the job parks');
    const [reason] = (await q.explain(id)).reasons;
    expect(reason).toMatchObject({ code: 'WAITING_FOR_SIGNAL', signal: 'approved', until: wait.deadline });
    await w.close();
    await q.signal(id, 'approved');
    expect(codes((await q.explain(id)).reasons)[0]).toBe('QUEUED');
  });

  it('a parent parked by waitForChildren names the children still open', async () => {
    const q = queue(uniqueName());
    const kids = queue(uniqueName());
    const w = new Worker(
      q.name,
      async (job) => {
        await job.addChildren([{ queue: kids.name, data: 1, opts: { id: 'kid-1' } }]);
        return job.waitForChildren();
      },
      { connection: fx.url },
    );
    open.push(w);
    const { id } = await q.add({});
    await waitUntil(async () => (await q.getJob(id))?.state === 'blocked', 'the parent parks');
    const [reason] = (await q.explain(id)).reasons;
    expect(reason).toMatchObject({
      code: 'WAITING_FOR_CHILDREN',
      children: [{ queue: kids.name, id: 'kid-1' }],
    });
  });

  it('a delayed job is due at its runAt; a blocked one names the parents that have not completed', async () => {
    const q = queue(uniqueName());
    const d = await q.add({}, { delayMs: 60_000 });
    const info = await q.getJob(d.id);
    expect((await q.explain(d.id)).reasons[0]).toMatchObject({ code: 'DELAYED', until: info!.runAt });
    await q.add({}, { id: 'p1' });
    await q.add({}, { id: 'p2', delayMs: 60_000 });
    await q.add({}, { id: 'child', dependsOn: ['p1', 'p2'] });
    const child = await q.explain('child');
    expect(child.state).toBe('blocked');
    expect(child.reasons).toEqual([expect.objectContaining({ code: 'BLOCKED', parents: ['p1', 'p2'] })]);
  });

  it('a running job names its worker and lease; a waiting one shows the global concurrency limit reached', async () => {
    const name = uniqueName();
    const q = queue(name);
    await q.setGlobalConcurrency(1);
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const w = new Worker(name, () => gate, { connection: fx.url, heartbeatMs: 50 });
    open.push(w);
    await q.add({}, { id: 'first' });
    await waitUntil(() => w.activeCount === 1, 'first running');
    await q.add({}, { id: 'second' });
    await waitUntil(
      async () => (await q.explain('first')).reasons[0]?.worker === w.id,
      'the heartbeat lists the running job',
    );
    const first = await q.explain('first');
    expect(first.reasons[0]).toMatchObject({ code: 'RUNNING', attempt: 1, worker: w.id });
    expect(first.reasons[0]!.until).toBeGreaterThan(Date.now() - 5_000);
    const second = await q.explain('second');
    expect(codes(second.reasons)).toEqual(['QUEUED', 'CONCURRENCY_LIMIT']);
    expect(second.reasons[1]).toMatchObject({ limit: 1, active: 1 });
    release();
    await q.waitFor('second');
    expect((await q.explain('first')).reasons).toEqual([expect.objectContaining({ code: 'COMPLETED' })]);
  });

  it('a dead job carries its last error; an unknown id is JobNotFoundError; a partitioned queue finds the job', async () => {
    const q = queue(uniqueName(), 3);
    await q.add({}, { id: 'x', delayMs: 60_000 });
    await q.cancel('x');
    const x = await q.explain('x');
    expect(x.state).toBe('dead');
    expect(x.reasons[0]!.code).toBe('DEAD');
    expect(x.reasons[0]!.message).toContain('cancelled');
    await expect(q.explain('nope')).rejects.toBeInstanceOf(JobNotFoundError);
    await q.add({}, { id: 'w' });
    expect((await q.explain('w')).reasons[0]).toMatchObject({ code: 'QUEUED', ahead: 0 });
  });

  it('the stored rate limit: RATE_LIMITED until the window reopens', async () => {
    const q = queue(uniqueName());
    await q.setRateLimit({ max: 1, durationMs: 60_000 });
    const w = new Worker(q.name, () => 'ok', { connection: fx.url });
    open.push(w);
    await q.add({}, { id: 'first' });
    await q.waitFor('first');
    await q.add({}, { id: 'second' });
    const second = await q.explain('second');
    expect(codes(second.reasons)).toEqual(['QUEUED', 'RATE_LIMITED']);
    expect(second.reasons[1]).toMatchObject({ limit: 1, active: 1 });
    expect(second.reasons[1]!.until).toBeGreaterThan(Date.now() + 50_000);
  });

  it('a grouped job: its place in its group, and the group concurrency, rate limit or retry hold', async () => {
    const q = queue(uniqueName());
    await q.setGroupLimits({ concurrency: 1 }, { group: 'c' });
    await q.setGroupLimits({ rateLimit: { max: 1, durationMs: 60_000 } }, { group: 'r' });
    await q.setGroupLimits({ concurrency: 1 }, { group: 'h' });
    let release = () => {};
    const w = new Worker<{ hold?: boolean; fail?: boolean }>(
      q.name,
      async (job) => {
        if (job.data.hold) await new Promise<void>((r) => (release = r));
        if (job.data.fail && job.attempt === 1) throw new Error('once');
      },
      { connection: fx.url, concurrency: 5 },
    );
    open.push(w);
    await q.add({ hold: true }, { id: 'c1', group: 'c' });
    await q.add({}, { id: 'c2', group: 'c' });
    await q.add({}, { id: 'r1', group: 'r' });
    await q.add({ fail: true }, { id: 'h1', group: 'h', backoff: { type: 'fixed', delayMs: 60_000 } });
    await waitUntil(async () => (await q.getJob('r1'))?.state === 'completed', 'r1 completed');
    await waitUntil(async () => (await q.getJob('h1'))?.state === 'delayed', 'h1 waits for its retry');
    await q.add({}, { id: 'r2', group: 'r' });
    await q.add({}, { id: 'h2', group: 'h' });
    const c2 = await q.explain('c2');
    expect(codes(c2.reasons)).toEqual(['QUEUED', 'GROUP_CONCURRENCY_LIMIT']);
    expect(c2.reasons[0]).toMatchObject({ group: 'c', ahead: 0 });
    expect(c2.reasons[1]).toMatchObject({ group: 'c', limit: 1, active: 1 });
    const r2 = await q.explain('r2');
    expect(codes(r2.reasons)).toEqual(['QUEUED', 'GROUP_RATE_LIMITED']);
    expect(r2.reasons[1]!.until).toBeGreaterThan(Date.now() + 50_000);
    const h2 = await q.explain('h2');
    expect(codes(h2.reasons)).toEqual(['QUEUED', 'GROUP_HELD']);
    expect(h2.reasons[1]!.until).toBe((await q.getJob('h1'))!.runAt);
    release();
    await q.waitFor('c2');
  });

  it('a job claimed ahead of a free slot is PREFETCHED, with no attempt counted', async () => {
    const q = queue(uniqueName());
    let release = () => {};
    const held = new Promise<void>((r) => (release = r));
    const w = new Worker(
      q.name,
      async (job) => {
        if (job.id === 'running') await held;
      },
      { connection: fx.url, concurrency: 1, prefetch: 5 },
    );
    open.push(w);
    await q.add({}, { id: 'running' });
    await waitUntil(() => w.activeCount === 1, 'first running');
    await q.add({}, { id: 'next' });
    const next = await waitUntil(async () => {
      const e = await q.explain('next');
      return e.state === 'active' ? e : null;
    }, 'next prefetched');
    expect(next.reasons[0]).toMatchObject({ code: 'PREFETCHED' });
    expect((await q.getJob('next'))?.attempts).toBe(0);
    release();
    await q.waitFor('next');
  });

  it('a job added with an expiry EXPIRES at it until it starts; one that expired is EXPIRED', async () => {
    const q = queue(uniqueName());
    const expireAt = Date.now() + 3_600_000;
    await q.add({}, { id: 'soon', expireAt });
    const soon = await q.explain('soon');
    expect(codes(soon.reasons)).toEqual(['QUEUED', 'NO_WORKERS', 'EXPIRES']);
    expect(soon.reasons[2]).toMatchObject({ code: 'EXPIRES', until: expireAt });
    await q.add({}, { id: 'gone', expireAt: 1_000 });
    await q.recoverExpired();
    const gone = await q.explain('gone');
    expect(gone.state).toBe('dead');
    expect(gone.reasons).toEqual([expect.objectContaining({ code: 'EXPIRED', until: 1_000 })]);
  });

  it('every reason code is documented in docs/groups.md and produced by a test in this file', () => {
    const source = readFileSync(new URL('../../src/queue/explain.ts', import.meta.url), 'utf8');
    const union = /code:\s*((?:\s*\|\s*'[A-Z_]+')+)/.exec(source)![1]!;
    const all = [...union.matchAll(/'([A-Z_]+)'/g)].map((m) => m[1]!);
    expect(all.length).toBeGreaterThan(10);
    const doc = readFileSync(new URL('../../docs/groups.md', import.meta.url), 'utf8');
    const self = readFileSync(new URL(import.meta.url), 'utf8');
    for (const code of all) {
      expect(doc, `docs/groups.md documents ${code}`).toContain(`| \`${code}\` |`);
      expect(self.split(`'${code}'`).length - 1, `a test expects ${code}`).toBeGreaterThan(0);
    }
  });
});
