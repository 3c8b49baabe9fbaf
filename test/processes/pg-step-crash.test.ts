/**
 * pgStep across a crash: a worker process killed with kill -9 after its step committed in PostgreSQL
 * and before its completion reached Redis (the recovered attempts get the stored results instead of
 * writing again), or inside the step, its transaction open (PostgreSQL rolls it back, and the
 * recovered attempt runs the step).
 */
import { fork } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { Queue, Worker } from '../../src/index.js';
import { pgStep } from '../../src/postgres/index.js';
import { addEffect, effectsOf, stepRowsOf, usePgStepDb } from '../helpers/pg-steps.js';
import { closeAfterEach, uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const db = usePgStepDb();
const open = closeAfterEach();
const children: ReturnType<typeof fork>[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
});

function startChild(queue: string, leaseMs: number, mode = '') {
  const child = fork(
    new URL('../fixtures/pg-step-child.ts', import.meta.url).pathname,
    [fx.url, db.url, queue, String(leaseMs), mode],
    { execArgv: ['--import', 'tsx'], stdio: 'pipe' },
  );
  children.push(child);
  return child;
}

describe('pgStep across a crash', () => {
  it('a worker killed (kill -9) after its steps committed: the recovered attempts do not write again', async () => {
    const q = new Queue(uniqueName(), { connection: fx.url });
    open.push(q);
    const leaseMs = 500;
    const child = startChild(q.name, leaseMs);
    const stored = new Map<string, unknown>();
    const allStored = new Promise<void>((resolve) =>
      child.on('message', (m: { stored?: string; charge?: unknown }) => {
        if (m.stored) stored.set(m.stored, m.charge);
        if (stored.size === 3) resolve();
      }),
    );
    const jobs = await q.addBulk([1, 2, 3].map(() => ({ data: {}, opts: { leaseMs } })));
    await allStored;
    child.kill('SIGKILL');

    let ran = 0;
    const rescuer = new Worker(
      q.name,
      (job) =>
        pgStep(job, 'charge', db.pool, async (client) => {
          ran++;
          await addEffect(client, job, 'charged again');
          return { by: 'rescuer', attempt: job.attempt };
        }),
      { connection: fx.url, recoverIntervalMs: 50, concurrency: 3 },
    );
    open.push(rescuer);
    for (const { id } of jobs) {
      expect(await q.waitFor(id, { timeoutMs: 15_000 })).toEqual(stored.get(id));
      const info = (await q.getJob(id))!;
      expect(info.attempts).toBe(2);
      expect(info.errors.map((e) => e.code)).toEqual(['ERR_LEASE_EXPIRED']);
    }
    expect(ran).toBe(0);
    const ids = jobs.map((j) => j.id).sort();
    const effects = await effectsOf(db.pool, q.name);
    expect(effects.map((e) => e.job_id)).toEqual(ids); // exactly one effect row per job
    expect(effects.every((e) => e.attempt === 1 && e.what === `charged by ${child.pid}`)).toBe(true);
    expect((await stepRowsOf(db.pool, q.name)).map((r) => [r.job_id, r.attempt])).toEqual(
      ids.map((id) => [id, 1]),
    );
  });

  it('a worker killed (kill -9) inside its step: nothing committed, the recovered attempt runs the step once', async () => {
    const q = new Queue(uniqueName(), { connection: fx.url });
    open.push(q);
    const leaseMs = 500;
    const child = startChild(q.name, leaseMs, 'in-fn');
    const { id } = await q.add({}, { leaseMs });
    await new Promise<void>((resolve) =>
      child.on('message', (m: { inFn?: string }) => {
        if (m.inFn === id) resolve();
      }),
    );
    child.kill('SIGKILL');
    const rescuer = new Worker(
      q.name,
      (job) =>
        pgStep(job, 'charge', db.pool, async (client) => {
          await addEffect(client, job, 'charged by the rescuer');
          return { by: 'rescuer', attempt: job.attempt };
        }),
      { connection: fx.url, recoverIntervalMs: 50 },
    );
    open.push(rescuer);
    expect(await q.waitFor(id, { timeoutMs: 15_000 })).toEqual({ by: 'rescuer', attempt: 2 });
    expect(await effectsOf(db.pool, q.name)).toEqual([
      { job_id: id, attempt: 2, what: 'charged by the rescuer' },
    ]);
  });
});
