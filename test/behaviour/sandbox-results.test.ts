/**
 * A sandboxed processor's result is checked as a function processor's is (issue 33, defect 4): a
 * value that is not JSON fails the attempt with ERR_NOT_SERIALIZABLE and the same message, in a
 * thread and in a process (whose channel is JSON, which silently changed such values); and
 * job.updateData inside a sandbox updates job.data there.
 */
import { describe, expect, it } from 'vitest';
import { type Job, NotSerializableError, Queue, Worker } from '../../src/index.js';
import valuesProcessor from '../fixtures/sandbox/values.mjs';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
const VALUES = new URL('../fixtures/sandbox/values.mjs', import.meta.url);

/** Results that JSON would change without a word: each must be refused. */
const NOT_JSON = [
  { map: [['a', { json: 1 }]] },
  { date: 0 },
  { nan: true },
  { fn: true },
  { obj: { at: { date: 1_000 }, n: { inf: 1 } } },
  { arr: [{ json: 1 }, { undef: true }] },
  { instance: { x: { json: 1 } } },
];

async function outcomes(processor: URL | ((job: Job) => unknown), mode?: 'thread' | 'process') {
  const name = uniqueName();
  const q = new Queue(name, { connection: fx.url });
  const w = new Worker(name, processor as URL, { connection: fx.url, ...(mode ? { sandbox: mode } : {}) });
  const failed: Error[] = [];
  w.on('failed', (_job: Job, err: Error) => failed.push(err));
  open.push(w, q);
  const jobs = await q.addBulk(NOT_JSON.map((returns) => ({ data: { returns }, opts: { maxAttempts: 1 } })));
  await waitUntil(() => failed.length === NOT_JSON.length, 'every job failed', 20_000);
  const lines = [];
  for (const j of jobs) {
    const info = (await q.getJob(j.id))!;
    lines.push({ state: info.state, errors: info.errors.map((e) => ({ code: e.code, message: e.message })) });
  }
  return { lines, failed };
}

describe('a sandboxed result that is not JSON', () => {
  it.each(['thread', 'process'] as const)(
    'in a %s sandbox fails with ERR_NOT_SERIALIZABLE, as the same processor inline does',
    async (mode) => {
      const inline = await outcomes(valuesProcessor as (job: Job) => unknown);
      const sandboxed = await outcomes(VALUES, mode);
      for (const line of inline.lines) {
        expect(line.state).toBe('dead');
        expect(line.errors[0]!.code).toBe('ERR_NOT_SERIALIZABLE');
      }
      expect(sandboxed.lines).toEqual(inline.lines);
      expect(sandboxed.failed.every((e) => e instanceof NotSerializableError)).toBe(true);
    },
    60_000,
  );
});

describe('job.updateData inside a sandbox', () => {
  it.each(['thread', 'process'] as const)('in a %s sandbox updates job.data there too', async (mode) => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url });
    const w = new Worker(name, VALUES, { connection: fx.url, sandbox: mode });
    open.push(w, q);
    const job = await q.add({ mode: 'update', n: 1 });
    expect(await q.waitFor(job.id)).toEqual({ seen: { mode: 'update', n: 2 } });
    expect((await q.getJob(job.id))!.data).toEqual({ mode: 'update', n: 2 });
  });
});
