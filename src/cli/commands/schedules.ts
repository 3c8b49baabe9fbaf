/** `surety schedules [queue...]`: repeatable schedules with their next runs, through the Queue API. */
import type { Command } from 'commander';
import type { ScheduleInfo } from '../../queue/schedule-timing.js';
import { examples, globals, out } from '../command-kit.js';
import { formatDuration, formatWhen, preview, table } from '../format.js';
import { rowsOfQueues } from '../known-queue.js';

function timing(s: ScheduleInfo): string {
  if (s.cron !== undefined) return `cron ${s.cron}${s.tz ? ` ${s.tz}` : ''}`;
  return s.everyMs !== undefined ? `every ${formatDuration(s.everyMs)}` : '-';
}

/** `from <time> until <time> immediately`, or '-' for a schedule without bounds. */
function bounds(s: ScheduleInfo): string {
  const at = (t: number) => new Date(t).toISOString().replace('.000Z', 'Z');
  const parts = [
    s.startAt !== undefined ? `from ${at(s.startAt)}` : '',
    s.endAt !== undefined ? `until ${at(s.endAt)}` : '',
    s.immediately ? 'immediately' : '',
  ].filter(Boolean);
  return parts.length > 0 ? parts.join(' ') : '-';
}

export function registerSchedules(program: Command): void {
  const cmd = program
    .command('schedules')
    .summary('repeatable schedules')
    .description(
      'repeatable schedules (cron or every N) with their next run, occurrences so far (of the limit) and bounds, of every queue when none is named',
    )
    .argument('[queue...]', 'queue names')
    .action(async (names: string[], _o: unknown, c: Command) => {
      const g = globals(c);
      const rows = await rowsOfQueues<ScheduleInfo>(names, g, (q) => q.schedules());
      if (g.json) return out.json(rows);
      if (rows.length === 0) return out.line('no schedules');
      const now = Date.now();
      out.line(
        table(
          ['QUEUE', 'KEY', 'TIMING', 'NEXT RUN', 'RUNS', 'BOUNDS', 'PENDING JOB', 'DATA'],
          rows.map((s) => [
            s.queue,
            s.key,
            timing(s),
            s.ended ? 'ended' : formatWhen(s.nextRunAt, now),
            s.limit !== undefined ? `${s.count}/${s.limit}` : String(s.count),
            bounds(s),
            s.pendingJobId || '-',
            preview(s.data, 200),
          ]),
          { flex: [1, 5, 6, 7], paint: out.paint },
        ),
      );
    });
  examples(cmd, ['surety schedules', 'surety schedules reports --json']);
}
