/**
 * The `surety` command line, run as a real binary in child processes against this file's private
 * redis-server (never the shared one on 6379: REDIS_URL is always set explicitly). The binary is this
 * run's compiled build (test/helpers/cli-build.ts: the launcher would compile the TypeScript source at
 * each of the hundred starts); tests marked `launcher` run bin/surety.js itself, as users do.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reasonDetails } from '../../src/cli/commands/explain.js';
import { type ExplainReason, Queue, Worker } from '../../src/index.js';
import { partitionOf } from '../../src/queue/partitions.js';
import { freePort } from '../../src/redis/embedded.js';
import { runScript, scripts } from '../../src/scripts/specs.js';
import { queueKeys } from '../../src/store/keys.js';
import { claimArgs } from '../helpers/claim-args.js';
import { BUILD_TIMEOUT_MS, compiledCli, LAUNCHER } from '../helpers/cli-build.js';
import { uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const FIXTURES = fileURLToPath(new URL('../fixtures/', import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), 'surety-cli-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let compiled = '';
beforeAll(async () => {
  compiled = await compiledCli();
}, BUILD_TIMEOUT_MS);

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface Started {
  proc: ChildProcess;
  out: { stdout: string; stderr: string };
  exited: Promise<Run>;
}

function env(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env };
  delete e.FORCE_COLOR;
  delete e.DEBUG;
  Object.assign(e, { REDIS_URL: fx.url, NO_COLOR: '1' }, extra);
  for (const [k, v] of Object.entries(extra)) if (v === undefined) delete e[k];
  return e;
}

function start(
  args: string[],
  o: { env?: Record<string, string | undefined>; cwd?: string; input?: string; launcher?: boolean } = {},
): Started {
  const bin = o.launcher ? LAUNCHER : compiled;
  const proc = spawn(process.execPath, [bin, ...args], { env: env(o.env), cwd: o.cwd ?? tmp });
  const out = { stdout: '', stderr: '' };
  proc.stdout!.on('data', (d) => {
    out.stdout += d;
  });
  proc.stderr!.on('data', (d) => {
    out.stderr += d;
  });
  proc.stdin!.end(o.input ?? '');
  const exited = new Promise<Run>((resolve) => proc.on('close', (code) => resolve({ code, ...out })));
  return { proc, out, exited };
}

function cli(args: string[], o: Parameters<typeof start>[1] = {}): Promise<Run> {
  return start(args, o).exited;
}

function jsonLines(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** A failure is one `surety: ...` line and never a stack trace. */
function expectOneLineError(r: Run, code: number, pattern: RegExp): void {
  expect(r.code).toBe(code);
  expect(r.stderr).toMatch(/^surety: /);
  expect(r.stderr).toMatch(pattern);
  expect(r.stderr).not.toMatch(/\n\s+at /);
}

/** Processes whose command line mentions `text` (Linux /proc). */
function processesMentioning(text: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(text)) pids.push(Number(entry));
    } catch {
      // exited meanwhile
    }
  }
  return pids;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const queues: Queue[] = [];
function queue(name: string): Queue {
  const q = new Queue(name, { connection: fx.url });
  queues.push(q);
  return q;
}
afterAll(async () => {
  await Promise.all(queues.map((q) => q.close()));
});

describe('surety CLI: help and usage errors', () => {
  it('every command has --help with examples, and exits 0', async () => {
    const commands = [
      'stats',
      'workers',
      'queues',
      'jobs',
      'job',
      'explain',
      'flow',
      'add',
      'retry',
      'remove',
      'cancel',
      'clean',
      'pause',
    ];
    commands.push(
      'resume',
      'schedules',
      'worker',
      'reaper',
      'relay',
      'demo',
      'groups',
      'group',
      'group-limits',
      'rate-limit',
    );
    const runs = await Promise.all([cli(['--help']), ...commands.map((c) => cli([c, '--help']))]);
    for (const [i, r] of runs.entries()) {
      expect(r.code, commands[i - 1] ?? 'surety').toBe(0);
      expect(r.stdout).toMatch(/Examples:\n {2}\$ surety /);
    }
    expect(runs[0]!.stdout).toMatch(/Exit codes: 0 ok, 1 failure, 2 usage error/);
    // 22 node processes at once on two cores: far from the default 30 s only when the machine is idle.
  }, 90_000);

  it('bad input exits 2 with one line naming the problem', async () => {
    const q = uniqueName('usage');
    const [unknownCmd, unknownOpt, json, name, duration, state, url, envUrl, noData, badAt] =
      await Promise.all([
        cli(['frobnicate']),
        cli(['stats', '--bogus']),
        cli(['add', q, '{"to":']),
        cli(['add', 'bad name!', '{}']),
        cli(['add', q, '{}', '--delay', '5 parsecs']),
        cli(['jobs', q, '--state', 'sleeping']),
        cli(['stats', '--redis', 'localhost:6379']),
        cli(['stats'], { env: { REDIS_URL: 'nope' } }),
        cli(['add', q]),
        cli(['add', q, '{}', '--at', 'tomorrow']),
      ]);
    expectOneLineError(unknownCmd, 2, /unknown command 'frobnicate'/);
    expectOneLineError(unknownOpt, 2, /unknown option '--bogus'/);
    expectOneLineError(json, 2, /job data is not valid JSON/);
    expectOneLineError(name, 2, /ERR_INVALID_QUEUE_NAME: queue name must be/);
    expectOneLineError(duration, 2, /--delay must be a duration like 500ms, 5s/);
    expectOneLineError(state, 2, /--state must be one of waiting, delayed, blocked, active, completed, dead/);
    expectOneLineError(url, 2, /--redis must be a redis:\/\/, rediss:\/\/ or redis\+cluster:\/\/ URL/);
    expectOneLineError(envUrl, 2, /REDIS_URL must be a redis:\/\/, rediss:\/\/ or redis\+cluster:\/\/ URL/);
    expectOneLineError(noData, 2, /missing job data/);
    expectOneLineError(badAt, 2, /--at must be an ISO date-time/);
    expect(await queue(q).counts()).toMatchObject({
      waiting: 0,
      delayed: 0,
      active: 0,
      completed: 0,
      dead: 0,
    });
  });

  it('an unreachable Redis is a one-line failure with exit code 1 and what to do', async () => {
    const port = await freePort();
    const r = await cli(['stats'], { env: { REDIS_URL: `redis://:secret@127.0.0.1:${port}` } });
    expectOneLineError(
      r,
      1,
      new RegExp(
        `cannot connect to Redis at redis://:\\*\\*\\*@127\\.0\\.0\\.1:${port} \\(connect ECONNREFUSED`,
      ),
    );
    expect(r.stderr).toMatch(/--redis embedded/);
    expect(r.stderr).not.toMatch(/secret/);
  });

  it('DEBUG=surety adds the stack trace', async () => {
    const name = uniqueName();
    await queue(name).add({}, { id: 'present' });
    // Through the launcher: the trace then comes from the TypeScript source as tsx runs it.
    const r = await cli(['job', name, 'missing'], { env: { DEBUG: 'surety' }, launcher: true });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^surety: ERR_JOB_NOT_FOUND: job "missing" does not exist/);
    expect(r.stderr).toMatch(/\n\s+at /);
  });
});

describe('surety add', () => {
  it('adds a job now, delayed, at a time, with an id (idempotent) and a priority', async () => {
    const name = uniqueName('add');
    const q = queue(name);
    const now = await cli(['add', name, '{"to":"ada@example.com"}', '--json']);
    expect(now.code).toBe(0);
    const added = JSON.parse(now.stdout) as { id: string; isNew: boolean; state: string };
    expect(added).toMatchObject({ queue: name, isNew: true, state: 'waiting' });
    expect((await q.getJob(added.id))?.data).toEqual({ to: 'ada@example.com' });

    const delayed = await cli([
      'add',
      name,
      '{"n":2}',
      '--delay',
      '1m30s',
      '--id',
      'welcome:bob',
      '--priority',
      '-5',
    ]);
    expect(delayed.stdout).toMatch(/added job welcome:bob to .* \(delayed, due in 1m 30s\)/);
    const bob = await q.getJob('welcome:bob');
    expect(bob).toMatchObject({ state: 'delayed', priority: -5 });
    expect(bob!.runAt - bob!.createdAt).toBe(90_000);

    const again = await cli(['add', name, '{"n":3}', '--id', 'welcome:bob']);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/job welcome:bob already exists in .* \(delayed\): nothing added/);

    const at = await cli([
      'add',
      name,
      '{}',
      '--at',
      '2031-01-01T09:00:00Z',
      '--max-attempts',
      '7',
      '--lease',
      '2s',
      '--json',
    ]);
    const atJob = await q.getJob((JSON.parse(at.stdout) as { id: string }).id);
    expect(atJob).toMatchObject({
      state: 'delayed',
      runAt: Date.parse('2031-01-01T09:00:00Z'),
      maxAttempts: 7,
      leaseMs: 2_000,
    });
    expect(await q.counts()).toMatchObject({ waiting: 1, delayed: 2 });

    // --lifo: the newest such job is claimed first (docs/data-layout.md).
    const lifo = await cli(['add', name, '{"n":4}', '--lifo', '--json']);
    const lifoJob = await q.getJob((JSON.parse(lifo.stdout) as { id: string }).id);
    expect(lifoJob).toMatchObject({ state: 'waiting', lifo: true });
    expect((await q.getJobs('waiting')).map((j) => j.id)).toEqual([lifoJob!.id, added.id]);
  });

  it('--file imports every good line and reports each bad one by line number, without stopping', async () => {
    const name = uniqueName('import');
    const lines = Array.from({ length: 1_200 }, (_, i) => JSON.stringify({ i: i + 1 }));
    lines[2] = '{"i": 3,'; // not JSON
    lines[699] = JSON.stringify({ big: 'x'.repeat(600_000) }); // over maxPayloadBytes: refused by validation
    lines[899] = ''; // blank lines are skipped
    const file = join(tmp, `${name}.ndjson`);
    writeFileSync(file, `${lines.join('\n')}\n`);
    const r = await cli(['add', name, '--file', file, '--json']);
    expect(r.code).toBe(1); // some lines were rejected
    const summary = JSON.parse(r.stdout) as {
      accepted: number;
      lines: number;
      rejected: { line: number; code?: string }[];
    };
    expect(summary).toMatchObject({ lines: 1_199, accepted: 1_197 });
    expect(summary.rejected.map((x) => [x.line, x.code])).toEqual([
      [3, undefined],
      [700, 'ERR_PAYLOAD_TOO_LARGE'],
    ]);
    const q = queue(name);
    expect((await q.counts()).waiting).toBe(1_197);
    // FIFO order is kept across the per-line fallback of the chunk holding line 700.
    const firstPage = await q.getJobs('waiting', { limit: 1_200 });
    const order = firstPage.map((j) => (j.data as { i: number }).i);
    expect(order).toEqual([...order].sort((a, b) => a - b));

    const human = await cli(['add', uniqueName('import'), '--file', file]);
    expect(human.stdout).toMatch(/1,197 accepted \(1,197 new, 0 already existed\), 2 rejected/);
    expect(human.stdout).toMatch(/line 3: not valid JSON/);
    expect(human.stdout).toMatch(/line 700: ERR_PAYLOAD_TOO_LARGE: job data is \d+ bytes/);
  });

  it('--file --envelope takes per-line options; stdin works; a missing file is a failure', async () => {
    const name = uniqueName('envelope');
    const input = [
      '{"data":{"n":1},"opts":{"id":"one","priority":2}}',
      '{"data":{"n":2},"opts":{"priority":"high"}}',
      '{"n":3}',
      '{"data":{"n":4},"opts":{"runAt":"2031-01-01T00:00:00Z"}}',
      '{"data":{"n":1},"opts":{"id":"one"}}',
    ].join('\n');
    const r = await cli(['add', name, '--file', '-', '--envelope'], { input });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/imported stdin into .*: 3 accepted \(2 new, 1 already existed\), 2 rejected/);
    expect(r.stdout).toMatch(/line 2: ERR_INVALID_OPTION: priority must be an integer/);
    expect(r.stdout).toMatch(/line 3: with --envelope each line must be/);
    expect(await queue(name).getJob('one')).toMatchObject({ priority: 2 });
    const missing = await cli(['add', name, '--file', join(tmp, 'nope.ndjson')]);
    expectOneLineError(missing, 1, /cannot read .*nope\.ndjson: no such file/);
  });
});

describe('surety stats, queues, jobs, job', () => {
  it('lists queues, counts and jobs as tables and as JSON', async () => {
    const name = uniqueName('stats');
    const q = queue(name);
    await q.add({ hello: 'world' }, { id: 'first' });
    await q.add({ later: true }, { id: 'later', delayMs: 60_000 });
    const [queuesJson, statsJson, statsTable, jobsJson, jobsTable, none] = await Promise.all([
      cli(['queues', '--json']),
      cli(['stats', name, '--json']),
      cli(['stats', name]),
      cli(['jobs', name, '--state', 'delayed', '--json']),
      cli(['jobs', name]),
      cli(['jobs', name, '--state', 'dead']),
    ]);
    expect(JSON.parse(queuesJson.stdout)).toContain(name);
    expect(JSON.parse(statsJson.stdout)).toMatchObject([
      {
        queue: name,
        waiting: 1,
        delayed: 1,
        blocked: 0,
        active: 0,
        completed: 0,
        dead: 0,
        paused: false,
        workers: 0,
      },
    ]);
    expect(statsTable.stdout).toMatch(
      /^QUEUE\s+WAITING\s+DELAYED\s+BLOCKED\s+ACTIVE\s+COMPLETED\s+DEAD\s+WORKERS\s+STATUS\n/,
    );
    expect(statsTable.stdout).toMatch(new RegExp(`${name}\\s+1\\s+1\\s+0\\s+0\\s+0\\s+0\\s+0\\s+running`));
    expect((JSON.parse(jobsJson.stdout) as { id: string }[]).map((j) => j.id)).toEqual(['later']);
    expect(jobsTable.stdout).toMatch(
      /^ID\s+ATTEMPTS\s+PRIORITY\s+DUE\s+DATA\nfirst\s+0 \(3 left\)\s+0\s+.*\{"hello":"world"\}/,
    );
    expect(none.stdout).toMatch(/no dead jobs in/);
  });

  it('job shows data, every error with its stack, and the result; a missing job exits 1', async () => {
    const name = uniqueName('job');
    await cli(['add', name, '{"fail":true,"message":"smtp down"}', '--id', 'x', '--max-attempts', '1']);
    const w = start(['worker', join(FIXTURES, 'cli-processor.mjs'), '--queue', name, '--json']);
    await waitUntil(
      () => jsonLines(w.out.stdout).some((e) => e.event === 'failed'),
      'the job to fail',
      20_000,
    );
    w.proc.kill('SIGTERM');
    expect((await w.exited).code).toBe(0);
    const [human, json, missing] = await Promise.all([
      cli(['job', name, 'x']),
      cli(['job', name, 'x', '--json']),
      cli(['job', name, 'y']),
    ]);
    expect(human.stdout).toMatch(/^job x in .*: dead\n/);
    expect(human.stdout).toMatch(
      /attempt 1 at \S+: Error: smtp down\n\s+at (Object\.)?processor \(.*cli-processor\.mjs/,
    );
    expect(JSON.parse(json.stdout)).toMatchObject({
      id: 'x',
      state: 'dead',
      data: { fail: true },
      errors: [{ attempt: 1, message: 'smtp down' }],
    });
    expectOneLineError(missing, 1, /ERR_JOB_NOT_FOUND: job "y" does not exist/);
  });
});

describe('surety explain', () => {
  it('prints why a job is not running (delayed, paused queue) one line per reason, --json with the codes; an unknown id exits 1', async () => {
    const name = uniqueName('explain');
    const q = queue(name);
    await q.add({}, { id: 'later', delayMs: 60_000 });
    await q.add({}, { id: 'next' });
    await q.pause();
    const runAt = (await q.getJob('later'))!.runAt;
    const [delayed, paused, json, missing] = await Promise.all([
      cli(['explain', name, 'later']),
      cli(['explain', name, 'next']),
      cli(['explain', name, 'later', '--json']),
      cli(['explain', name, 'nope']),
    ]);
    expect(delayed.code).toBe(0);
    const iso = new Date(runAt).toISOString().replace(/\./g, '\\.');
    expect(delayed.stdout.split('\n')[0]).toBe(`job later in ${name}: delayed`);
    // The message, then the data fields: `until` as an ISO time and relative to now.
    expect(delayed.stdout).toMatch(
      new RegExp(
        `^ {2}DELAYED\\s+delayed: due at ${iso} {2}\\[until ${iso} \\(in (\\d+(\\.\\d)?s|1m)\\)\\]$`,
        'm',
      ),
    );
    expect(delayed.stdout).toMatch(/^ {2}PAUSED\s+the queue is paused: no worker claims until resume\(\)$/m);
    expect(delayed.stdout).toMatch(/^ {2}NO_WORKERS\s+no worker of this queue is alive$/m);
    expect(delayed.stdout.trimEnd().split('\n')).toHaveLength(4); // the state, then one line per reason
    // Each reason's line carries the library's own message.
    for (const r of (await q.explain('next')).reasons)
      expect(paused.stdout).toMatch(
        new RegExp(`^ {2}${r.code}\\s+${r.message.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`, 'm'),
      );
    expect(paused.stdout).toMatch(/^ {2}QUEUED\s+.*\[ahead 0\]$/m);
    const parsed = JSON.parse(json.stdout) as {
      queue: string;
      id: string;
      state: string;
      reasons: ExplainReason[];
    };
    expect(parsed).toMatchObject({ queue: name, id: 'later', state: 'delayed' });
    expect(parsed.reasons.map((r) => r.code)).toEqual(['DELAYED', 'PAUSED', 'NO_WORKERS']);
    expect(parsed.reasons[0]!.until).toBe(runAt);
    expectOneLineError(missing, 1, /ERR_JOB_NOT_FOUND: job "nope" does not exist/);
    expect(missing.stdout).toBe('');
  });

  it("renders a reason's fields generically: group, limits and parents need no special case, until shows ISO and relative", () => {
    const now = Date.parse('2030-01-01T00:00:00.000Z');
    const details = reasonDetails(
      {
        code: 'GROUP_RATE_LIMITED',
        message: 'group g used its 5 starts per 1000 ms',
        group: 'tenant-7',
        until: now + 3_000,
        limit: 5,
        active: 5,
        parents: ['p1', 'p2'],
      },
      now,
    );
    expect(details).toBe(
      'group tenant-7; until 2030-01-01T00:00:03.000Z (in 3.0s); limit 5; active 5; parents p1, p2',
    );
    expect(reasonDetails({ code: 'PAUSED', message: 'paused' }, now)).toBe('');
  });
});

describe('surety retry, remove, cancel, pause, resume, schedules', () => {
  it('change jobs through the admin API; each id that fails is reported and the exit code is 1', async () => {
    const name = uniqueName('admin');
    const q = queue(name);
    await q.add({}, { id: 'a' });
    await q.add({}, { id: 'b' });
    await q.add({}, { id: 'c', delayMs: 60_000 });

    const cancel = await cli(['cancel', name, 'a', 'b', '--json']);
    expect(JSON.parse(cancel.stdout)).toEqual({ queue: name, done: ['a', 'b'], failed: [] });
    const retryOne = await cli(['retry', name, 'a']);
    expect(retryOne.stdout).toMatch(/retried 1 job in .*: a/);
    expect((await q.getJob('a'))?.state).toBe('waiting');
    const retryAll = await cli(['retry', name, '--all-dead', '--json']);
    expect(JSON.parse(retryAll.stdout)).toMatchObject({ done: ['b'], failed: [] });

    const partial = await cli(['remove', name, 'c', 'nope']);
    expect(partial.code).toBe(1);
    expect(partial.stdout).toMatch(/removed 1 job in .*: c/);
    expect(partial.stderr).toMatch(/^surety: nope: ERR_JOB_NOT_FOUND: /);
    expect(await q.getJob('c')).toBeNull();
    const badRetry = await cli(['retry', name]);
    expectOneLineError(badRetry, 2, /missing job ids \(or --all-dead\)/);

    expect((await cli(['pause', name])).stdout).toMatch(/paused/);
    expect(await q.isPaused()).toBe(true);
    expect(JSON.parse((await cli(['stats', name, '--json'])).stdout)[0]).toMatchObject({ paused: true });
    expect(JSON.parse((await cli(['resume', name, '--json'])).stdout)).toEqual({
      queue: name,
      paused: false,
    });
    expect(await q.isPaused()).toBe(false);
  });

  it('an unknown queue is refused, naming the closest; pause --create pauses a new one; promote starts delayed jobs', async () => {
    const name = uniqueName('known');
    const q = queue(name);
    await q.add({}, { id: 'later', delayMs: 3_600_000 });
    const typo = name.replace('known', 'knwon');
    const [pause, stats, jobs] = await Promise.all([
      cli(['pause', typo]),
      cli(['stats', typo]),
      cli(['jobs', typo]),
    ]);
    for (const r of [pause, stats, jobs])
      expectOneLineError(r, 1, new RegExp(`no queue named "${typo}"; did you mean "${name}"\\?`));
    expect(await queue(typo).exists()).toBe(false);
    expect((await cli(['queues'])).stdout).not.toContain(typo);

    const fresh = uniqueName('fresh');
    const created = await cli(['pause', fresh, '--create', '--json']);
    expect(JSON.parse(created.stdout)).toEqual({ queue: fresh, paused: true });
    expect(await queue(fresh).isPaused()).toBe(true);

    const promote = await cli(['promote', name, 'later', 'nope', '--json']);
    expect(promote.code).toBe(1);
    expect(JSON.parse(promote.stdout)).toMatchObject({
      done: ['later'],
      failed: [{ id: 'nope', code: 'ERR_JOB_NOT_FOUND' }],
    });
    expect((await q.getJob('later'))?.state).toBe('waiting');
  });

  it('after a manual retry, jobs shows attempts made and the fresh budget left (not 2/2 or 4/2)', async () => {
    const name = uniqueName('budget');
    const q = queue(name);
    await q.add({}, { id: 'flaky', maxAttempts: 2, backoff: { type: 'fixed', delayMs: 1 } });
    const worker = new Worker(
      name,
      async () => {
        throw new Error('down');
      },
      { connection: fx.url },
    );
    try {
      await waitUntil(async () => (await q.getJob('flaky'))?.state === 'dead', 'the job to die', 10_000);
    } finally {
      await worker.close();
    }
    // Dead: its budget left is not shown as if it could still run ("0 of 2 left" would be noise, and
    // a cancelled job's "2 of 2 left" misleads).
    const deadJob = await cli(['job', name, 'flaky']);
    expect(deadJob.stdout).toMatch(/attempts\s+2 of at most 2\n/);
    expect(deadJob.stdout).not.toMatch(/left/);
    await cli(['retry', name, 'flaky']);
    const table = await cli(['jobs', name]);
    expect(table.stdout).toMatch(/\nflaky\s+2 \(2 left\)\s+0\s/);
    const dead = await cli(['jobs', name, '--state', 'waiting', '--json']);
    expect(JSON.parse(dead.stdout)[0]).toMatchObject({ attempts: 2, attemptsLeft: 2, maxAttempts: 2 });
  });

  it('clean deletes old finished jobs; a bad state is a usage error', async () => {
    const name = uniqueName('clean');
    const q = queue(name);
    await q.add({}, { id: 'x' });
    await q.cancel('x'); // dead now
    const young = await cli(['clean', name, '--state', 'dead', '--older-than', '1h', '--json']);
    expect(JSON.parse(young.stdout)).toEqual({ queue: name, state: 'dead', removed: 0, more: false });
    const all = await cli(['clean', name, '--state', 'dead']);
    expect(all.stdout).toMatch(/removed 1 dead job$/m);
    expect(await q.getJob('x')).toBeNull();
    expectOneLineError(
      await cli(['clean', name, '--state', 'waiting']),
      2,
      /--state must be completed or dead/,
    );
  });

  it('schedules lists each schedule with its timing and next run', async () => {
    const name = uniqueName('sched');
    await queue(name).schedule(
      'nightly',
      { cron: '0 3 * * *', tz: 'Europe/Paris' },
      { data: { report: 'daily' } },
    );
    const [human, json] = await Promise.all([cli(['schedules', name]), cli(['schedules', name, '--json'])]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/nightly\s+cron 0 3 \* \* \* Europe\/Paris\s+in /);
    expect(JSON.parse(json.stdout)).toMatchObject([
      { queue: name, key: 'nightly', data: { report: 'daily' } },
    ]);
  });
});

describe('surety worker and reaper', () => {
  it('worker runs the processor, prints one line per job, and on SIGTERM finishes its running job, then exits 0', async () => {
    const name = uniqueName('worker');
    const q = queue(name);
    await q.add({ n: 1 }, { id: 'quick' });
    const w = start([
      'worker',
      join(FIXTURES, 'cli-processor.mjs'),
      '-q',
      name,
      '-c',
      '2',
      '--grace',
      '20s',
      '--json',
    ]);
    await waitUntil(
      () => jsonLines(w.out.stdout).some((e) => e.event === 'completed' && e.id === 'quick'),
      'quick job',
      20_000,
    );
    const workers = JSON.parse((await cli(['workers', name, '--json'])).stdout) as {
      pid: number;
      concurrency: number;
    }[];
    expect(workers).toEqual([expect.objectContaining({ pid: w.proc.pid, concurrency: 2 })]);

    await q.add({ sleepMs: 1_500 }, { id: 'slow' });
    await waitUntil(async () => (await q.getJob('slow'))?.state === 'active', 'slow job to start');
    w.proc.kill('SIGTERM');
    const run = await w.exited;
    expect(run.code).toBe(0);
    const events = jsonLines(run.stdout);
    expect(events.map((e) => e.event)).toEqual(['ready', 'completed', 'closing', 'completed', 'closed']);
    expect(events[2]).toMatchObject({ signal: 'SIGTERM', running: 1 });
    expect(events[3]).toMatchObject({ id: 'slow', attempt: 1 });
    expect(await q.getJob('slow')).toMatchObject({
      state: 'completed',
      result: { echoed: { sleepMs: 1_500 }, attempt: 1 },
    });
    expect(JSON.parse((await cli(['workers', name, '--json'])).stdout)).toEqual([]);
  });

  it('worker loads a TypeScript module and the queue name it exports; human lines otherwise', async () => {
    const name = uniqueName('ts');
    await queue(name).add({ name: 'ada' }, { id: 'greet' });
    // Through the launcher: it registers tsx for the module, as `npx surety worker job.ts` does.
    const w = start(['worker', join(FIXTURES, 'cli-processor.ts')], {
      env: { CLI_TS_QUEUE: name },
      launcher: true,
    });
    await waitUntil(() => /✓ completed\s+greet\s+attempt 1/.test(w.out.stdout), 'greet to complete', 20_000);
    w.proc.kill('SIGINT');
    const run = await w.exited;
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/surety: worker \S+ on ts-\w+ .*concurrency 1; Ctrl-C to stop/);
    expect(run.stderr).toMatch(/surety: SIGINT: finishing 0 running jobs/);
    expect((await queue(name).getJob('greet'))?.result).toEqual({ greeting: 'hello ada' });
  });

  it('worker refuses a missing module, one without a processor, and a module without a queue', async () => {
    const [missing, empty, noQueue] = await Promise.all([
      cli(['worker', join(FIXTURES, 'nope.mjs'), '-q', 'x']),
      cli(['worker', join(FIXTURES, 'cli-no-processor.mjs'), '-q', 'x']),
      cli(['worker', join(FIXTURES, 'cli-processor.mjs')]),
    ]);
    expectOneLineError(missing, 1, /cannot find module .*nope\.mjs/);
    expectOneLineError(empty, 1, /exports no processor: export default async function \(job\)/);
    expectOneLineError(noQueue, 2, /no queue: pass --queue <name>/);
  });

  it('reaper recovers the job of a SIGKILLed worker once its lease expires', async () => {
    const name = uniqueName('reaper');
    const q = queue(name);
    await q.add({ hang: true }, { id: 'stuck', leaseMs: 300 });
    const w = start(['worker', join(FIXTURES, 'cli-processor.mjs'), '-q', name]);
    // Started and its start recorded (marked without being awaited): its lost lease is then charged.
    await waitUntil(
      async () => (await q.getJob('stuck'))?.startedAt !== undefined,
      'stuck job to start',
      20_000,
    );
    w.proc.kill('SIGKILL');
    await w.exited;
    const reaper = start(['reaper', '--queue', name, '--interval', '100ms', '--json']);
    await waitUntil(
      () => jsonLines(reaper.out.stdout).some((e) => e.event === 'recovered'),
      'recovery',
      20_000,
    );
    reaper.proc.kill('SIGTERM');
    const run = await reaper.exited;
    expect(run.code).toBe(0);
    expect(jsonLines(run.stdout).find((e) => e.event === 'recovered')).toMatchObject({
      queue: name,
      requeued: ['stuck'],
      dead: [],
    });
    const job = await q.getJob('stuck');
    expect(job).toMatchObject({ state: 'waiting', attempts: 1 });
    expect(job!.errors[0]).toMatchObject({ code: 'ERR_LEASE_EXPIRED' });
    expect(JSON.parse((await cli(['reaper', '--once', '--json', '-q', name])).stdout)).toEqual([]);
  });

  it('reaper recovers expired leases in every partition of a partitioned queue, named or discovered', async () => {
    const name = uniqueName('reaper-parts');
    const q = new Queue(name, { connection: fx.url, partitions: 4 });
    queues.push(q);
    const ids = Array.from({ length: 12 }, (_, i) => `job-${i}`);
    expect(new Set(ids.map((id) => partitionOf(id, 4))).size).toBeGreaterThan(2);
    await q.addBulk(ids.map((id) => ({ data: {}, opts: { id } })));
    // A worker that crashed: it claimed and started every job of every partition with a lease that
    // ended ten minutes ago (seeded through the claim and start scripts; the reaper under test goes
    // through the CLI). Started, so each lost lease is charged and recorded.
    const crash = async () => {
      for (let p = 0; p < 4; p++) {
        const keys = queueKeys('surety', name, p);
        const now = Date.now() - 600_000;
        const reply = (await runScript(
          fx.redis,
          scripts.claim,
          keys,
          claimArgs({ now, count: 100, defaultLeaseMs: 1_000, limit: 100 }),
        )) as string[];
        const rows: { id: string; token: string }[] = [];
        for (let i = 6; i < reply.length; i += 2)
          rows.push({ id: reply[i]!, token: reply[i + 1]!.split('|')[1]! });
        if (rows.length > 0) await runScript(fx.redis, scripts.start, keys, { now }, rows);
      }
      expect((await q.counts()).active).toBe(ids.length);
    };
    await crash();
    const named = await cli(['reaper', '--once', '--json', '-q', name]);
    expect(named.code).toBe(0);
    const found = JSON.parse(named.stdout) as { queue: string; requeued: string[]; dead: string[] }[];
    expect(found.map((r) => r.queue)).toEqual([name]);
    expect([...found[0]!.requeued].sort()).toEqual([...ids].sort());
    expect(found[0]!.dead).toEqual([]);
    expect(await q.counts()).toMatchObject({ waiting: ids.length, active: 0 });
    expect((await q.getJob('job-0'))?.errors[0]).toMatchObject({ code: 'ERR_LEASE_EXPIRED' });

    await crash();
    const discovered = await cli(['reaper', '--once', '--json']);
    expect(discovered.code).toBe(0);
    const mine = (JSON.parse(discovered.stdout) as { queue: string; requeued: string[] }[]).filter(
      (r) => r.queue === name,
    );
    expect(mine.flatMap((r) => r.requeued).sort()).toEqual([...ids].sort());
    expect(await q.counts()).toMatchObject({ waiting: ids.length, active: 0 });
  });
});

describe('surety output closed early (piped into head)', () => {
  /** Starts `args`, closes its stdout after the first chunk, and returns how it ended. */
  async function closeStdoutEarly(args: string[]): Promise<Run & { firstChunk: string }> {
    const s = start(args);
    const firstChunk = await new Promise<string>((resolve) =>
      s.proc.stdout!.once('data', (d) => resolve(String(d))),
    );
    s.proc.stdout!.destroy();
    return { ...(await s.exited), firstChunk };
  }

  it('a command waiting for Ctrl-C (stats --watch) stops quietly with exit 0, no EPIPE stack', async () => {
    const name = uniqueName('epipe-watch');
    await queue(name).add({});
    const r = await closeStdoutEarly(['stats', name, '--watch', '--interval', '100ms', '--json']);
    expect(r.firstChunk).toContain(name);
    expect(r.stderr).not.toContain('EPIPE');
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(r.code).toBe(0);
  });

  it('a one-shot command whose output outgrows the pipe finishes quietly with exit 0', async () => {
    const name = uniqueName('epipe-jobs');
    const q = queue(name);
    // About 2 MB of output: far more than a pipe buffers, so writes go on after the reader left.
    const big = 'x'.repeat(2_000);
    await q.addBulk(Array.from({ length: 1_000 }, (_, i) => ({ data: { i, big } })));
    const r = await closeStdoutEarly(['jobs', name, '--limit', '1000', '--json']);
    expect(r.firstChunk.length).toBeGreaterThan(0);
    expect(r.stderr).not.toContain('EPIPE');
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(r.code).toBe(0);
  });
});

describe('embedded Redis and the demo', () => {
  it('--redis embedded starts a private redis-server in ./.surety/redis when none is reachable, and stops it', async () => {
    const cwd = mkdtempSync(join(tmp, 'embedded-'));
    const unreachable = `redis://127.0.0.1:${await freePort()}`;
    const add = await cli(['add', 'kept', '{"n":1}', '--redis', 'embedded', '--json'], {
      cwd,
      env: { REDIS_URL: unreachable },
    });
    expect(add.code).toBe(0);
    expect(add.stderr).toMatch(
      /no Redis reachable: started a private redis-server on port \d+ \(pid \d+, AOF on, data in \.\/\.surety\/redis\)/,
    );
    expect(processesMentioning(join(cwd, '.surety'))).toEqual([]);
    // The AOF keeps the job for the next embedded run.
    const stats = await cli(['stats', 'kept', '--redis', 'embedded', '--json'], {
      cwd,
      env: { REDIS_URL: unreachable },
    });
    expect(JSON.parse(stats.stdout)[0]).toMatchObject({ queue: 'kept', waiting: 1 });
    expect(processesMentioning(join(cwd, '.surety'))).toEqual([]);
    // Once ./.surety/redis holds data, --redis embedded means that server even when the default
    // Redis answers: the demo's "look around" commands must not read another Redis.
    const own = await cli(['stats', 'kept', '--redis', 'embedded', '--json'], { cwd });
    expect(own.stderr).toMatch(/\.\/\.surety\/redis holds data: started a private redis-server on port \d+/);
    expect(JSON.parse(own.stdout)[0]).toMatchObject({ queue: 'kept', waiting: 1 });
    expect(await queue('kept').exists()).toBe(false);
    expect(processesMentioning(join(cwd, '.surety'))).toEqual([]);
    // Without private data, embedded mode uses the reachable Redis as it is.
    const fresh = mkdtempSync(join(tmp, 'embedded-fresh-'));
    const reachable = await cli(['queues', '--redis', 'embedded'], { cwd: fresh });
    expect(reachable.code).toBe(0);
    expect(reachable.stderr).toBe('');
  });

  it('without redis-server on PATH, embedded mode says how to install it', async () => {
    const cwd = mkdtempSync(join(tmp, 'nobinary-'));
    const r = await cli(['stats', '--redis', 'embedded'], {
      cwd,
      env: {
        REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
        PATH: '/nonexistent',
        SURETY_REDIS_SERVER: undefined,
      },
    });
    expectOneLineError(
      r,
      1,
      /redis-server is not installed.*Install it with: (sudo apt-get install redis-server|brew install redis|.*)/,
    );
  });

  it('demo enqueues a mix, survives a SIGKILLed worker, summarises, exits 0 and leaves no process behind', async () => {
    const cwd = mkdtempSync(join(tmp, 'demo-'));
    const r = await cli(['demo', '--json'], {
      cwd,
      env: { REDIS_URL: `redis://127.0.0.1:${await freePort()}` },
    });
    expect(r.code, r.stderr).toBe(0);
    const s = JSON.parse(r.stdout) as {
      ok: boolean;
      total: number;
      completed: number;
      dead: number;
      recovered: string[];
      latenessMs: { ms: number }[];
      workerPids: number[];
      killedPid: number;
      embeddedRedisPid: number;
    };
    expect(s).toMatchObject({ ok: true, total: 21, completed: 18, dead: 3 });
    expect(s.recovered).toContain('report');
    expect(s.latenessMs).toHaveLength(4);
    expect(s.workerPids).toContain(s.killedPid);
    expect(r.stderr).toMatch(/kill -9 worker \d \(pid \d+\) while it runs report/);
    expect(r.stderr).toMatch(/recovered report from the killed worker/);
    for (const pid of [...s.workerPids, s.embeddedRedisPid]) expect(isAlive(pid), `pid ${pid}`).toBe(false);
    expect(processesMentioning(join(cwd, '.surety'))).toEqual([]);
  }, 120_000);
});

describe('surety groups, group, group-limits, rate-limit', () => {
  it('lists groups by backlog, shows one group, sets default and per-group limits and the rate limit', async () => {
    const name = uniqueName('groups');
    const q = queue(name);
    await q.addBulk([
      ...Array.from({ length: 3 }, (_, n) => ({ data: { n }, opts: { group: 'big', id: `b${n}` } })),
      { data: {}, opts: { group: 'small', id: 's0' } },
    ]);
    const setDefault = await cli(['group-limits', name, '--concurrency', '2', '--rate', '10/1000']);
    expect(setDefault.code).toBe(0);
    expect(setDefault.stdout).toContain('every group (default) of');
    expect(setDefault.stdout).toContain('concurrency 2, 10 per 1000 ms');
    const setOne = await cli(['group-limits', name, '--group', 'big', '--concurrency', '1', '--json']);
    expect(JSON.parse(setOne.stdout)).toMatchObject({
      group: 'big',
      limits: { concurrency: 1, rateLimit: { max: 10, durationMs: 1000 }, override: { concurrency: 1 } },
    });
    expect(await q.getGroupLimits({ group: 'big' })).toMatchObject({ concurrency: 1 });
    const list = await cli(['groups', name]);
    expect(list.code).toBe(0);
    const lines = list.stdout.trimEnd().split('\n');
    expect(lines[1]).toMatch(/^big\s+3\s+0\s+concurrency 1, 10 per 1000 ms$/);
    expect(lines[2]).toMatch(/^small\s+1\s+0\s+concurrency 2, 10 per 1000 ms$/);
    const json = JSON.parse((await cli(['groups', name, '--json'])).stdout) as {
      groups: { group: string }[];
    };
    expect(json.groups.map((x) => x.group)).toEqual(['big', 'small']);
    const one = await cli(['group', name, 'big']);
    expect(one.stdout).toContain('group big in');
    expect(one.stdout).toContain('override: concurrency 1');
    expect(one.stdout).toMatch(/^ {2}b0 {2}priority 0/m);
    const cleared = await cli(['group-limits', name, '--group', 'big', '--clear']);
    expect(cleared.stdout).toContain('inherits the defaults');
    expect((await q.getGroupLimits({ group: 'big' })).override).toBeNull();
    expect((await cli(['rate-limit', name])).stdout).toContain('no stored rate limit');
    expect((await cli(['rate-limit', name, '100/1000'])).stdout).toContain('100 job starts per 1000 ms');
    expect(await q.getRateLimit()).toEqual({ max: 100, durationMs: 1000 });
    await cli(['rate-limit', name, 'none']);
    expect(await q.getRateLimit()).toBeNull();
    const job = await cli(['job', name, 'b0']);
    expect(job.stdout).toMatch(/group\s+big/);
  });

  it('bad limits are usage errors (exit 2) and change nothing', async () => {
    const name = uniqueName('groups');
    const q = queue(name);
    const [badRate, badConc] = await Promise.all([
      cli(['rate-limit', name, '10']),
      cli(['group-limits', name, '--concurrency', '0']),
    ]);
    expect(badRate.code).toBe(2);
    expect(badRate.stderr).toContain('MAX/DURATION_MS');
    expect(badConc.code).toBe(2);
    expect(await q.getRateLimit()).toBeNull();
    expect(await q.getGroupLimits()).toEqual({ concurrency: null, rateLimit: null });
  });

  it('a flag left out keeps its stored value, none lifts one limit, --clear with a flag is a usage error', async () => {
    const name = uniqueName('groups');
    const q = queue(name);
    await q.setGroupLimits({ concurrency: 2, rateLimit: { max: 10, durationMs: 1000 } });
    await q.setGroupLimits({ rateLimit: { max: 5, durationMs: 1000 } }, { group: 'g' });
    // setGroupLimits replaces the record: the CLI must merge, or --concurrency would drop the rate.
    expect((await cli(['group-limits', name, '--concurrency', '3'])).code).toBe(0);
    expect(await q.getGroupLimits()).toEqual({ concurrency: 3, rateLimit: { max: 10, durationMs: 1000 } });
    expect((await cli(['group-limits', name, '--group', 'g', '--concurrency', '1'])).code).toBe(0);
    expect((await q.getGroupLimits({ group: 'g' })).override).toEqual({
      concurrency: 1,
      rateLimit: { max: 5, durationMs: 1000 },
    });
    const lifted = await cli([
      'group-limits',
      name,
      '--group',
      'g',
      '--rate',
      'none',
      '--concurrency',
      'none',
    ]);
    expect(lifted.code).toBe(0);
    expect(lifted.stdout).toContain(
      'no concurrency limit, no rate limit (override: concurrency none, rate none)',
    );
    expect((await cli(['group-limits', name, '--rate', 'none', '--json'])).stdout).toContain(
      '"rateLimit": null',
    );
    expect(await q.getGroupLimits()).toEqual({ concurrency: 3, rateLimit: null });
    const both = await cli(['group-limits', name, '--clear', '--concurrency', '4']);
    expectOneLineError(both, 2, /--clear removes the limits: use it without --concurrency or --rate/);
    expect(await q.getGroupLimits()).toEqual({ concurrency: 3, rateLimit: null });
  });

  it('a queue without groups reads as empty (exit 0); an unknown queue exits 1; a bad queue or group name exits 2', async () => {
    const name = uniqueName('nogroups');
    await queue(name).add({ plain: true });
    const unknown = uniqueName('nosuch');
    const [refused, refusedLimit] = await Promise.all([
      cli(['groups', unknown]),
      cli(['rate-limit', unknown, '5/1000']),
    ]);
    expectOneLineError(refused, 1, /no queue named "nosuch-/);
    expectOneLineError(refusedLimit, 1, /no queue named "nosuch-/);
    expect(await queue(unknown).exists()).toBe(false);
    const [list, one, rate, limits, badQueue, badGroup] = await Promise.all([
      cli(['groups', name]),
      cli(['group', name, 'g', '--json']),
      cli(['rate-limit', name]),
      cli(['group-limits', name, '--json']),
      cli(['groups', 'bad name!']),
      cli(['group-limits', name, '--group', 'a|b', '--concurrency', '1']),
    ]);
    expect(list).toMatchObject({ code: 0, stdout: `no group of ${name} has jobs\n` });
    expect(JSON.parse(one.stdout)).toEqual({
      queue: name,
      group: 'g',
      limits: { concurrency: null, rateLimit: null, override: null },
      waiting: [],
    });
    expect(rate).toMatchObject({ code: 0, stdout: `${name}: no stored rate limit\n` });
    expect(JSON.parse(limits.stdout)).toEqual({
      queue: name,
      group: null,
      limits: { concurrency: null, rateLimit: null },
    });
    expectOneLineError(badQueue, 2, /ERR_INVALID_QUEUE_NAME/);
    expectOneLineError(badGroup, 2, /ERR_INVALID_OPTION: group must be a string/);
    expect((await queue(name).getGroupLimits({ group: 'g' })).override).toBeNull();
  });

  it('a group whose rate window is full shows parked until, and the group page shows job ages', async () => {
    const name = uniqueName('parked');
    const q = queue(name);
    await q.setGroupLimits({ rateLimit: { max: 1, durationMs: 60_000 } }, { group: 'slow' });
    await q.addBulk([0, 1].map((n) => ({ data: { n }, opts: { group: 'slow', id: `p${n}` } })));
    const worker = new Worker(name, async () => 'ok', { connection: fx.url });
    try {
      await waitUntil(async () => (await q.counts()).completed === 1, 'the first job of slow completed');
    } finally {
      await worker.close();
    }
    const list = await cli(['groups', name]);
    expect(list.stdout).toMatch(
      /^slow\s+1\s+0\s+no concurrency limit, 1 per 60000 ms {2}parked until \S+Z \(in \d+s\)$/m,
    );
    const json = JSON.parse((await cli(['groups', name, '--json'])).stdout) as {
      groups: { parkedUntil?: number }[];
    };
    expect(json.groups[0]!.parkedUntil).toBeGreaterThan(Date.now());
    expect((await cli(['group', name, 'slow'])).stdout).toMatch(
      /^ {2}p1 {2}priority 0 {2}added (now|\S+ ago) \(/m,
    );
  });
});
