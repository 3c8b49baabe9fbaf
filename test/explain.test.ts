/** queue.explain(id): why a job is where it is (issue 14's "why isn't this job running?"). */
import { describe, expect, it } from 'vitest';
import { type ExplainReason, JobNotFoundError, Queue, Worker } from '../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from './helpers/setup.js';

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
});
