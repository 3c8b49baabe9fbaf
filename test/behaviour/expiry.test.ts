/**
 * Job expiry (add options `expireAt` / `ttlMs`): a job not started by then ends dead with an
 * ExpiredError and never runs, whether a claim meets it (claim.lua), a worker holds it prefetched
 * (begin.lua) or nobody claims it at all (the recovery pass's sweep, expire.lua). A job that started
 * in time runs to the end.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { JobFailedError, type JobInfo, Queue, ValidationError, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

function queue(name = uniqueName()) {
  const q = new Queue<{ n: number }>(name, { connection: fx.url });
  open.push(q);
  return q;
}

/** A worker that records what it ran; no recovery pass unless asked (so only claim/begin expire jobs). */
function worker(
  q: Queue<{ n: number }>,
  ran: number[],
  opts: ConstructorParameters<typeof Worker>[2] = {},
  body: (n: number) => Promise<unknown> | unknown = () => 'ok',
) {
  const w = new Worker<{ n: number }>(
    q.name,
    async (job) => {
      ran.push(job.data.n);
      return body(job.data.n);
    },
    { connection: fx.url, recoverIntervalMs: 60_000, pollIntervalMs: 60_000, ...opts },
  );
  open.push(w);
  return w;
}

function expectExpired(job: JobInfo<unknown, unknown> | null) {
  expect(job?.state).toBe('dead');
  expect(job?.attempts).toBe(0);
  expect(job?.startedAt).toBeUndefined();
  expect(job?.errors.map((e) => [e.name, e.code])).toEqual([['ExpiredError', 'ERR_EXPIRED']]);
}

const past = () => Date.now() - 60_000;

describe('expiry at claim', () => {
  it('an expired waiting job never runs: the claim ends it dead and claims again at once for the others', async () => {
    const q = queue();
    const late = await q.add({ n: 1 }, { expireAt: new Date(past()) });
    const prio = await q.add({ n: 2 }, { expireAt: past(), priority: -5 });
    const ok = await q.add({ n: 3 });
    const ran: number[] = [];
    // One job per claim and a poll of a minute: only an immediate re-claim reaches job 3 in time.
    worker(q, ran, { concurrency: 1, prefetch: 0 });
    await waitUntil(async () => (await q.getJob(ok.id))?.state === 'completed', 'job 3 completed');
    expect(ran).toEqual([3]);
    expectExpired(await q.getJob(late.id));
    expectExpired(await q.getJob(prio.id));
    await expect(q.waitFor(late.id)).rejects.toBeInstanceOf(JobFailedError);
    expect(await q.counts()).toMatchObject({ waiting: 0, active: 0, dead: 2, completed: 1 });
  });

  it('a manual retry of an expired job clears its expiry: it runs', async () => {
    const q = queue();
    const late = await q.add({ n: 7 }, { expireAt: past() });
    await q.recoverExpired();
    expectExpired(await q.getJob(late.id));
    await q.retry(late.id);
    expect((await q.getJob(late.id))!.expireAt).toBeUndefined();
    const ran: number[] = [];
    worker(q, ran);
    await waitUntil(
      async () => (await q.getJob(late.id))?.state === 'completed',
      'the retried job completed',
    );
    expect(ran).toEqual([7]);
  });

  it('grouped jobs that expired leave their group, whose slot and later jobs run on', async () => {
    const q = queue();
    await q.setGroupLimits({ concurrency: 1 }, { group: 'g' });
    const gone = await q.add({ n: 1 }, { group: 'g', expireAt: past() });
    const gone2 = await q.add({ n: 2 }, { group: 'g', ttlMs: 1, priority: 3 });
    const ok = await q.add({ n: 3 }, { group: 'g' });
    const ran: number[] = [];
    await waitUntil(
      async () => ((await q.getJob(gone2.id))?.expireAt ?? Infinity) < Date.now() - 5,
      'ttl passed',
    );
    worker(q, ran, { concurrency: 2 });
    await waitUntil(async () => (await q.getJob(ok.id))?.state === 'completed', 'job 3 completed');
    expect(ran).toEqual([3]);
    expectExpired(await q.getJob(gone.id));
    expectExpired(await q.getJob(gone2.id));
    const after = await q.add({ n: 4 }, { group: 'g' });
    await waitUntil(async () => (await q.getJob(after.id))?.state === 'completed', 'job 4 completed');
    expect(ran).toEqual([3, 4]);
  });

  it('a job started before its expiry completes normally even when it runs past expireAt', async () => {
    const q = queue();
    const expireAt = Date.now() + 1_500;
    const job = await q.add({ n: 1 }, { expireAt });
    const ran: number[] = [];
    worker(q, ran, { recoverIntervalMs: 50 }, async () => {
      await waitUntil(() => Date.now() > expireAt + 200, 'past the expiry', 5_000);
      await q.recoverExpired();
      return 'done';
    });
    await waitUntil(async () => (await q.getJob(job.id))?.state === 'completed', 'completed', 8_000);
    const info = await q.getJob(job.id);
    expect(info?.attempts).toBe(1);
    expect(info?.errors).toEqual([]);
    expect(ran).toEqual([1]);
  });
});

describe('expiry of a prefetched job', () => {
  it('a reserved job whose expiry passes before it begins is not run and ends dead', async () => {
    const q = queue();
    let open_ = false;
    const slow = await q.add({ n: 1 });
    const expireAt = Date.now() + 2_000;
    const held = await q.add({ n: 2 }, { expireAt });
    const ran: number[] = [];
    worker(q, ran, { concurrency: 1, prefetch: 5 }, async (n) => {
      if (n === 1) await waitUntil(() => open_, 'the gate', 10_000);
      return 'ok';
    });
    // Job 2 is prefetched (active, not started) while job 1 holds the only slot.
    const reserved = await waitUntil(async () => {
      const j = await q.getJob(held.id);
      return j?.state === 'active' && j.startedAt === undefined ? j : null;
    }, 'job 2 reserved');
    expect(reserved.attempts).toBe(0);
    await waitUntil(() => Date.now() > expireAt + 50, 'job 2 expiry passed', 5_000);
    open_ = true;
    await waitUntil(async () => (await q.getJob(held.id))?.state === 'dead', 'job 2 dead');
    expectExpired(await q.getJob(held.id));
    expect((await q.getJob(slow.id))?.state).toBe('completed');
    expect(ran).toEqual([1]);
  });
});

describe('expiry with no worker claiming', () => {
  it('the recovery pass ends a waiting job whose ttl passed (ttlMs counts on Redis clock)', async () => {
    const q = queue();
    const job = await q.add({ n: 1 }, { ttlMs: 300 });
    const info = await q.getJob(job.id);
    expect(info?.expireAt).toBe((info?.createdAt ?? 0) + 300);
    expect((await q.recoverExpired()).expired).toEqual([]);
    const swept = await waitUntil(async () => {
      const r = await q.recoverExpired();
      return r.expired.length > 0 ? r.expired : null;
    }, 'the sweep');
    expect(swept).toEqual([job.id]);
    expectExpired(await q.getJob(job.id));
    expect(await q.counts()).toMatchObject({ waiting: 0, dead: 1 });
  });

  it('an expired job follows the retention rules, not its own keep (like cancel)', async () => {
    const q = queue();
    const job = await q.add({ n: 1 }, { expireAt: past(), keep: { dead: false } });
    expect((await q.recoverExpired()).expired).toEqual([job.id]);
    expectExpired(await q.getJob(job.id));
  });

  it('a job delayed past its expiry ends dead near its expiry, not at its due time', async () => {
    const q = queue();
    const job = await q.add({ n: 1 }, { delayMs: 3_600_000, ttlMs: 200 });
    await waitUntil(async () => (await q.recoverExpired()).expired.length === 1, 'the sweep');
    expectExpired(await q.getJob(job.id));
    expect(await q.counts()).toMatchObject({ delayed: 0, dead: 1 });
  });

  it("a worker's recovery loop sweeps a paused queue; grouped jobs leave their group's list", async () => {
    const q = queue();
    await q.pause();
    const grouped = await q.add({ n: 1 }, { group: 'g', ttlMs: 100 });
    const plain = await q.add({ n: 2 }, { ttlMs: 100, priority: 2 });
    const kept = await q.add({ n: 3 }, { group: 'g' });
    const ran: number[] = [];
    worker(q, ran, { recoverIntervalMs: 50 });
    await waitUntil(async () => (await q.getJob(plain.id))?.state === 'dead', 'swept');
    await waitUntil(async () => (await q.getJob(grouped.id))?.state === 'dead', 'swept');
    expectExpired(await q.getJob(grouped.id));
    expectExpired(await q.getJob(plain.id));
    await q.resume();
    await waitUntil(async () => (await q.getJob(kept.id))?.state === 'completed', 'job 3 completed');
    expect(ran).toEqual([3]);
  });

  it('dependents of an expired parent fail as with any dead parent; a blocked job expires too', async () => {
    const q = queue();
    const parent = await q.add({ n: 1 }, { expireAt: past() });
    const child = await q.add({ n: 2 }, { dependsOn: [parent.id] });
    const other = await q.add({ n: 3 });
    const blocked = await q.add({ n: 4 }, { dependsOn: [other.id], expireAt: past() });
    const r = await q.recoverExpired();
    expect(r.expired.sort()).toEqual([parent.id, blocked.id].sort());
    expectExpired(await q.getJob(parent.id));
    expectExpired(await q.getJob(blocked.id));
    const c = await q.getJob(child.id);
    expect(c?.state).toBe('dead');
    expect(c?.errors.map((e) => e.code)).toEqual(['ERR_DEPENDENCY_FAILED']);
    const ran: number[] = [];
    worker(q, ran);
    await waitUntil(async () => (await q.getJob(other.id))?.state === 'completed', 'job 3 completed');
    expect((await q.getJob(blocked.id))?.state).toBe('dead');
    expect(ran).toEqual([3]);
  });

  it('a debounced rewrite takes the new add expiry, or none', async () => {
    const q = queue();
    const first = await q.add({ n: 1 }, { ttlMs: 50, dedupe: { key: 'k', mode: 'debounce' } });
    const again = await q.add({ n: 2 }, { dedupe: { key: 'k', mode: 'debounce' } });
    expect(again.id).toBe(first.id);
    const info = await q.getJob(first.id);
    expect(info?.expireAt).toBeUndefined();
    const late = await q.add({ n: 3 }, { ttlMs: 50, dedupe: { key: 'k', mode: 'debounce' } });
    expect(late.id).toBe(first.id);
    await waitUntil(async () => (await q.recoverExpired()).expired.length === 1, 'the sweep');
    expectExpired(await q.getJob(first.id));
  });
});

describe('expiry shown', () => {
  it('surety job shows when the job expires', async () => {
    const q = queue();
    const expireAt = Date.UTC(2099, 0, 2, 3, 4, 5);
    await q.add({ n: 1 }, { id: 'e', expireAt });
    const bin = fileURLToPath(new URL('../../bin/surety.js', import.meta.url));
    const { stdout } = await promisify(execFile)(process.execPath, [bin, 'job', q.name, 'e'], {
      env: { ...process.env, REDIS_URL: fx.url, NO_COLOR: '1', FORCE_COLOR: undefined },
    });
    expect(stdout).toMatch(/expires\s+2099-01-02[T ]03:04:05/);
  });
});

describe('expiry options', () => {
  it('are validated: one of expireAt or ttlMs, positive integers or a Date', async () => {
    const q = queue();
    await expect(q.add({ n: 1 }, { expireAt: Date.now() + 1000, ttlMs: 10 })).rejects.toThrow(
      /either expireAt or ttlMs/,
    );
    await expect(q.add({ n: 1 }, { expireAt: 0 })).rejects.toBeInstanceOf(ValidationError);
    await expect(q.add({ n: 1 }, { expireAt: new Date(Number.NaN) })).rejects.toBeInstanceOf(ValidationError);
    await expect(q.add({ n: 1 }, { ttlMs: 0 })).rejects.toThrow(/ttlMs/);
    await expect(q.add({ n: 1 }, { ttlMs: 1.5 })).rejects.toThrow(/ttlMs/);
    expect((await q.counts()).waiting).toBe(0);
  });
});
