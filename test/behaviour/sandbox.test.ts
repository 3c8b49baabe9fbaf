/**
 * Sandboxed processors (docs/sandbox.md): a Worker given a module runs it in worker threads or child
 * processes. Fixtures are plain .mjs modules in test/fixtures/sandbox/.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  type Job,
  Queue,
  SandboxError,
  SuretyError,
  UnrecoverableError,
  ValidationError,
  Worker,
} from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

const DEFAULT = new URL('../fixtures/sandbox/default.mjs', import.meta.url);
const NAMED = new URL('../fixtures/sandbox/named.mjs', import.meta.url);
const LOAD_ONCE = new URL('../fixtures/sandbox/load-once.mjs', import.meta.url);

type Mode = 'thread' | 'process';

function setup(module: URL | string, opts: ConstructorParameters<typeof Worker>[2] = {}) {
  const name = uniqueName();
  const q = new Queue(name, { connection: fx.url });
  const w = new Worker(name, module, { connection: fx.url, ...opts });
  const failures: Error[] = [];
  const leaseLost: string[] = [];
  w.on('failed', (_job: Job, err: Error) => failures.push(err));
  w.on('leaseLost', (ids: string[]) => leaseLost.push(...ids));
  open.push(w, q);
  return { q, w, failures, leaseLost };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** OS threads of this process (a worker thread is one of them). */
const osThreads = () => readdirSync('/proc/self/task').length;

describe('sandboxed processors', () => {
  it.each<Mode>(['thread', 'process'])(
    'a %s sandbox runs the default export; progress and log reach getJob',
    async (mode) => {
      const { q } = setup(DEFAULT, { sandbox: mode });
      const job = await q.add({ n: 21 });
      const result = (await q.waitFor(job.id)) as { doubled: number; pid: number; mainThread: boolean };
      expect(result.doubled).toBe(42);
      if (mode === 'thread') {
        expect(result.pid).toBe(process.pid);
        expect(result.mainThread).toBe(false);
      } else expect(result.pid).not.toBe(process.pid);
      const info = await q.getJob(job.id);
      expect(info!.progress).toEqual({ half: true });
      expect(info!.logs).toEqual([`ran in pid ${result.pid}`]);
    },
  );

  it('a module path string works, the default mode is process, and sandboxes are reused', async () => {
    const { q, w } = setup(DEFAULT.pathname, { concurrency: 1 });
    const a = await q.add({ n: 1 });
    const b = await q.add({ n: 2 });
    const ra = (await q.waitFor(a.id)) as { pid: number };
    const rb = (await q.waitFor(b.id)) as { pid: number };
    expect(w.options.sandbox).toBeUndefined();
    expect(ra.pid).not.toBe(process.pid);
    expect(rb.pid).toBe(ra.pid);
  });

  it('a function with sandbox set, an unknown mode and a relative path are refused with ERR_INVALID_OPTION', () => {
    const name = uniqueName();
    const make = (p: unknown, o: object) =>
      new Worker(name, p as string, { connection: fx.url, autostart: false, ...o });
    for (const [p, o] of [
      [() => 1, { sandbox: 'thread' }],
      [DEFAULT, { sandbox: 'fiber' }],
      ['./fixtures/sandbox/default.mjs', {}],
    ] as const) {
      let thrown: unknown;
      try {
        open.push(make(p, o));
      } catch (err) {
        thrown = err;
      }
      expect(thrown).toBeInstanceOf(SuretyError);
      expect((thrown as SuretyError).code).toBe('ERR_INVALID_OPTION');
    }
    expect(() => make(() => 1, { sandbox: 'process' })).toThrow(ValidationError);
  });

  it("the named export `process` runs; a thrown error crosses as data with its name, code and fields; the library's classes are rebuilt", async () => {
    const { q, failures } = setup(NAMED, { sandbox: 'thread' });
    const ok = await q.add({ n: 5 });
    expect(await q.waitFor(ok.id)).toEqual({ ok: 5 });
    const bad = await q.add({ mode: 'throw', n: 7 }, { maxAttempts: 1 });
    await waitUntil(() => failures.length === 1, 'the failed event');
    const err = failures[0] as Error & { code?: string; detail?: unknown };
    expect(err.name).toBe('TypeError');
    expect(err.message).toBe('bad input 7');
    expect(err.code).toBe('E_BAD');
    expect(err.detail).toEqual({ n: 7 });
    expect(err.stack).toContain('named.mjs');
    expect((await q.getJob(bad.id))!.errors[0]).toMatchObject({ name: 'TypeError', code: 'E_BAD' });
    const gone = await q.add({ mode: 'unrecoverable' }, { maxAttempts: 5 });
    await waitUntil(() => failures.length === 2, 'the second failed event');
    expect((await q.getJob(gone.id))!.state).toBe('dead');
    expect(failures[1]).toBeInstanceOf(UnrecoverableError);
    expect((await q.getJob(gone.id))!.errors).toHaveLength(1);
  });

  it('a SnoozeError thrown in a sandbox snoozes the job (its class and delayMs survive the crossing)', async () => {
    const { q, w } = setup(NAMED, { sandbox: 'process' });
    const snoozed: number[] = [];
    w.on('snoozed', (_job: Job, delayMs: number) => snoozed.push(delayMs));
    const job = await q.add({ mode: 'snooze', n: 4 });
    expect(await q.waitFor(job.id)).toEqual({ ok: 4 });
    expect(snoozed).toEqual([20]);
    const info = await q.getJob(job.id);
    expect(info!.errors).toEqual([]);
    // Two starts, the snoozed one's budget given back.
    expect(info).toMatchObject({ attempts: 2, attemptsLeft: 2 });
  });

  it('job.step inside a sandbox stores its result once and replays it on the next attempt', async () => {
    const { q } = setup(NAMED, { sandbox: 'thread' });
    const job = await q.add({ mode: 'step' }, { maxAttempts: 2, backoff: { type: 'fixed', delayMs: 0 } });
    expect(await q.waitFor(job.id)).toEqual({ at: 1 });
  });

  it('job.sleep inside a sandbox snoozes the job, spends none of its budget, and resumes past the sleep', async () => {
    const { q } = setup(NAMED, { sandbox: 'process' });
    const job = await q.add({ mode: 'sleep' }, { maxAttempts: 1 });
    expect(await q.waitFor(job.id)).toEqual({ at: 1, woke: true });
    expect(await q.getJob(job.id)).toMatchObject({ attempts: 2, attemptsLeft: 0, snoozes: 1, errors: [] });
  });

  it.each<Mode>(['thread', 'process'])(
    'job.waitForSignal inside a %s sandbox parks the job and resumes it with the payload, or times out',
    async (mode) => {
      const { q } = setup(NAMED, { sandbox: mode });
      const job = await q.add({ mode: 'signal' }, { maxAttempts: 1 });
      await waitUntil(
        async () => (await q.getJob(job.id))?.waitingForSignal?.name === 'go',
        'the job parked',
      );
      expect(await q.signal(job.id, 'go', { ok: 1 })).toMatchObject({ delivered: true, woke: true });
      expect(await q.waitFor(job.id)).toEqual({ at: 1, payload: { ok: 1 } });
      expect(await q.getJob(job.id)).toMatchObject({ attempts: 2, errors: [] });
      const late = await q.add({ mode: 'signal', timeoutMs: 100 });
      expect(await q.waitFor(late.id)).toEqual({ at: 1, timedOut: 'SignalTimeoutError' });
    },
  );

  it.each<Mode>(['thread', 'process'])(
    'job.addChildren and job.waitForChildren inside a %s sandbox park the parent until its children end',
    async (mode) => {
      const { q } = setup(NAMED, { sandbox: mode });
      const job = await q.add({ mode: 'children' }, { maxAttempts: 1 });
      expect(await q.waitFor(job.id)).toEqual({ at: 1, results: [10, 20] });
      expect(await q.getJob(job.id)).toMatchObject({ attempts: 2, errors: [] });
      expect(await q.counts()).toMatchObject({ completed: 3 });
    },
  );

  it('job.signal aborts inside the sandbox when the job is cancelled', async () => {
    const { q } = setup(NAMED, { sandbox: 'process' });
    const file = join(tmpdir(), `${uniqueName('abort')}.txt`);
    const job = await q.add({ mode: 'wait-abort', file });
    await waitUntil(async () => (await q.getJob(job.id))?.logs.includes('waiting'), 'the job waiting');
    await q.cancel(job.id);
    // The file is created before its content is written: wait for the content, not the file.
    await waitUntil(
      () => existsSync(file) && readFileSync(file, 'utf8') !== '',
      'the abort seen inside the sandbox',
    );
    expect(readFileSync(file, 'utf8')).toBe('ERR_CANCELLED');
  });

  it.each<Mode>(['thread', 'process'])(
    'in a %s sandbox, process.exit and running out of memory fail only that attempt with ERR_SANDBOX; the next job succeeds',
    async (mode) => {
      const { q, failures } = setup(NAMED, { sandbox: mode, sandboxMemoryMb: 32 });
      for (const [i, crash] of ['exit', 'oom'].entries()) {
        const bad = await q.add({ mode: crash }, { maxAttempts: 1 });
        await waitUntil(() => failures.length === i + 1, `the ${crash} job's failed event`);
        const info = await q.getJob(bad.id);
        expect(info!.state).toBe('dead');
        expect(info!.errors).toHaveLength(1);
        expect(info!.errors[0]!.code).toBe('ERR_SANDBOX');
        if (crash === 'oom') expect(info!.errors[0]!.message).toContain('out of memory');
        expect(failures.at(-1)).toBeInstanceOf(SandboxError);
        const next = await q.add({ n: crash });
        expect(await q.waitFor(next.id)).toEqual({ ok: crash });
      }
    },
  );

  it('an external SIGKILL of a process sandbox fails that attempt with ERR_SANDBOX; it is retried in a new sandbox', async () => {
    const { q, w } = setup(NAMED, { sandbox: 'process' });
    const job = await q.add({ mode: 'hang' }, { maxAttempts: 2, backoff: { type: 'fixed', delayMs: 0 } });
    const line = await waitUntil(async () => (await q.getJob(job.id))?.logs[0], 'the sandbox pid');
    const pid = Number(line.split(' ')[1]);
    process.kill(pid, 'SIGKILL');
    await waitUntil(async () => (await q.getJob(job.id))?.logs.length === 2, 'the second attempt running');
    const info = await q.getJob(job.id);
    expect(info!.attempts).toBe(2);
    expect(info!.errors[0]).toMatchObject({ attempt: 1, code: 'ERR_SANDBOX' });
    expect(info!.errors[0]!.message).toContain('SIGKILL');
    expect(Number(info!.logs[1]!.split(' ')[1])).not.toBe(pid);
    await q.cancel(job.id);
    // The worker frees the slot once it hears of the cancel; close() then ends the hung sandbox at once.
    await waitUntil(() => w.activeCount === 0, 'the cancel seen by the worker');
    const closing = Date.now();
    await w.close();
    expect(Date.now() - closing).toBeLessThan(2_000);
  });

  it('a crash goes through the normal failure path: retried, then completed on attempt 2', async () => {
    const { q } = setup(NAMED, { sandbox: 'thread' });
    const job = await q.add(
      { mode: 'exit-first', n: 3 },
      { maxAttempts: 2, backoff: { type: 'fixed', delayMs: 10 } },
    );
    expect(await q.waitFor(job.id)).toEqual({ ok: 3 });
    const info = await q.getJob(job.id);
    expect(info!.attempts).toBe(2);
    expect(info!.errors.map((e) => e.code)).toEqual(['ERR_SANDBOX']);
  });

  it('a module that throws at load fails that attempt with ERR_SANDBOX; the next sandbox loads and the next job succeeds', async () => {
    const marker = join(tmpdir(), `${uniqueName('throw-once')}`);
    writeFileSync(marker, '');
    process.env.SURETY_TEST_THROW_ONCE = marker;
    try {
      const { q, failures } = setup(LOAD_ONCE, { sandbox: 'process' });
      const bad = await q.add({ n: 1 }, { maxAttempts: 1 });
      await waitUntil(() => failures.length === 1, 'the failed event');
      expect((await q.getJob(bad.id))!.state).toBe('dead');
      expect(failures[0]).toBeInstanceOf(SandboxError);
      expect(failures[0]!.message).toContain('broken at load');
      const next = await q.add({ n: 2 });
      expect(await q.waitFor(next.id)).toEqual({ loaded: true, n: 2 });
    } finally {
      delete process.env.SURETY_TEST_THROW_ONCE;
    }
  });

  it.each<Mode>(['thread', 'process'])(
    'a CPU-bound processor in a %s sandbox busy for 3 leases keeps its lease and completes once',
    async (mode) => {
      const { q, leaseLost } = setup(NAMED, { sandbox: mode, recoverIntervalMs: 100 });
      const job = await q.add({ mode: 'busy', ms: 1_500 }, { leaseMs: 500 });
      expect(await q.waitFor(job.id)).toBe('busy done');
      const info = await q.getJob(job.id);
      expect(info!.attempts).toBe(1);
      expect(info!.errors).toEqual([]);
      expect(leaseLost).toEqual([]);
    },
  );

  it('close() ends every process sandbox', async () => {
    const { q, w } = setup(DEFAULT, { sandbox: 'process', concurrency: 2 });
    const jobs = await Promise.all([1, 2, 3, 4].map((n) => q.add({ n })));
    const pids = new Set<number>();
    for (const j of jobs) pids.add(((await q.waitFor(j.id)) as { pid: number }).pid);
    expect(pids.size).toBeGreaterThanOrEqual(1);
    expect(pids.size).toBeLessThanOrEqual(2);
    for (const pid of pids) expect(alive(pid)).toBe(true);
    await w.close();
    for (const pid of pids) expect(alive(pid)).toBe(false);
  });

  it('close() ends every thread sandbox', async () => {
    const { q, w } = setup(DEFAULT, { sandbox: 'thread', concurrency: 2 });
    const before = osThreads();
    const a = await q.add({ n: 1 });
    const b = await q.add({ n: 2 });
    await Promise.all([q.waitFor(a.id), q.waitFor(b.id)]);
    const during = osThreads();
    expect(during).toBeGreaterThan(before);
    await w.close();
    expect(osThreads()).toBeLessThanOrEqual(before);
  });
});
