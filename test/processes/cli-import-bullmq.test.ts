/**
 * `surety import-bullmq`, run as a real binary in child processes against this file's private
 * redis-server, moving real BullMQ 6 queues (made with BullMQ's own Queue and Worker on the same server)
 * into Surety queues. The binary is this run's compiled build (test/helpers/cli-build.ts).
 */
import { Queue as BullQueue, Worker as BullWorker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type JobInfo, Queue } from '../../src/index.js';
import type { ImportReport } from '../../src/migrate/index.js';
import { BUILD_TIMEOUT_MS, type CliRun, compiledCli, runCompiledCli } from '../helpers/cli-build.js';
import { closeAfterEach, uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
let compiled = '';
/** BullMQ's own connection: it refuses one with a bounded maxRetriesPerRequest for its workers. */
let bullConnection: Redis;
beforeAll(async () => {
  compiled = await compiledCli();
  bullConnection = new Redis(fx.url, { maxRetriesPerRequest: null });
}, BUILD_TIMEOUT_MS);
afterAll(() => bullConnection?.disconnect());

/** Runs `surety <args>` against this file's Redis. */
function surety(...args: string[]): Promise<CliRun> {
  return runCompiledCli(compiled, fx.url, args);
}

function suretyQueue(name: string): Queue {
  const q = new Queue(name, { connection: fx.url });
  open.push(q);
  return q;
}

function bullQueue(name: string, prefix = 'bull'): BullQueue {
  const q = new BullQueue(name, { connection: bullConnection, prefix });
  open.push(q);
  return q;
}

/**
 * A BullMQ queue with work in each state the import moves: one failed job (taken and failed by hand,
 * as a worker would), two waiting, one prioritized, one delayed, and a job scheduler (cron) whose
 * pending occurrence waits in BullMQ's delayed set (it moves as a delayed job; the schedule here
 * starts at the tick after it).
 */
async function seedBullMQ(q: BullQueue): Promise<void> {
  await q.add('charge', { order: 1 });
  const worker = new BullWorker(q.name, null, { connection: bullConnection, prefix: q.opts.prefix });
  try {
    const job = await worker.getNextJob('test-token');
    if (!job) throw new Error('BullMQ handed out no job');
    await job.moveToFailed(new Error('card declined'), 'test-token', false);
  } finally {
    await worker.close();
  }
  await q.add('welcome', { to: 'ada' });
  await q.add('welcome', { to: 'grace' }, { jobId: 'welcome-grace' });
  await q.add('report', { urgent: true }, { priority: 5 });
  await q.add('reminder', { to: 'alan' }, { delay: 3_600_000 });
  await q.upsertJobScheduler('nightly', { pattern: '0 3 * * *' }, { name: 'cleanup', data: { deep: true } });
}

/** What BullMQ itself counts, the schedulers included. */
async function bullCounts(q: BullQueue): Promise<Record<string, number>> {
  return { ...(await q.getJobCounts()), schedulers: await q.getJobSchedulersCount() };
}

const SEEDED = {
  waiting: 2,
  prioritized: 1,
  delayed: 2, // the reminder and the scheduler's pending occurrence
  failed: 1,
  active: 0,
  completed: 0,
  'waiting-children': 0,
  schedulers: 1,
};

const ids = (jobs: JobInfo[]) => jobs.map((j) => j.id).sort();

describe('surety import-bullmq', () => {
  it('--dry-run (--json or not) reports what would move and moves nothing', async () => {
    const name = uniqueName('dry');
    const bull = bullQueue(name);
    await seedBullMQ(bull);
    expect(await bullCounts(bull)).toMatchObject(SEEDED);

    const r = await surety('--json', 'import-bullmq', name, '--to', name, '--dry-run');
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    const report = JSON.parse(r.stdout) as ImportReport;
    expect(report).toMatchObject({
      from: { queue: name, prefix: 'bull' },
      to: name,
      dryRun: true,
      moved: { waiting: 2, prioritized: 1, delayed: 2, failed: 1, paused: 0, total: 6 },
      schedulers: ['nightly'],
      kept: { total: 0 },
      before: { waiting: 2, prioritized: 1, delayed: 2, failed: 1, schedulers: 1 },
    });
    expect(report.after).toEqual(report.before);
    const human = await surety('import-bullmq', name, '--to', name, '--dry-run');
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^dry run: nothing was moved\nwould move 6 jobs from BullMQ queue /);
    expect(human.stdout).toContain('would move 1 scheduler to schedules: nightly');
    expect(human.stdout).toContain('BullMQ now: waiting 2, prioritized 1, delayed 2, failed 1, schedulers 1');

    expect(await bullCounts(bull)).toMatchObject(SEEDED);
    const q = suretyQueue(name);
    expect(await q.exists()).toBe(false);
    expect(await q.counts()).toEqual({
      waiting: 0,
      delayed: 0,
      blocked: 0,
      active: 0,
      completed: 0,
      dead: 0,
    });
    expect(await q.schedules()).toEqual([]);
  });

  it('moves waiting, prioritized, delayed and failed jobs and a scheduler; the CLI then lists them', async () => {
    const name = uniqueName('move');
    const target = uniqueName('target');
    const bull = bullQueue(name);
    await seedBullMQ(bull);

    const r = await surety('import-bullmq', name, '--to', target);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(/dry run|would move/);
    expect(r.stdout).toContain(
      `moved 6 jobs from BullMQ queue ${name} (prefix bull) to ${target}: 2 waiting, 1 prioritized, 2 delayed, 1 failed (dead here)`,
    );
    expect(r.stdout).toContain('moved 1 scheduler to schedules: nightly');
    // BullMQ's scheduler job name has no Surety equivalent: the summary lists it with its count.
    expect(r.stdout).toMatch(/^BullMQ options dropped [^\n]*:\n( {2}[^\n]*\n)* {2}scheduler job name: 1$/m);
    expect(r.stdout).toMatch(/BullMQ before -> after: waiting 2 -> 0, prioritized 1 -> 0, delayed 2 -> 0/);
    expect(r.stderr).toMatch(/^surety: pass 1: /m);

    // Nothing left in BullMQ but the history it keeps (none here)...
    expect(await bullCounts(bull)).toMatchObject({
      waiting: 0,
      prioritized: 0,
      delayed: 0,
      failed: 0,
      schedulers: 0,
    });
    // ...and every job here, as the CLI and the library see it.
    const q = suretyQueue(target);
    // Delayed: the reminder, BullMQ's pending run of the scheduler, and the schedule's next run.
    expect(await q.counts()).toMatchObject({ waiting: 3, delayed: 3, dead: 1, active: 0 });
    const listed = await surety('--json', 'jobs', target);
    expect(listed.code).toBe(0);
    const waiting = JSON.parse(listed.stdout) as JobInfo[];
    expect(waiting.map((j) => j.data)).toEqual(
      expect.arrayContaining([{ to: 'ada' }, { to: 'grace' }, { urgent: true }]),
    );
    expect(waiting.find((j) => j.id === 'welcome-grace')?.data).toEqual({ to: 'grace' });
    const dead = JSON.parse((await surety('--json', 'jobs', target, '--state', 'dead')).stdout) as JobInfo[];
    expect(dead.map((j) => j.data)).toEqual([{ order: 1 }]);
    expect((await q.getJobs('delayed')).map((j) => j.data)).toEqual(
      expect.arrayContaining([{ to: 'alan' }, { deep: true }]),
    );
    const schedules = await q.schedules();
    expect(schedules.map((s) => ({ key: s.key, cron: s.cron, data: s.data }))).toEqual([
      { key: 'nightly', cron: '0 3 * * *', data: { deep: true } },
    ]);
  });

  it('running it again moves nothing new, and moves a job added to BullMQ since', async () => {
    const name = uniqueName('again');
    const bull = bullQueue(name);
    await seedBullMQ(bull);
    const first = await surety('--json', 'import-bullmq', name, '--to', name);
    expect(first.code).toBe(0);
    expect((JSON.parse(first.stdout) as ImportReport).moved.total).toBe(6);
    const q = suretyQueue(name);
    const movedIds = ids(await q.getJobs(['waiting', 'delayed', 'dead']));
    // The six jobs, and the pending run of the schedule the scheduler became.
    expect(movedIds).toHaveLength(7);
    expect(movedIds.filter((id) => id.startsWith('schedule:nightly:'))).toHaveLength(1);

    const again = await surety('--json', 'import-bullmq', name, '--to', name);
    expect(again.code).toBe(0);
    const report = JSON.parse(again.stdout) as ImportReport;
    expect(report.moved.total).toBe(0);
    expect(report.schedulers).toEqual([]);
    expect(report.kept.total).toBe(0);
    expect(ids(await q.getJobs(['waiting', 'delayed', 'dead']))).toEqual(movedIds);
    expect(await q.schedules()).toHaveLength(1);

    // A producer still on BullMQ: its new job moves on the next run, and only it.
    const late = await bull.add('welcome', { to: 'barbara' });
    const human = await surety('import-bullmq', name, '--to', name);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(
      `moved 1 job from BullMQ queue ${name} (prefix bull) to ${name}: 1 waiting`,
    );
    expect((await q.getJob(late.id!))?.data).toEqual({ to: 'barbara' });
    expect(ids(await q.getJobs(['waiting', 'delayed', 'dead']))).toEqual([...movedIds, late.id!].sort());
  });

  it('a misspelt BullMQ queue name exits 1 with ERR_IMPORT and names the closest queue', async () => {
    const name = uniqueName('orders');
    const bull = bullQueue(name);
    await bull.add('charge', { order: 1 });
    const typo = name.replace('orders', 'ordres');

    const r = await surety('import-bullmq', typo, '--to', name);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      `surety: ERR_IMPORT: no BullMQ queue ${typo} under prefix bull (did you mean ${name}?)\n`,
    );
    expect(await bull.getWaitingCount()).toBe(1);
    expect(await suretyQueue(name).exists()).toBe(false);
  });

  it('--bullmq-prefix reads a BullMQ queue under a prefix of its own', async () => {
    const name = uniqueName('prefixed');
    const prefix = uniqueName('myapp');
    const bull = bullQueue(name, prefix);
    await bull.add('welcome', { to: 'ada' });
    await bull.add('reminder', { to: 'alan' }, { delay: 3_600_000 });

    // Under BullMQ's default prefix there is no such queue.
    const wrong = await surety('import-bullmq', name, '--to', name);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/ERR_IMPORT: no BullMQ queue .* under prefix bull/);

    const r = await surety('--json', 'import-bullmq', name, '--to', name, '--bullmq-prefix', prefix);
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as ImportReport;
    expect(report.from).toEqual({ queue: name, prefix });
    expect(report.moved).toMatchObject({ waiting: 1, delayed: 1, total: 2 });
    expect(await bull.getJobCounts('wait', 'delayed')).toEqual({ wait: 0, delayed: 0 });
    const q = suretyQueue(name);
    expect((await q.getJobs('waiting')).map((j) => j.data)).toEqual([{ to: 'ada' }]);
    expect((await q.getJobs('delayed')).map((j) => j.data)).toEqual([{ to: 'alan' }]);
  });

  it('has --help with examples; bad arguments exit 2 before anything moves', async () => {
    const name = uniqueName('usage');
    const bull = bullQueue(name);
    await bull.add('welcome', { to: 'ada' });
    const [help, noTo, passes, badName] = await Promise.all([
      surety('import-bullmq', '--help'),
      surety('import-bullmq', name),
      surety('import-bullmq', name, '--to', name, '--passes', '101'),
      surety('import-bullmq', name, '--to', 'no spaces'),
    ]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/--bullmq-prefix <prefix>[\s\S]*Examples:\n {2}\$ surety import-bullmq /);
    expect(noTo.code).toBe(2);
    expect(noTo.stderr).toMatch(/^surety: required option '--to <queue>' not specified/);
    expect(passes.code).toBe(2);
    expect(passes.stderr).toMatch(/--passes must be an integer from 1 to 100/);
    expect(badName.code).toBe(2);
    expect(badName.stderr).toMatch(/^surety: ERR_INVALID_QUEUE_NAME: /);
    expect(await bull.getWaitingCount()).toBe(1);
  });

  it('--no-failed and --no-schedulers leave those in BullMQ', async () => {
    const name = uniqueName('partial');
    const bull = bullQueue(name);
    await seedBullMQ(bull);

    const r = await surety('--json', 'import-bullmq', name, '--to', name, '--no-failed', '--no-schedulers');
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout) as ImportReport;
    expect(report.moved).toMatchObject({ waiting: 2, prioritized: 1, failed: 0 });
    expect(report.schedulers).toEqual([]);
    expect(await bullCounts(bull)).toMatchObject({ failed: 1, schedulers: 1, waiting: 0, prioritized: 0 });
    const q = suretyQueue(name);
    expect(await q.counts()).toMatchObject({ dead: 0 });
    expect(await q.schedules()).toEqual([]);
  });
});
