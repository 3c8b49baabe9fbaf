/**
 * Calls a sandboxed job's code makes after it returned (issue 33, defect 2) carry their run, job id
 * and attempt token, and are refused as a function processor's are once its lease is gone: never
 * applied to the next job the sandbox runs.
 */
import { describe, expect, it } from 'vitest';
import { type Job as JobType, Queue, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
const LATE = new URL('../fixtures/sandbox/late-calls.mjs', import.meta.url);

/** What each late call answers: refused as Job's fenced methods refuse a lost lease. */
const REFUSED = {
  updateData: { code: 'ERR_LEASE_EXPIRED' },
  log: { value: false },
  progress: { value: false },
  step: { code: 'ERR_LEASE_EXPIRED' },
};

async function runPair(processor: URL | ((job: JobType) => Promise<unknown>), mode?: 'thread' | 'process') {
  const name = uniqueName();
  const q = new Queue(name, { connection: fx.url });
  const w = new Worker(name, processor as URL, {
    connection: fx.url,
    concurrency: 1,
    ...(mode ? { sandbox: mode } : {}),
  });
  open.push(w, q);
  const kept = await q.add({ mode: 'keep' });
  expect(await q.waitFor(kept.id)).toBe('kept');
  const poke = await q.add({ mode: 'poke' });
  const answers = await q.waitFor(poke.id);
  return { q, kept, poke, answers };
}

describe('calls a sandboxed job makes after it returned', () => {
  it.each(['thread', 'process'] as const)(
    'in a %s sandbox are refused and change neither that job nor the next one the sandbox runs',
    async (mode) => {
      const { q, kept, poke, answers } = await runPair(LATE, mode);
      expect(answers).toEqual({ ...REFUSED, earlierData: { mode: 'keep' } });
      for (const [id, data] of [
        [kept.id, { mode: 'keep' }],
        [poke.id, { mode: 'poke' }],
      ] as const) {
        const info = await q.getJob(id);
        expect(info!.data).toEqual(data);
        expect(info!.logs).toEqual([]);
        expect(info!.progress).toBeUndefined();
        expect(info!.steps).toBeUndefined();
      }
    },
  );

  it("are answered as a function processor's late calls are", async () => {
    let earlier: JobType | null = null;
    const { answers } = await runPair(async (job) => {
      if ((job.data as { mode: string }).mode === 'keep') {
        earlier = job;
        return 'kept';
      }
      const j = earlier!;
      const outcome = async (call: () => Promise<unknown>) => {
        try {
          return { value: (await call()) ?? null };
        } catch (err) {
          return { code: (err as { code?: string }).code };
        }
      };
      return {
        updateData: await outcome(() => j.updateData({ hacked: true })),
        log: await outcome(() => j.log('a late line')),
        progress: await outcome(() => j.progress(99)),
        step: await outcome(() => j.step('late', () => 'a late value')),
        earlierData: j.data,
      };
    });
    expect(answers).toEqual({ ...REFUSED, earlierData: { mode: 'keep' } });
  });
});
