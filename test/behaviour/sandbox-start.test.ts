/**
 * A sandboxed attempt counts where its module starts (issue 32 with issue 33's sandboxes): the start
 * mark goes to Redis when the sandbox acknowledges the job, not when the worker hands it to the pool,
 * so a job whose sandbox never took it (loading, dying, its worker killed) was never counted; and its
 * timeout runs from there, so a slow sandbox start-up does not time the job out before it ran.
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Queue, Worker, type WorkerOptions } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

/**
 * A module whose load waits until the file `go` exists (a job is dispatched to it meanwhile); each job
 * it runs leaves a file `ran-<id>` in `dir`.
 */
function slowLoadingModule(): { file: string; go: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'surety-start-'));
  const go = join(dir, 'go');
  const file = join(dir, 'slow-load.mjs');
  writeFileSync(
    file,
    `import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
while (!existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 10));
export default (job) => {
  writeFileSync(join(${JSON.stringify(dir)}, 'ran-' + job.id), '');
  return 'ran';
};
`,
  );
  return { file, go, dir };
}

/** A queue, and a worker running slowLoadingModule() in a `mode` sandbox. */
function sandboxed(mode: 'thread' | 'process', opts: WorkerOptions = {}) {
  const module = slowLoadingModule();
  const name = uniqueName();
  const q = new Queue(name, { connection: fx.url });
  const w = new Worker(name, pathToFileURL(module.file), { connection: fx.url, sandbox: mode, ...opts });
  open.push(w, q);
  return { ...module, q, w };
}

/** Waits until the worker has handed job `id` to its sandbox pool (it is running, as the worker sees it). */
function dispatched(w: Worker, id: string, what = 'dispatched to the pool'): Promise<unknown> {
  return waitUntil(() => w.diagnostics().lanes.some((l) => l.runningJobs.some((j) => j.id === id)), what);
}

async function redisNow(): Promise<number> {
  const [secs, micros] = await fx.redis.time();
  return Number(secs) * 1_000 + Math.floor(Number(micros) / 1_000);
}

describe('the start of a sandboxed attempt', () => {
  it.each(['thread', 'process'] as const)(
    "in %s mode times out from when the module starts the job: a slow start-up is not the job's",
    async (mode) => {
      const { go, q, w } = sandboxed(mode);
      const { id } = await q.add({}, { timeoutMs: 300, maxAttempts: 1 });
      await dispatched(w, id);
      // Past the timeout since the dispatch, on Redis's clock, before the module may start.
      const sentAt = await redisNow();
      await waitUntil(async () => (await redisNow()) > sentAt + 500, 'the timeout passed');
      writeFileSync(go, '');
      expect(await q.waitFor(id, { timeoutMs: 20_000 })).toBe('ran');
      expect(await q.getJob(id)).toMatchObject({ state: 'completed', attempts: 1, errors: [] });
    },
    60_000,
  );

  it.each(['thread', 'process'] as const)(
    'in %s mode never comes when the job expired while it waited for its sandbox: it ends dead unrun',
    async (mode) => {
      const { go, q, w } = sandboxed(mode);
      const { id } = await q.add({}, { ttlMs: 300 });
      await dispatched(w, id, 'dispatched to the pool (leased before its expiry)');
      const { expireAt } = (await q.getJob(id))!;
      await waitUntil(async () => (await redisNow()) > expireAt! + 100, 'its expiry passed');
      writeFileSync(go, '');
      await waitUntil(async () => (await q.getJob(id))?.state === 'dead', 'ended by its expiry', 20_000);
      const info = (await q.getJob(id))!;
      expect(info).toMatchObject({ attempts: 0 });
      expect(info.errors.map((e) => e.code)).toEqual(['ERR_EXPIRED']);
    },
    60_000,
  );

  it.each(['thread', 'process'] as const)(
    'in %s mode never comes for an attempt stopped while it waited for its sandbox (cancelled, lease lost)',
    async (mode) => {
      const { go, dir, q, w } = sandboxed(mode, { concurrency: 1 });
      const stopped = await q.add({});
      await dispatched(w, stopped.id);
      await q.cancel(stopped.id);
      // One sandbox, one job at a time: the next job runs after whatever the sandbox does with the first.
      const next = await q.add({});
      writeFileSync(go, '');
      expect(await q.waitFor(next.id, { timeoutMs: 20_000 })).toBe('ran');
      expect(existsSync(join(dir, `ran-${next.id}`))).toBe(true);
      expect(existsSync(join(dir, `ran-${stopped.id}`))).toBe(false);
    },
    60_000,
  );

  it.each(['thread', 'process'] as const)(
    'in %s mode is marked when the module starts the job, not when the worker dispatches it',
    async (mode) => {
      const { go, q, w } = sandboxed(mode);
      const { id } = await q.add({});
      await dispatched(w, id);
      const releasedAt = await redisNow();
      writeFileSync(go, '');
      expect(await q.waitFor(id, { timeoutMs: 20_000 })).toBe('ran');
      const info = (await q.getJob(id))!;
      expect(info.attempts).toBe(1);
      expect(info.startedAt).toBeGreaterThanOrEqual(releasedAt);
    },
    60_000,
  );
});
