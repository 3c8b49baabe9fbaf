/**
 * `surety import-bullmq <bullmq-queue> --to <queue>`: moves a running BullMQ queue's jobs and job
 * schedulers into a Surety queue with the library's importFromBullMQ (surety/migrate), on the
 * command's one Redis connection, and prints its report (docs/migrating-from-bullmq.md).
 */
import type { Command } from 'commander';
import { type BullMQCounts, type ImportReport, importFromBullMQ } from '../../migrate/index.js';
import { examples, globals, intOption, out } from '../command-kit.js';
import { checkNames, openRedis } from '../connection.js';
import { formatCount } from '../format.js';

/** Kept jobs and schedulers listed one per line under the summary; --json has the first 100. */
const KEPT_SHOWN = 5;

interface ImportOptions {
  to: string;
  bullmqPrefix: string;
  dryRun?: boolean;
  failed: boolean;
  schedulers: boolean;
  passes?: number;
}

export function registerImportBullmq(program: Command): void {
  const cmd = program
    .command('import-bullmq')
    .summary("move a BullMQ queue's jobs and schedulers into a Surety queue")
    .description(
      "move a BullMQ (6.x) queue's waiting, prioritized, delayed and failed jobs (failed ones arrive dead) and its job schedulers into a Surety queue, one atomic step per job, while BullMQ producers and workers may still run; jobs active in BullMQ finish there. Running it again moves only what is new. See docs/migrating-from-bullmq.md.",
    )
    .argument('<bullmq-queue>', "the BullMQ queue's name")
    .requiredOption('--to <queue>', 'the Surety queue to move the jobs into (created if new)')
    .option('--bullmq-prefix <prefix>', "BullMQ's key prefix", 'bull')
    .option('--dry-run', 'count and report what would move, and move nothing')
    .option('--no-failed', 'leave failed jobs in BullMQ')
    .option('--no-schedulers', 'leave job schedulers in BullMQ')
    .option(
      '--passes <n>',
      'passes over the BullMQ states while a pass still moves something (default 3)',
      intOption('--passes', 1, 100),
    )
    .action(async (bullQueue: string, o: ImportOptions, c: Command) => {
      const g = globals(c);
      checkNames([o.to]);
      const handle = await openRedis(g);
      const report = await importFromBullMQ({
        // The command's client: importFromBullMQ uses it as is and leaves closing it to the exit cleanups.
        connection: handle.client,
        from: { queue: bullQueue, prefix: o.bullmqPrefix },
        to: o.to,
        ...(g.prefix ? { prefix: g.prefix } : {}),
        dryRun: o.dryRun === true,
        failed: o.failed,
        schedulers: o.schedulers,
        ...(o.passes !== undefined ? { passes: o.passes } : {}),
        onProgress: (m) => {
          if (!g.json) out.note(`surety: ${m}`);
        },
      });
      if (g.json) return out.json(report);
      for (const line of importSummary(report)) out.line(line);
    });
  examples(cmd, [
    'surety import-bullmq emails --to emails --dry-run',
    'surety import-bullmq emails --to emails',
    'surety import-bullmq reports --to reports --bullmq-prefix myapp --no-failed --json',
  ]);
}

const plural = (n: number, word: string) => `${formatCount(n)} ${word}${n === 1 ? '' : 's'}`;

/** The human summary of a report: what moved (or would), what stayed and why, BullMQ before and after. */
export function importSummary(r: ImportReport): string[] {
  const { paint } = out;
  const verb = r.dryRun ? 'would move' : 'moved';
  const from = `BullMQ queue ${r.from.queue} (prefix ${r.from.prefix})`;
  const lines: string[] = [];
  if (r.dryRun) lines.push(paint('yellow', 'dry run: nothing was moved'));
  const states = (['waiting', 'paused', 'prioritized', 'delayed', 'failed'] as const)
    .filter((s) => r.moved[s] > 0)
    .map((s) => `${formatCount(r.moved[s])} ${s}${s === 'failed' ? ' (dead here)' : ''}`);
  lines.push(
    `${verb} ${plural(r.moved.total, 'job')} from ${from} to ${r.to}${states.length > 0 ? `: ${states.join(', ')}` : ''}${r.mode === 'copy' ? ' (copy mode)' : ''}`,
  );
  if (r.schedulers.length > 0) {
    lines.push(
      `${verb} ${plural(r.schedulers.length, 'scheduler')} to schedules: ${r.schedulers.slice(0, 10).join(', ')}${r.schedulers.length > 10 ? ', ...' : ''}`,
    );
  }
  if (r.kept.total > 0) {
    const reasons = Object.entries(r.kept.byReason).map(([reason, n]) => `${reason} ${formatCount(n)}`);
    lines.push(paint('yellow', `kept in BullMQ: ${formatCount(r.kept.total)} (${reasons.join(', ')})`));
    for (const k of r.kept.first.slice(0, KEPT_SHOWN))
      lines.push(`  ${k.what} ${k.id}: ${k.reason}: ${k.detail}`);
    if (r.kept.total > KEPT_SHOWN)
      lines.push(`  ... ${formatCount(r.kept.total - KEPT_SHOWN)} more (--json)`);
  }
  const dropped = Object.entries(r.droppedOptions);
  if (dropped.length > 0) {
    lines.push('BullMQ options dropped (no Surety equivalent), with how many jobs or schedulers had each:');
    for (const [name, n] of dropped) lines.push(`  ${name}: ${formatCount(n)}`);
  }
  lines.push(`BullMQ ${r.dryRun ? 'now' : 'before -> after'}: ${countsChange(r.before, r.after, r.dryRun)}`);
  for (const note of r.notes) lines.push(`note: ${note}`);
  return lines;
}

/** The BullMQ counts that are not zero, as `waiting 3 -> 0` (or `waiting 3` when nothing moved). */
function countsChange(before: BullMQCounts, after: BullMQCounts, dryRun: boolean): string {
  const names = Object.keys(before) as (keyof BullMQCounts)[];
  const shown = names
    .filter((k) => before[k] > 0 || after[k] > 0)
    .map((k) =>
      dryRun
        ? `${k} ${formatCount(before[k])}`
        : `${k} ${formatCount(before[k])} -> ${formatCount(after[k])}`,
    );
  return shown.length > 0 ? shown.join(', ') : 'empty';
}
