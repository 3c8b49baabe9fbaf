/**
 * `surety update-data | change-priority | change-delay | drain | obliterate`, run as a real binary in
 * child processes (stdin a pipe, as in CI: no terminal), against this file's private redis-server; and
 * the confirmation prompt itself on a fake terminal. The binary is this run's compiled build
 * (test/helpers/cli-build.ts); test/processes/cli.test.ts covers the launcher, bin/surety.js.
 */
import { PassThrough } from 'node:stream';
import { beforeAll, describe, expect, it } from 'vitest';
import { confirm } from '../../src/cli/commands/edits.js';
import { UsageError } from '../../src/cli/errors.js';
import { type Job, Queue, Worker } from '../../src/index.js';
import { BUILD_TIMEOUT_MS, type CliRun, compiledCli, runCompiledCli } from '../helpers/cli-build.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
let compiled = '';
beforeAll(async () => {
  compiled = await compiledCli();
}, BUILD_TIMEOUT_MS);

/** Runs `surety <args>` against this file's Redis. */
function surety(...args: string[]): Promise<CliRun> {
  return runCompiledCli(compiled, fx.url, args);
}
function queue(name = uniqueName()): Queue {
  const q = new Queue(name, { connection: fx.url });
  open.push(q);
  return q;
}
async function keyCount(name: string): Promise<number> {
  let n = 0;
  let cursor = '0';
  do {
    const [next, keys] = await fx.redis.scan(cursor, 'MATCH', `*${name}*`, 'COUNT', 1000);
    n += keys.length;
    cursor = next;
  } while (cursor !== '0');
  return n;
}

describe('surety signal', () => {
  it('wakes a parked job with a JSON payload; a job that ended exits 1 with the reason', async () => {
    const q = queue();
    const w = new Worker(q.name, (job: Job) => job.waitForSignal('approved'), { connection: fx.url });
    open.push(w);
    const { id } = await q.add({});
    await waitUntil(async () => (await q.getJob(id))?.waitingForSignal, 'the job parks');
    await q.signal(id, 'other', 1);
    const shown = await surety('job', q.name, id);
    expect(shown.stdout).toMatch(/waits for\s+signal approved\n/);
    expect(shown.stdout).toMatch(/signals not taken \(1\)\n {2}other: 1\n/);
    const ok = await surety('signal', q.name, id, 'approved', '{"by":"ana"}');
    expect(ok).toMatchObject({ code: 0, stdout: `${q.name}: job ${id} woke with signal approved\n` });
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toEqual({ by: 'ana' });
    const late = await surety('--json', 'signal', q.name, id, 'approved');
    expect(late.code).toBe(1);
    expect(JSON.parse(late.stdout)).toEqual({
      queue: q.name,
      id,
      name: 'approved',
      delivered: false,
      state: 'completed',
      woke: false,
      reason: 'ended',
    });
    expect(late.stderr).toMatch(/not delivered to job .*: the job has ended \(completed\)/);
    const bad = await surety('signal', q.name, id, 'approved', '{nope');
    expect(bad.code).toBe(2);
  });
});

describe('surety update-data, change-priority, change-delay', () => {
  it('update-data replaces the data; bad JSON is a usage error, an unknown id a failure', async () => {
    const q = queue();
    const { id } = await q.add({ to: 'old' });
    const ok = await surety('update-data', q.name, id, '{"to":"new"}');
    expect(ok).toMatchObject({ code: 0, stdout: `${q.name}: job ${id} has new data\n` });
    expect((await q.getJob(id))?.data).toEqual({ to: 'new' });
    const bad = await surety('update-data', q.name, id, '{to:');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^surety: job data is not valid JSON/);
    const missing = await surety('update-data', q.name, 'nope', '{}');
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/ERR_JOB_NOT_FOUND/);
    expect(missing.stderr).not.toMatch(/\n\s+at /);
  });

  it('change-priority takes negative priorities and moves the job in line; --json echoes it', async () => {
    const q = queue();
    await q.add('a', { id: 'a' });
    await q.add('b', { id: 'b' });
    const r = await surety('--json', 'change-priority', q.name, 'b', '-5');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ queue: q.name, id: 'b', priority: -5 });
    expect((await q.getJobs('waiting')).map((j) => j.id)).toEqual(['b', 'a']);
    const bad = await surety('change-priority', q.name, 'b', '1.5');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/priority must be an integer/);
  });

  it('change-delay takes milliseconds or a duration; an active job is refused', async () => {
    const q = queue();
    const { id } = await q.add({});
    const t0 = Date.now();
    expect((await surety('change-delay', q.name, id, '15m')).code).toBe(0);
    const job = await q.getJob(id);
    expect(job?.state).toBe('delayed');
    expect(Math.abs((job?.runAt ?? 0) - (t0 + 900_000))).toBeLessThan(5_000);
    const now = await surety('change-delay', q.name, id, '0');
    expect(now).toMatchObject({ code: 0, stdout: `${q.name}: job ${id} is due now\n` });
    expect((await q.getJob(id))?.state).toBe('waiting');
    let release = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    const w = new Worker(q.name, (_job: Job) => held, { connection: fx.url });
    open.push(w);
    await waitUntil(async () => (await q.getJob(id))?.state === 'active', 'the job to start');
    const refused = await surety('change-delay', q.name, id, '1000');
    release();
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/ERR_INVALID_STATE: cannot change the delay of job .* it is active/);
    expect((await surety('change-delay', q.name, id, 'soon')).code).toBe(2);
  });
});

describe('surety drain, obliterate', () => {
  it('drain refuses without --yes when stdin is not a terminal, and drains with it', async () => {
    const q = queue();
    const { id: parent } = await q.add({}, { delayMs: 60_000 });
    await q.add({}, { dependsOn: [parent] });
    await q.addBulk([{ data: 1 }, { data: 2 }]);
    const refused = await surety('drain', q.name);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/refused without --yes \(stdin is not a terminal\)/);
    expect(await q.counts()).toMatchObject({ waiting: 2, delayed: 1, blocked: 1 });
    const kept = await surety('--json', 'drain', q.name, '--keep-delayed', '--yes');
    expect(JSON.parse(kept.stdout)).toEqual({ queue: q.name, removed: 2 });
    expect(await q.counts()).toMatchObject({ waiting: 0, delayed: 1, blocked: 1 });
    const r = await surety('--json', 'drain', q.name, '--blocked', '--yes');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ queue: q.name, removed: 2 });
    expect(await q.counts()).toMatchObject({ waiting: 0, delayed: 0, blocked: 0, dead: 0 });
  });

  it('obliterate refuses while a job is active, and deletes every key with --force --yes', async () => {
    const q = queue();
    const { id } = await q.add({});
    await q.add({}, { delayMs: 60_000 });
    let release = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    const w = new Worker(q.name, () => held, { connection: fx.url });
    w.on('error', () => {}); // its completion is refused once the queue is gone
    open.push(w);
    await waitUntil(async () => (await q.getJob(id))?.state === 'active', 'the job to start');
    expect((await surety('obliterate', q.name)).code).toBe(2);
    const active = await surety('obliterate', q.name, '--yes');
    expect(active.code).toBe(1);
    expect(active.stderr).toMatch(/ERR_QUEUE_ACTIVE: cannot obliterate: queue .* has 1 active job/);
    expect(await q.counts()).toMatchObject({ active: 1, delayed: 1 });
    const r = await surety('obliterate', q.name, '--force', '--yes');
    expect(r).toMatchObject({ code: 0, stdout: `${q.name}: obliterated\n` });
    release();
    await w.close();
    await q.obliterate(); // what the worker wrote while it ran (heartbeat)
    expect(await keyCount(q.name)).toBe(0);
  });
});

describe('the confirmation prompt', () => {
  function terminal(answer: string): { input: PassThrough & { isTTY?: boolean }; output: PassThrough } {
    const input: PassThrough & { isTTY?: boolean } = new PassThrough();
    input.isTTY = true;
    const output = new PassThrough();
    output.resume();
    setImmediate(() => input.write(answer));
    return { input, output };
  }

  it('asks on a terminal: y or yes confirms, anything else declines', async () => {
    expect(await confirm('delete?', terminal('y\n'))).toBe(true);
    expect(await confirm('delete?', terminal('YES\n'))).toBe(true);
    expect(await confirm('delete?', terminal('\n'))).toBe(false);
    expect(await confirm('delete?', terminal('no\n'))).toBe(false);
  });

  it('refuses without asking when stdin is not a terminal', async () => {
    const input = new PassThrough();
    await expect(confirm('delete it?', { input, output: new PassThrough() })).rejects.toThrow(UsageError);
  });
});
