/** The demo's closing summary: outcomes per kind of job, read back through the Queue API. */
import { LeaseExpiredError } from '../../errors.js';
import type { Queue } from '../../queue/queue.js';
import type { JobInfo } from '../../types.js';
import { out } from '../command-kit.js';
import { type Cell, formatDuration, table } from '../format.js';
import { type DemoData, type DemoJob, type DemoKind, KIND_LABELS } from './jobs.js';

export interface KindRow {
  kind: DemoKind;
  label: string;
  jobs: number;
  completed: number;
  dead: number;
  attempts: number;
  /** Jobs with more than one attempt that ended completed. */
  retried: number;
  /** Jobs whose lease expired at least once (their worker died) and were put back. */
  recovered: number;
}

export interface DemoSummary {
  queue: string;
  total: number;
  completed: number;
  dead: number;
  retried: number;
  recovered: string[];
  /** Delayed jobs: ms between their due time and their start (Redis clock). */
  latenessMs: { id: string; ms: number }[];
  kinds: KindRow[];
}

export async function summarize(queue: Queue<DemoData>, jobs: DemoJob[]): Promise<DemoSummary> {
  const infos = (await Promise.all(jobs.map((j) => queue.getJob(j.id)))).filter(
    (j): j is JobInfo<DemoData> => j !== null,
  );
  const kinds = new Map<DemoKind, KindRow>();
  const recovered: string[] = [];
  const latenessMs: { id: string; ms: number }[] = [];
  for (const j of infos) {
    const kind = j.data.kind;
    let row = kinds.get(kind);
    if (!row) {
      row = {
        kind,
        label: KIND_LABELS[kind],
        jobs: 0,
        completed: 0,
        dead: 0,
        attempts: 0,
        retried: 0,
        recovered: 0,
      };
      kinds.set(kind, row);
    }
    row.jobs++;
    row.attempts += j.attempts;
    if (j.state === 'completed') row.completed++;
    if (j.state === 'dead') row.dead++;
    if (j.state === 'completed' && j.attempts > 1) row.retried++;
    if (j.errors.some((e) => e.name === LeaseExpiredError.name)) {
      row.recovered++;
      recovered.push(j.id);
    }
    if (kind === 'reminder' && j.startedAt !== undefined && j.attempts === 1)
      latenessMs.push({ id: j.id, ms: j.startedAt - j.runAt });
  }
  const rows = [...kinds.values()];
  const sum = (f: (r: KindRow) => number) => rows.reduce((a, r) => a + f(r), 0);
  return {
    queue: queue.name,
    total: sum((r) => r.jobs),
    completed: sum((r) => r.completed),
    dead: sum((r) => r.dead),
    retried: sum((r) => r.retried),
    recovered,
    latenessMs,
    kinds: rows,
  };
}

export function printSummary(s: DemoSummary): void {
  const { paint } = out;
  const lateness = s.latenessMs.map((l) => l.ms);
  const lateNote =
    lateness.length > 0
      ? `started ${formatDuration(Math.min(...lateness))}-${formatDuration(Math.max(...lateness))} after due`
      : '';
  const note = (r: KindRow) =>
    r.kind === 'reminder'
      ? lateNote
      : r.kind === 'report'
        ? r.recovered > 0 && r.completed > 0
          ? 'worker killed mid-job; recovered, completed'
          : ''
        : r.retried > 0
          ? `${r.retried} completed after retries`
          : r.dead > 0
            ? 'dead, every error kept'
            : r.recovered > 0
              ? `${r.recovered} recovered after the kill`
              : '';
  const rows: Cell[][] = s.kinds.map((r) => [
    r.label,
    r.jobs,
    r.completed > 0 ? { text: String(r.completed), style: 'green' as const } : '0',
    r.dead > 0 ? { text: String(r.dead), style: 'red' as const } : '0',
    r.attempts,
    note(r),
  ]);
  rows.push([
    { text: 'total', style: 'bold' },
    s.total,
    s.completed,
    s.dead,
    s.kinds.reduce((a, r) => a + r.attempts, 0),
    '',
  ]);
  out.line();
  out.line(
    table(['JOBS', 'ADDED', 'COMPLETED', 'DEAD', 'ATTEMPTS', 'NOTE'], rows, {
      right: [1, 2, 3, 4],
      flex: [5],
      paint,
    }),
  );
  out.line();
  out.line(
    `completed ${paint('green', String(s.completed))}, retried ${s.retried}, dead ${paint('red', String(s.dead))}, recovered after SIGKILL ${paint('yellow', String(s.recovered.length))} (${s.recovered.join(', ') || '-'})`,
  );
  if (lateness.length > 0) {
    const avg = lateness.reduce((a, b) => a + b, 0) / lateness.length;
    out.line(
      `lateness of delayed jobs (Redis clock): avg ${formatDuration(avg)}, max ${formatDuration(Math.max(...lateness))}`,
    );
  }
}
