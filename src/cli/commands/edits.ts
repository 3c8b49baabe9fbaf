/**
 * `surety update-data | change-priority | change-delay | drain | obliterate`: the Queue's job edits and
 * queue-wide deletions (src/queue/job-edits.ts, docs/admin.md). The two deletions ask for confirmation
 * on a terminal and, without one (CI, a pipe), refuse unless `--yes` is given.
 */
import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import type { Queue } from '../../queue/queue.js';
import { examples, globals, intOption, out } from '../command-kit.js';
import { checkNames, openRedis } from '../connection.js';
import { UsageError } from '../errors.js';
import { formatCount, parseDuration } from '../format.js';
import { openKnownQueue } from '../known-queue.js';
import { parseJsonArg } from './add.js';

interface Prompt {
  input: NodeJS.ReadableStream & { isTTY?: boolean };
  output: NodeJS.WritableStream;
}

/**
 * Asks `question` and resolves true when the answer is y or yes. Without a terminal on `input` it does
 * not ask: it refuses (UsageError), since nobody could answer and a script must say --yes.
 */
export async function confirm(
  question: string,
  io: Prompt = { input: process.stdin, output: process.stderr },
): Promise<boolean> {
  if (io.input.isTTY !== true) {
    throw new UsageError(`${question.replace(/\?$/, '')}: refused without --yes (stdin is not a terminal)`);
  }
  const rl = createInterface({ input: io.input, output: io.output });
  try {
    const answer = await rl.question(`${question} [y/N] `);
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    rl.close();
  }
}

/** A delay: a plain integer is milliseconds, else a duration such as 90s, 5m, 1h30m. */
function parseDelay(text: string): number {
  return /^\d+$/.test(text.trim()) ? Number(text) : parseDuration(text, 'delay');
}

async function queueOf(queueName: string, c: Command): Promise<{ queue: Queue; json: boolean }> {
  const g = globals(c);
  checkNames([queueName]);
  return { queue: await openKnownQueue(queueName, await openRedis(g), g), json: g.json === true };
}

export function registerEdits(program: Command): void {
  const updateData = program
    .command('update-data')
    .description(
      'replace the data of a job that is not running (waiting, delayed, blocked, completed or dead)',
    )
    .argument('<queue>', 'queue name')
    .argument('<id>', 'job id')
    .argument('<json>', 'the new data, as JSON')
    .action(async (queueName: string, id: string, json: string, _o: unknown, c: Command) => {
      const data = parseJsonArg(json);
      const { queue, json: asJson } = await queueOf(queueName, c);
      await queue.updateData(id, data);
      if (asJson) return out.json({ queue: queueName, id, data });
      out.line(`${queueName}: job ${id} has new data`);
    });
  examples(updateData, [
    `surety update-data emails 42 '{"to":"ada@example.com"}'`,
    'surety update-data emails 42 \'{"to":"ada@example.com"}\' && surety retry emails 42',
  ]);

  const changePriority = program
    .command('change-priority')
    .description(
      'give a waiting, delayed or blocked job a new priority (lower runs first); a waiting job moves to the back of its new priority',
    )
    .argument('<queue>', 'queue name')
    .argument('<id>', 'job id')
    .argument('<priority>', 'integer from -1000000 to 1000000', intOption('priority', -1_000_000, 1_000_000))
    .action(async (queueName: string, id: string, priority: number, _o: unknown, c: Command) => {
      const { queue, json } = await queueOf(queueName, c);
      await queue.changePriority(id, priority);
      if (json) return out.json({ queue: queueName, id, priority });
      out.line(`${queueName}: job ${id} has priority ${priority}`);
    });
  examples(changePriority, ['surety change-priority emails 42 -10', 'surety change-priority emails 42 0']);

  const changeDelay = program
    .command('change-delay')
    .description(
      'make a waiting, delayed or blocked job due after a delay from now (0: waiting at once); Redis clock',
    )
    .argument('<queue>', 'queue name')
    .argument('<id>', 'job id')
    .argument('<delay>', 'milliseconds, or a duration such as 90s, 5m, 2h')
    .action(async (queueName: string, id: string, delay: string, _o: unknown, c: Command) => {
      const delayMs = parseDelay(delay);
      const { queue, json } = await queueOf(queueName, c);
      await queue.changeDelay(id, delayMs);
      if (json) return out.json({ queue: queueName, id, delayMs });
      out.line(
        `${queueName}: job ${id} ${delayMs === 0 ? 'is due now' : `is due in ${formatCount(delayMs)} ms`}`,
      );
    });
  examples(changeDelay, ['surety change-delay emails 42 0', 'surety change-delay emails 42 15m']);

  const drain = program
    .command('drain')
    .description(
      'delete every waiting and delayed job of a queue (and blocked ones with --blocked; delayed ones stay with --keep-delayed); running jobs finish. Asks first on a terminal',
    )
    .argument('<queue>', 'queue name')
    .option('--blocked', 'also delete blocked jobs (waiting for the jobs they depend on)')
    .option('--keep-delayed', 'keep delayed jobs (retries in backoff, snoozed jobs, future runs)')
    .option('-y, --yes', 'do not ask (required when stdin is not a terminal)')
    .action(
      async (
        queueName: string,
        o: { blocked?: boolean; keepDelayed?: boolean; yes?: boolean },
        c: Command,
      ) => {
        checkNames([queueName]);
        const states = ['waiting', ...(o.keepDelayed ? [] : ['delayed']), ...(o.blocked ? ['blocked'] : [])];
        const what = `every ${states.join(' and ')} job of ${queueName}`;
        if (!o.yes && !(await confirm(`delete ${what}?`))) return cancelled();
        const { queue, json } = await queueOf(queueName, c);
        const removed = await queue.drain({ blocked: o.blocked === true, delayed: o.keepDelayed !== true });
        if (json) return out.json({ queue: queueName, removed });
        out.line(`${queueName}: removed ${formatCount(removed)} job${removed === 1 ? '' : 's'}`);
      },
    );
  examples(drain, [
    'surety drain emails',
    'surety drain emails --blocked --yes',
    'surety drain emails --keep-delayed',
  ]);

  const obliterate = program
    .command('obliterate')
    .description(
      'delete every key of a queue: jobs in every state, schedules, settings, events, metrics. Refused while jobs are active unless --force. Asks first on a terminal',
    )
    .argument('<queue>', 'queue name')
    .option('--force', 'delete even while jobs are active (their workers’ outcomes are then refused)')
    .option('-y, --yes', 'do not ask (required when stdin is not a terminal)')
    .action(async (queueName: string, o: { force?: boolean; yes?: boolean }, c: Command) => {
      checkNames([queueName]);
      if (!o.yes && !(await confirm(`delete queue ${queueName} and everything in it?`))) return cancelled();
      const { queue, json } = await queueOf(queueName, c);
      await queue.obliterate({ force: o.force === true });
      if (json) return out.json({ queue: queueName, obliterated: true });
      out.line(`${queueName}: obliterated`);
    });
  examples(obliterate, ['surety obliterate emails', 'surety obliterate emails --force --yes']);
}

function cancelled(): void {
  out.note('surety: cancelled, nothing deleted');
  process.exitCode = 1;
}
