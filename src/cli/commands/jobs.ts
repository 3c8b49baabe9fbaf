/** `surety jobs <queue> --state dead` (a page of jobs) and `surety job <queue> <id>` (one job in full). */
import type { Command } from 'commander';
import { JobNotFoundError } from '../../errors.js';
import { isJobState, JOB_STATES } from '../../states.js';
import type { JobInfo, JobState } from '../../types.js';
import { examples, globals, intOption, out } from '../command-kit.js';
import { checkNames, openRedis } from '../connection.js';
import { UsageError } from '../errors.js';
import { formatDuration, formatTime, formatWhen, preview, table } from '../format.js';
import { openKnownQueue } from '../known-queue.js';

export const STATE_STYLE = {
  waiting: 'cyan',
  blocked: 'magenta',
  delayed: 'blue',
  active: 'yellow',
  completed: 'green',
  dead: 'red',
} as const;

function jobsTable(jobs: JobInfo[], state: JobState): string {
  const now = Date.now();
  const when = (j: JobInfo) =>
    state === 'delayed' || state === 'waiting'
      ? formatWhen(j.runAt, now)
      : state === 'active'
        ? `started ${formatWhen(j.startedAt, now)}`
        : formatWhen(j.finishedAt, now);
  const lastError = (j: JobInfo) => {
    const e = j.errors[j.errors.length - 1];
    return e ? `${e.code ? `${e.code} ` : ''}${e.message}` : '';
  };
  const withErrors = jobs.some((j) => j.errors.length > 0);
  const headers = [
    'ID',
    'ATTEMPTS',
    'PRIORITY',
    state === 'waiting' || state === 'delayed' ? 'DUE' : 'WHEN',
    'DATA',
  ];
  if (withErrors) headers.push('LAST ERROR');
  return table(
    headers,
    jobs.map((j) => {
      const row = [j.id, attemptsCell(j), j.priority, when(j), preview(j.data, 200)];
      if (withErrors) row.push(lastError(j));
      return row;
    }),
    { right: [1, 2], flex: withErrors ? [0, 4, 5] : [0, 4], paint: out.paint },
  );
}

/**
 * Attempts started and attempts left: not `attempts/maxAttempts`, which a manual retry (a fresh budget
 * on top of the attempts already made) turns into nonsense such as 4/2.
 */
function attemptsCell(j: JobInfo): string {
  return j.state === 'completed' || j.state === 'dead'
    ? String(j.attempts)
    : `${j.attempts} (${j.attemptsLeft} left)`;
}

function showJob(queue: string, j: JobInfo): void {
  const { paint } = out;
  const field = (name: string, value: string) => out.line(`${paint('dim', name.padEnd(12))}${value}`);
  const now = Date.now();
  out.line(`${paint('bold', `job ${j.id}`)} in ${queue}: ${paint(STATE_STYLE[j.state], j.state)}`);
  if (j.name !== undefined) field('name', j.name);
  // A finished job starts nothing more: its budget left is not news ("3 of 4 left" on a dead job misled).
  field(
    'attempts',
    j.state === 'completed' || j.state === 'dead'
      ? `${j.attempts} of at most ${j.maxAttempts}`
      : `${j.attempts} (${j.attemptsLeft} of ${j.maxAttempts} left)`,
  );
  if (j.snoozes > 0) field('snoozes', String(j.snoozes));
  if (j.batch !== undefined) field('batch', j.batch);
  if (j.keep !== undefined)
    field('keep', `completed: ${j.keep.completed ? 'yes' : 'no'}, dead: ${j.keep.dead ? 'yes' : 'no'}`);
  field('priority', String(j.priority));
  if (j.group !== undefined) field('group', j.group);
  field('lease', formatDuration(j.leaseMs));
  field(
    'backoff',
    `${j.backoff.type}${j.backoff.delayMs !== undefined ? ` ${formatDuration(j.backoff.delayMs)}` : ''}${j.backoff.name ? ` ${j.backoff.name}` : ''}${j.backoff.jitter ? ' with jitter' : ''}`,
  );
  field('created', `${formatTime(j.createdAt)} (${formatWhen(j.createdAt, now)})`);
  field('run at', `${formatTime(j.runAt)} (${formatWhen(j.runAt, now)})`);
  if (j.expireAt !== undefined)
    field('expires', `${formatTime(j.expireAt)} (${formatWhen(j.expireAt, now)})`);
  if (j.startedAt) field('started', `${formatTime(j.startedAt)} (${formatWhen(j.startedAt, now)})`);
  if (j.finishedAt) field('finished', `${formatTime(j.finishedAt)} (${formatWhen(j.finishedAt, now)})`);
  if (j.parent !== undefined) field('parent', `${j.parent.queue} ${j.parent.id}`);
  if (j.waitingForSignal !== undefined) {
    const { name, deadline } = j.waitingForSignal;
    field(
      'waits for',
      `signal ${name}${deadline === undefined ? '' : ` until ${formatTime(deadline)} (${formatWhen(deadline, now)})`}`,
    );
  }
  out.line(paint('dim', 'data'));
  out.line(indent(JSON.stringify(j.data, null, 2)));
  if (j.steps !== undefined) {
    out.line(paint('dim', `steps (${Object.keys(j.steps).length})`));
    for (const [name, value] of Object.entries(j.steps))
      out.line(`  ${name}: ${value === undefined ? 'undefined' : JSON.stringify(value)}`);
  }
  if (j.children !== undefined) {
    const open = j.children.filter((c) => c.ended === undefined).length;
    out.line(paint('dim', `children (${j.children.length}, ${open} open)`));
    for (const c of j.children) out.line(`  ${c.queue} ${c.id}: ${c.ended ?? 'open'}`);
  }
  if (j.pendingSignals !== undefined) {
    out.line(paint('dim', `signals not taken (${j.pendingSignals.length})`));
    for (const sig of j.pendingSignals)
      out.line(`  ${sig.name}: ${sig.payload === undefined ? 'undefined' : JSON.stringify(sig.payload)}`);
  }
  if (j.result !== undefined) {
    out.line(paint('dim', 'result'));
    out.line(indent(JSON.stringify(j.result, null, 2)));
  }
  if (j.errors.length === 0) return;
  out.line(paint('dim', `errors (${j.errors.length})`));
  for (const e of j.errors) {
    out.line(
      `  ${paint('red', `attempt ${e.attempt}`)} at ${formatTime(e.at)}: ${e.code ? `${e.code} ` : ''}${e.name}: ${e.message}`,
    );
    const frames = e.stack?.split('\n').slice(1).join('\n');
    if (frames) out.line(paint('dim', indent(frames.replace(/^\s+/gm, ''), 6)));
  }
}

function indent(text: string, n = 2): string {
  return text
    .split('\n')
    .map((l) => ' '.repeat(n) + l)
    .join('\n');
}

export function registerJobs(program: Command): void {
  const list = program
    .command('jobs')
    .summary('list jobs in one state')
    .description('list the jobs of a queue in one state, oldest first')
    .argument('<queue>', 'queue name')
    .option('-s, --state <state>', `one of ${JOB_STATES.join(', ')}`, 'waiting')
    .option('-n, --limit <n>', 'jobs to show', intOption('--limit', 1, 10_000), 50)
    .option('--offset <n>', 'skip this many', intOption('--offset', 0), 0)
    .action(async (queueName: string, o: { state: string; limit: number; offset: number }, c: Command) => {
      const g = globals(c);
      checkNames([queueName]);
      if (!isJobState(o.state))
        throw new UsageError(
          `--state must be one of ${JOB_STATES.join(', ')}, got ${JSON.stringify(o.state)}`,
        );
      const state = o.state as JobState;
      const queue = await openKnownQueue(queueName, await openRedis(g), g);
      const jobs = await queue.getJobs(state, { offset: o.offset, limit: o.limit });
      if (g.json) return out.json(jobs);
      if (jobs.length === 0)
        return out.line(`no ${state} jobs in ${queueName}${o.offset ? ` after offset ${o.offset}` : ''}`);
      out.line(jobsTable(jobs, state));
      if (jobs.length === o.limit)
        out.line(out.paint('dim', `(first ${o.limit} from offset ${o.offset}; --limit and --offset page)`));
    });
  examples(list, [
    'surety jobs emails',
    'surety jobs emails --state dead --limit 20',
    'surety jobs emails -s delayed --json | jq ".[].id"',
  ]);

  const one = program
    .command('job')
    .summary('one job in full')
    .description('one job in full: data, attempts, every error with its stack, result')
    .argument('<queue>', 'queue name')
    .argument('<id>', 'job id')
    .action(async (queueName: string, id: string, _o: unknown, c: Command) => {
      const g = globals(c);
      checkNames([queueName]);
      const queue = await openKnownQueue(queueName, await openRedis(g), g);
      const job = await queue.getJob(id);
      if (!job) throw new JobNotFoundError(id);
      if (g.json) return out.json(job);
      showJob(queueName, job);
    });
  examples(one, ['surety job emails 42', 'surety job emails welcome:ada --json']);
}
