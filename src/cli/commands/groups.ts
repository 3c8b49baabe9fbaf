/**
 * Flow control from the command line, through the Queue API only (docs/groups.md):
 *   surety groups <queue>              top groups by backlog, with counts and limits
 *   surety group <queue> <group>       one group's limits and its first waiting jobs
 *   surety group-limits <queue> ...    show or set the default or one group's limits
 *   surety rate-limit <queue> [rate]   show or set the queue's stored rate limit
 */
import { type Command, InvalidArgumentError } from 'commander';
import { mergeLimits } from '../../dashboard/flow-api.js';
import type { EffectiveGroupLimits, GroupLimits, RateLimit } from '../../queue/flow-control.js';
import { examples, globals, intOption, out } from '../command-kit.js';
import { checkNames, openRedis } from '../connection.js';
import { UsageError } from '../errors.js';
import { formatTime, formatWhen } from '../format.js';
import { openKnownQueue } from '../known-queue.js';

/** `MAX/DURATION_MS` (e.g. `10/1000`) or `none`. */
export function parseRate(value: string): RateLimit | null {
  if (value === 'none') return null;
  const m = /^(\d+)\/(\d+)$/.exec(value.trim());
  if (!m || Number(m[1]) < 1 || Number(m[2]) < 1) {
    throw new InvalidArgumentError(
      'a rate is MAX/DURATION_MS (e.g. 10/1000: ten starts per second) or none.',
    );
  }
  return { max: Number(m[1]), durationMs: Number(m[2]) };
}

// Option parsers say "none" with the string itself: Commander turns an option parser's null into ''.
function concurrencyOption(value: string): number | 'none' {
  return value === 'none' ? 'none' : intOption('--concurrency', 1, 1_000_000)(value);
}

function rateOption(value: string): RateLimit | 'none' {
  return parseRate(value) ?? 'none';
}

export function describeLimits(l: { concurrency: number | null; rateLimit: RateLimit | null }): string {
  const c = l.concurrency === null ? 'no concurrency limit' : `concurrency ${l.concurrency}`;
  const r = l.rateLimit === null ? 'no rate limit' : `${l.rateLimit.max} per ${l.rateLimit.durationMs} ms`;
  return `${c}, ${r}`;
}

function overrideText(l: EffectiveGroupLimits): string {
  if (!l.override) return 'inherits the defaults';
  const parts: string[] = [];
  if (l.override.concurrency !== undefined) parts.push(`concurrency ${l.override.concurrency ?? 'none'}`);
  if (l.override.rateLimit !== undefined)
    parts.push(
      `rate ${l.override.rateLimit ? `${l.override.rateLimit.max}/${l.override.rateLimit.durationMs}` : 'none'}`,
    );
  return `override: ${parts.join(', ')}`;
}

async function open(c: Command, queueName: string) {
  const g = globals(c);
  checkNames([queueName]);
  return { g, queue: await openKnownQueue(queueName, await openRedis(g), g) };
}

function registerGroupsList(program: Command): void {
  const cmd = program
    .command('groups')
    .summary('top groups by backlog')
    .description('groups with waiting or active jobs, most waiting first, with their limits')
    .argument('<queue>', 'queue name')
    .option('--limit <n>', 'how many groups', intOption('--limit', 1, 10_000), 20)
    .action(async (queueName: string, o: { limit: number }, c: Command) => {
      const { g, queue } = await open(c, queueName);
      const page = await queue.groups({ limit: o.limit });
      if (g.json) return out.json({ queue: queueName, ...page });
      if (page.groups.length === 0) return out.line(out.paint('dim', `no group of ${queueName} has jobs`));
      const width = Math.max(5, ...page.groups.map((x) => x.group.length));
      out.line(out.paint('bold', `${'group'.padEnd(width)}  waiting   active  limits`));
      for (const x of page.groups) {
        const parked = x.parkedUntil
          ? `  parked until ${formatTime(x.parkedUntil)} (${formatWhen(x.parkedUntil)})`
          : '';
        out.line(
          `${x.group.padEnd(width)}  ${String(x.waiting).padStart(7)}  ${String(x.active).padStart(7)}  ${describeLimits(x.limits)}${parked}`,
        );
      }
      if (page.cursor) out.line(out.paint('dim', `(more groups: --limit ${o.limit * 2})`));
    });
  examples(cmd, ['surety groups emails', 'surety groups emails --limit 100 --json']);
}

function registerGroupShow(program: Command): void {
  const cmd = program
    .command('group')
    .summary("one group's limits and waiting jobs")
    .argument('<queue>', 'queue name')
    .argument('<group>', 'group name')
    .option('--limit <n>', 'waiting jobs to list', intOption('--limit', 1, 10_000), 20)
    .action(async (queueName: string, group: string, o: { limit: number }, c: Command) => {
      const { g, queue } = await open(c, queueName);
      const [limits, jobs] = await Promise.all([
        queue.getGroupLimits({ group }),
        queue.getJobs('waiting', { group, limit: o.limit }),
      ]);
      if (g.json) return out.json({ queue: queueName, group, limits, waiting: jobs });
      out.line(
        `${out.paint('bold', `group ${group}`)} in ${queueName}: ${describeLimits(limits)} (${overrideText(limits)})`,
      );
      if (jobs.length === 0) return out.line(out.paint('dim', '  no waiting job'));
      out.line(`  first ${jobs.length} waiting job(s), in claim order:`);
      const now = Date.now();
      for (const j of jobs)
        out.line(
          `  ${j.id}  priority ${j.priority}  added ${formatWhen(j.createdAt, now)} (${formatTime(j.createdAt)})`,
        );
    });
  examples(cmd, ['surety group emails tenant-42']);
}

interface LimitFlags {
  group?: string;
  concurrency?: number | 'none';
  rate?: RateLimit | 'none';
  clear?: boolean;
}

function registerGroupLimits(program: Command): void {
  const cmd = program
    .command('group-limits')
    .summary('show or set group limits')
    .description(
      'without --concurrency/--rate/--clear, shows the limits; with them, changes the default limits of every group, or with --group that group\'s override. A flag left out keeps its stored value (for a group: inherited from the defaults unless overridden); "none" lifts that limit; --clear removes the override (or every default)',
    )
    .argument('<queue>', 'queue name')
    .option('--group <name>', 'one group (default: the defaults for every group)')
    .option('--concurrency <n>', 'jobs of a group active at once, or none', concurrencyOption)
    .option('--rate <max/ms>', 'job starts of a group per window, e.g. 10/1000, or none', rateOption)
    .option('--clear', "remove the group's override (or every default limit)")
    .action(async (queueName: string, o: LimitFlags, c: Command) => {
      const change: GroupLimits = {};
      if (o.concurrency !== undefined) change.concurrency = o.concurrency === 'none' ? null : o.concurrency;
      if (o.rate !== undefined) change.rateLimit = o.rate === 'none' ? null : o.rate;
      const changing = Object.keys(change).length > 0;
      if (o.clear && changing)
        throw new UsageError('--clear removes the limits: use it without --concurrency or --rate');
      const { g, queue } = await open(c, queueName);
      const scope = o.group === undefined ? undefined : { group: o.group };
      if (o.clear) await queue.setGroupLimits(null, scope);
      else if (changing)
        // setGroupLimits replaces the record; merge so --concurrency keeps the stored rate limit.
        await queue.setGroupLimits(mergeLimits(await queue.getGroupLimits(scope), change, !!scope), scope);
      const now = await queue.getGroupLimits(scope);
      if (g.json) return out.json({ queue: queueName, group: o.group ?? null, limits: now });
      const who = o.group === undefined ? 'every group (default)' : `group ${o.group}`;
      out.line(
        `${who} of ${queueName}: ${describeLimits(now)}${o.group === undefined ? '' : ` (${overrideText(now)})`}`,
      );
    });
  examples(cmd, [
    'surety group-limits emails --concurrency 2 --rate 10/1000',
    'surety group-limits emails --group tenant-42 --concurrency 1',
    'surety group-limits emails --group tenant-42 --clear',
  ]);
}

function registerRateLimit(program: Command): void {
  const cmd = program
    .command('rate-limit')
    .summary("show or set the queue's stored rate limit")
    .description("job starts per window across all workers; while set it replaces the workers' own limiter")
    .argument('<queue>', 'queue name')
    .argument('[rate]', 'MAX/DURATION_MS (e.g. 100/1000), or none to remove it', parseRate)
    .action(async (queueName: string, rate: RateLimit | null | undefined, _o: unknown, c: Command) => {
      const { g, queue } = await open(c, queueName);
      if (rate !== undefined) await queue.setRateLimit(rate);
      const now = await queue.getRateLimit();
      if (g.json) return out.json({ queue: queueName, rateLimit: now });
      out.line(
        now === null
          ? `${queueName}: no stored rate limit`
          : `${queueName}: ${now.max} job starts per ${now.durationMs} ms across all workers`,
      );
    });
  examples(cmd, [
    'surety rate-limit emails',
    'surety rate-limit emails 100/1000',
    'surety rate-limit emails none',
  ]);
}

export function registerGroups(program: Command): void {
  registerGroupsList(program);
  registerGroupShow(program);
  registerGroupLimits(program);
  registerRateLimit(program);
}
