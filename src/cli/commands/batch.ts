/** `surety batch <queue> <id>`: a batch's progress, through `queue.batch(id)`. */
import type { Command } from 'commander';
import type { BatchInfo } from '../../types.js';
import { examples, globals, out } from '../command-kit.js';
import { checkNames, openRedis } from '../connection.js';
import { CliError } from '../errors.js';
import { formatTime, formatWhen } from '../format.js';
import { openKnownQueue } from '../known-queue.js';

/** The lines `surety batch` prints (exported for its test). */
export function batchLines(queue: string, b: BatchInfo, now = Date.now()): string[] {
  const { paint } = out;
  const finished = b.total - b.pending;
  const pct = b.total === 0 ? 100 : Math.floor((finished * 100) / b.total);
  const lines = [
    `${paint('bold', `batch ${b.id}`)} in ${queue}: ${
      b.finishedAt === undefined ? paint('blue', 'running') : paint('green', 'finished')
    }`,
    `  ${finished}/${b.total} finished (${pct}%): ${paint('green', `${b.completed} completed`)}, ${paint(
      b.dead > 0 ? 'red' : 'dim',
      `${b.dead} dead`,
    )}, ${b.pending} pending`,
    `  created   ${formatTime(b.createdAt)} (${formatWhen(b.createdAt, now)})`,
  ];
  if (b.finishedAt !== undefined)
    lines.push(`  finished  ${formatTime(b.finishedAt)} (${formatWhen(b.finishedAt, now)})`);
  if (b.callbackId !== undefined) lines.push(`  callback  job ${b.callbackId}`);
  if (b.deadIds.length > 0) {
    const more = b.dead > b.deadIds.length ? paint('dim', ` (first ${b.deadIds.length} of ${b.dead})`) : '';
    lines.push(`  dead      ${b.deadIds.join(', ')}${more}`);
  }
  return lines;
}

export function registerBatch(program: Command): void {
  const batch = program
    .command('batch')
    .summary("a batch's progress")
    .description(
      'progress of a batch added with queue.addBatch: members completed, dead and pending, and its callback job',
    )
    .argument('<queue>', 'queue name')
    .argument('<id>', 'batch id')
    .action(async (queueName: string, id: string, _o: unknown, c: Command) => {
      const g = globals(c);
      checkNames([queueName]);
      const queue = await openKnownQueue(queueName, await openRedis(g), g);
      const info = await queue.batch(id);
      if (!info) {
        throw new CliError(
          `batch ${JSON.stringify(id)} does not exist in ${queueName} (never added, or expired 7 days after it finished)`,
        );
      }
      if (g.json) return out.json({ queue: queueName, ...info });
      for (const line of batchLines(queueName, info)) out.line(line);
    });
  examples(batch, ['surety batch emails 7f9c...', 'surety batch emails import-2024-06 --json | jq .pending']);
}
