/**
 * Batches through the public API: queue.addBatch, queue.batch, and the onComplete callback job, added
 * exactly once when the last member finishes, whatever way it finishes.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { createDashboard } from '../../src/dashboard/index.js';
import { MAX_BULK } from '../../src/defaults.js';
import {
  type AddedBatch,
  type BatchCallbackData,
  BatchExistsError,
  type BatchInfo,
  type Job,
  Queue,
  UnrecoverableError,
  ValidationError,
  Worker,
} from '../../src/index.js';
import { runScript, scripts } from '../../src/scripts/specs.js';
import { batchKey, queueKeys } from '../../src/store/keys.js';
import { claimArgs } from '../helpers/claim-args.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';
import { useWorkerChildren } from '../helpers/worker-children.js';

const fx = useRedis();
const open = closeAfterEach();
const startChild = useWorkerChildren();

interface Member {
  n: number;
  fail?: 'once' | 'always' | 'unrecoverable';
  fast?: boolean;
  batch?: undefined;
}
type Data = Member | BatchCallbackData<{ note: string }>;

function isCallback(d: Data): d is BatchCallbackData<{ note: string }> {
  return typeof (d as { batch?: unknown }).batch === 'string';
}

/** A queue, and a processor that records the callbacks it runs and plays each member's part. */
function setup(opts: { partitions?: number } = {}) {
  const name = uniqueName();
  const q = new Queue<Data>(name, { connection: fx.url, ...opts });
  open.push(q);
  const callbacks: { id: string; data: BatchCallbackData<{ note: string }> }[] = [];
  const processor = (job: Job<Data>) => {
    const d = job.data;
    if (isCallback(d)) {
      callbacks.push({ id: job.id, data: d });
      return 'callback';
    }
    if (d.fail === 'unrecoverable') throw new UnrecoverableError('no');
    if (d.fail === 'always' || (d.fail === 'once' && job.attempt === 1)) throw new Error('boom');
    return d.n;
  };
  const worker = (extra: object = {}) => {
    const w = new Worker<Data>(name, processor, {
      connection: fx.url,
      concurrency: 5,
      ...opts,
      ...extra,
    });
    open.push(w);
    return w;
  };
  return { name, q, callbacks, worker };
}

const members = (n: number, extra: (i: number) => Partial<Member> = () => ({})) =>
  Array.from({ length: n }, (_, i) => ({ data: { n: i, ...extra(i) } as Data }));

const FAST = { type: 'fixed', delayMs: 1 } as const;

describe('batches', () => {
  it('counts members as they complete, then adds the callback once with the counts and its data', async () => {
    const { name, q, callbacks, worker } = setup();
    const key = batchKey(queueKeys('surety', name), 'b1');
    const b = await q.addBatch(members(5), {
      id: 'b1',
      onComplete: { data: { note: 'hi' }, opts: { priority: 3, name: 'after' } },
    });
    expectTypeOf(b).toEqualTypeOf<AddedBatch>();
    expectTypeOf(q.batch).returns.resolves.toEqualTypeOf<BatchInfo | null>();
    expect(b.id).toBe('b1');
    expect(b.jobs.map((j) => [j.isNew, j.state])).toEqual(Array(5).fill([true, 'waiting']));
    expect((await q.getJob(b.jobs[0]!.id))!.batch).toBe('b1');
    const before = await q.batch('b1');
    expect(before).toMatchObject({ id: 'b1', total: 5, pending: 5, completed: 0, dead: 0, deadIds: [] });
    expect(before!.finishedAt).toBeUndefined();
    expect(before!.callbackId).toBeUndefined();
    expect(await fx.redis.pttl(key)).toBe(-1); // kept while unfinished

    // One member finished by hand before any worker runs: counted, the rest still pending.
    await q.cancel(b.jobs[4]!.id);
    expect(await q.batch('b1')).toMatchObject({
      pending: 4,
      completed: 0,
      dead: 1,
      deadIds: [b.jobs[4]!.id],
    });

    worker();
    const info = await waitUntil(async () => {
      const s = await q.batch('b1');
      return s?.callbackId !== undefined && callbacks.length === 1 ? s : null;
    }, 'the callback ran');
    expect(info).toMatchObject({ total: 5, pending: 0, completed: 4, dead: 1 });
    expect(info.finishedAt).toBeGreaterThan(0);
    // Retention: the record expires 7 days after the batch finished.
    const WEEK = 7 * 24 * 3_600_000;
    expect(await fx.redis.pttl(key)).toBeGreaterThan(WEEK - 60_000);
    expect(await fx.redis.pttl(key)).toBeLessThanOrEqual(WEEK);
    expect(callbacks[0]).toEqual({
      id: info.callbackId,
      data: { batch: 'b1', total: 5, completed: 4, dead: 1, deadIds: [b.jobs[4]!.id], data: { note: 'hi' } },
    });
    const cb = (await q.getJob(info.callbackId!))!;
    expect(cb).toMatchObject({ priority: 3, name: 'after', state: 'completed' });
    expect(cb.batch).toBeUndefined();
    // The callback is no member: finishing it changed nothing, and a finished member retried later
    // leaves the finished batch alone (its callback has run).
    await q.retry(b.jobs[4]!.id);
    await waitUntil(async () => (await q.getJob(b.jobs[4]!.id))?.state === 'completed', 'retried member ran');
    expect(await q.batch('b1')).toMatchObject({ total: 5, pending: 0, completed: 4, dead: 1 });
    expect(callbacks).toHaveLength(1);
  });

  it('counts each member once through failed attempts, retries, dead ends and a removal', async () => {
    const { q, callbacks, worker } = setup();
    const b = await q.addBatch(
      [
        ...members(3, () => ({ fail: 'once' })).map((m) => ({ ...m, opts: { backoff: FAST } })),
        { data: { n: 3, fail: 'unrecoverable' } },
        { data: { n: 4, fail: 'always' }, opts: { maxAttempts: 3, backoff: FAST } },
        { data: { n: 5 }, opts: { delayMs: 60_000 } },
      ],
      { onComplete: {}, id: 'b2' },
    );
    const [, , , unrecoverable, always, delayed] = b.jobs.map((j) => j.id);
    const w = worker();
    await waitUntil(async () => (await q.batch('b2'))?.pending === 1, 'all but the delayed member finished');
    expect(await q.batch('b2')).toMatchObject({ total: 6, completed: 3, dead: 2 });
    expect((await q.batch('b2'))!.deadIds.sort()).toEqual([unrecoverable, always].sort());
    expect((await q.getJob(always!))!.attempts).toBe(3);
    expect(callbacks).toHaveLength(0);

    // A dead member retried while the batch is open counts as pending again; once it dies again it
    // is counted once more, not twice.
    await w.close();
    await q.retry(unrecoverable!);
    expect(await q.batch('b2')).toMatchObject({ pending: 2, dead: 1, deadIds: [always] });
    await q.remove(delayed!); // removed unfinished: dead
    expect(await q.batch('b2')).toMatchObject({ pending: 1, dead: 2 });
    worker();
    await waitUntil(() => callbacks.length === 1, 'the callback ran');
    expect(callbacks[0]!.data).toEqual({
      batch: 'b2',
      total: 6,
      completed: 3,
      dead: 3,
      deadIds: [always, delayed, unrecoverable],
    });
    expect(await q.batch('b2')).toMatchObject({ pending: 0, completed: 3, dead: 3 });
  });

  it('a member recovered after its worker was killed is counted once, when it finally completes', async () => {
    const { name, q, callbacks, worker } = setup();
    const { child, messages } = startChild(fx.url, name, 600);
    await waitUntil(() => messages.some((m) => m.ready), 'child ready');
    const b = await q.addBatch(
      [
        { data: { n: 0, fast: true }, opts: { leaseMs: 600 } },
        { data: { n: 1 }, opts: { leaseMs: 600 } }, // held by the child until it is killed
      ],
      { onComplete: { data: { note: 'crash' } } },
    );
    const [fast, held] = b.jobs.map((j) => j.id);
    await waitUntil(() => messages.some((m) => m.completed === fast), 'fast member completed in the child');
    await waitUntil(() => messages.some((m) => m.started === held), 'held member started in the child');
    await waitUntil(async () => (await q.getJob(held!))?.startedAt !== undefined, 'its start recorded');
    expect(await q.batch(b.id)).toMatchObject({ total: 2, pending: 1, completed: 1 });
    child.kill('SIGKILL');

    worker({ recoverIntervalMs: 50 });
    await waitUntil(() => callbacks.length === 1, 'the callback ran in the rescuer');
    expect(callbacks[0]!.data).toMatchObject({ batch: b.id, total: 2, completed: 2, dead: 0, deadIds: [] });
    const member = (await q.getJob(held!))!;
    expect(member.errors.map((e) => e.code)).toEqual(['ERR_LEASE_EXPIRED']);
    expect(await q.batch(b.id)).toMatchObject({ pending: 0, completed: 2, dead: 0 });
  });

  it('five workers racing on the last members add exactly one callback', async () => {
    const { q, callbacks, worker } = setup();
    for (let i = 0; i < 5; i++) worker({ concurrency: 4 });
    const rounds = 4;
    const ids: string[] = [];
    for (let r = 0; r < rounds; r++) {
      const b = await q.addBatch(members(40), { onComplete: { data: { note: `r${r}` } } });
      ids.push(b.id);
    }
    await waitUntil(() => callbacks.length >= rounds, 'every batch called back');
    // Let any duplicate show up: the queue drains completely first.
    await waitUntil(async () => {
      const c = await q.counts();
      return c.waiting + c.active + c.delayed === 0;
    }, 'queue drained');
    expect(callbacks.map((c) => c.data.batch).sort()).toEqual([...ids].sort());
    for (const c of callbacks) expect(c.data).toMatchObject({ total: 40, completed: 40, dead: 0 });
    expect((await q.counts()).completed).toBe(rounds * 41);
  });

  it('counts a member whose lease expires with no attempt left as dead (recover.lua)', async () => {
    // Script level, on an injected clock: the lease expires exactly.
    const { name, q } = setup();
    const keys = queueKeys('surety', name);
    const T = Date.now() - 3_600_000;
    const b = await q.addBatch([{ data: { n: 0 }, opts: { maxAttempts: 1, leaseMs: 1_000 } }], {
      onComplete: { data: { note: 'lease' } },
    });
    const claimed = (await runScript(fx.redis, scripts.claim, keys, claimArgs({ now: T }))) as string[];
    expect(claimed).toContain(b.jobs[0]!.id);
    // Its start marked (start.lua): only a started attempt is charged when its lease is lost.
    const token = claimed[claimed.indexOf(b.jobs[0]!.id) + 1]!.split('|')[1]!;
    await runScript(fx.redis, scripts.start, keys, { now: T }, [{ id: b.jobs[0]!.id, token }]);
    const recover = () =>
      runScript(fx.redis, scripts.recover, keys, {
        now: T + 1_001,
        limit: 100,
        defaultMaxAttempts: 3,
        keepCount: 100,
        keepAgeMs: 86_400_000,
        wakeChannel: keys.wakeChannel,
        doneChannel: keys.doneChannel,
        eventsMaxLen: 0,
      });
    expect(await recover()).toEqual([[], [b.jobs[0]!.id]]);
    expect(await recover()).toEqual([[], []]);
    const info = (await q.batch(b.id))!;
    expect(info).toMatchObject({ total: 1, pending: 0, completed: 0, dead: 1, finishedAt: T + 1_001 });
    expect((await q.getJob(info.callbackId!))!.data).toEqual({
      batch: b.id,
      total: 1,
      completed: 0,
      dead: 1,
      deadIds: [b.jobs[0]!.id],
      data: { note: 'lease' },
    });
  });

  it('counts members failed by a dead parent, and finishes in the addBatch call when all are dead already', async () => {
    const { q } = setup();
    const gate = await q.add({ n: -1 }, { id: 'gate' });
    const blocked = await q.addBatch(
      [
        { data: { n: 0 }, opts: { dependsOn: ['gate'] } },
        { data: { n: 1 }, opts: { dependsOn: ['gate'] } },
      ],
      { onComplete: {} },
    );
    expect(blocked.jobs.map((j) => j.state)).toEqual(['blocked', 'blocked']);
    await q.cancel(gate.id); // its children fail with DependencyFailedError (settle_dependents)
    expect(await q.batch(blocked.id)).toMatchObject({ total: 2, pending: 0, dead: 2 });
    expect((await q.batch(blocked.id))!.callbackId).toBeDefined();

    // Already dead at addBatch (the parent is dead): counted at once, and the batch finishes in the call.
    const b = await q.addBatch([{ data: { n: 1 }, opts: { dependsOn: ['gate'] } }], { onComplete: {} });
    expect(b.jobs[0]!.state).toBe('dead');
    const info = (await q.batch(b.id))!;
    expect(info).toMatchObject({ total: 1, pending: 0, dead: 1, deadIds: [b.jobs[0]!.id] });
    expect((await q.getJob(info.callbackId!))!.state).toBe('waiting');
  });

  it('refuses a bad addBatch with a typed error and writes nothing', async () => {
    const { q } = setup();
    const none = async () => (await q.counts()).waiting;
    await expect(q.addBatch([])).rejects.toThrow(ValidationError);
    await expect(q.addBatch(members(MAX_BULK + 1))).rejects.toThrow(/at most 10000 jobs/);
    await expect(q.addBatch(members(2), { onComplete: { opts: { priority: 1.5 } } })).rejects.toThrow(
      /priority/,
    );
    await expect(q.addBatch(members(2), { onComplete: { opts: { dependsOn: ['x'] } } })).rejects.toThrow(
      /dependsOn is not allowed/,
    );
    // @ts-expect-error an unknown option
    await expect(q.addBatch(members(2), { onComplete: {}, when: 1 })).rejects.toThrow(/when/);
    await expect(q.addBatch(members(2), { id: '' })).rejects.toThrow(ValidationError);
    await expect(q.addBatch([{ data: { n: 0 }, opts: { dedupe: { key: 'k' } } }])).rejects.toThrow(/dedupe/);
    // A parent that does not exist: refused by the script before its first write.
    await expect(
      q.addBatch([{ data: { n: 0 }, opts: { dependsOn: ['nope'] } }], { id: 'bp' }),
    ).rejects.toThrow(/nope/);
    expect(await q.batch('bp')).toBeNull();
    expect(await none()).toBe(0);

    await q.addBatch(members(1), { id: 'dup' });
    const err = await q.addBatch(members(3), { id: 'dup' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BatchExistsError);
    expect((err as BatchExistsError).code).toBe('ERR_BATCH_EXISTS');
    expect(await none()).toBe(1);
    expect(await q.batch('dup')).toMatchObject({ total: 1, pending: 1 });
    expect(await q.batch('never')).toBeNull();
  });

  it('takes MAX_BULK members in one call', async () => {
    const { q } = setup();
    const b = await q.addBatch(members(MAX_BULK));
    expect(b.jobs).toHaveLength(MAX_BULK);
    expect(await q.batch(b.id)).toMatchObject({ total: MAX_BULK, pending: MAX_BULK });
  });

  it('puts a whole batch in one partition of a partitioned queue and calls back there', async () => {
    const { q, callbacks, worker } = setup({ partitions: 3 });
    const batches = await Promise.all(
      ['x', 'y', 'z'].map((id) =>
        q.addBatch(
          members(6, (i) => (i === 0 ? { fail: 'unrecoverable' } : {})),
          { id, onComplete: {} },
        ),
      ),
    );
    for (const b of batches) {
      const suffixes = new Set(b.jobs.map((j) => j.id.split('@')[1]));
      expect(suffixes.size).toBe(1);
    }
    worker();
    await waitUntil(() => callbacks.length === 3, 'three callbacks');
    for (const b of batches) {
      const info = (await q.batch(b.id))!;
      expect(info).toMatchObject({ total: 6, pending: 0, completed: 5, dead: 1, deadIds: [b.jobs[0]!.id] });
      // The callback lives with its batch.
      expect(info.callbackId!.split('@')[1]).toBe(b.jobs[0]!.id.split('@')[1]);
    }
  });

  it('shows a batch in the CLI (surety batch) and the dashboard API, and links it from its jobs', async () => {
    const { name, q } = setup();
    const b = await q.addBatch(members(3), { id: 'seen', onComplete: {} });
    await q.cancel(b.jobs[0]!.id);

    const dashboard = createDashboard({ connection: fx.url });
    open.push(dashboard);
    const res = await dashboard.fetch(new Request(`http://127.0.0.1/api/queues/${name}/batches/seen`));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ queue: name, id: 'seen', total: 3, pending: 2, dead: 1 });
    const missing = await dashboard.fetch(new Request(`http://127.0.0.1/api/queues/${name}/batches/nope`));
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { code: 'ERR_BATCH_NOT_FOUND' } });
    const job = await dashboard.fetch(
      new Request(`http://127.0.0.1/api/queues/${name}/jobs/${b.jobs[1]!.id}`),
    );
    expect(await job.json()).toMatchObject({ batch: 'seen' });

    const text = await cli(['batch', name, 'seen']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/batch seen in .*: running/);
    expect(text.stdout).toMatch(/1\/3 finished \(33%\): 0 completed, 1 dead, 2 pending/);
    expect(text.stdout).toContain(`dead      ${b.jobs[0]!.id}`);
    const json = await cli(['batch', name, 'seen', '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({
      queue: name,
      id: 'seen',
      total: 3,
      deadIds: [b.jobs[0]!.id],
    });
    const none = await cli(['batch', name, 'nope']);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^surety: batch "nope" does not exist/m);
  });
});

const BIN = fileURLToPath(new URL('../../bin/surety.js', import.meta.url));

/** Runs the CLI against the test's Redis; resolves with its exit code and output. */
function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = { ...process.env, REDIS_URL: fx.url, NO_COLOR: '1' };
  delete env.FORCE_COLOR;
  const proc = spawn(process.execPath, [BIN, ...args], { env });
  const out = { stdout: '', stderr: '' };
  proc.stdout.on('data', (d) => {
    out.stdout += d;
  });
  proc.stderr.on('data', (d) => {
    out.stderr += d;
  });
  return new Promise((resolve) => proc.on('close', (code) => resolve({ code, ...out })));
}
