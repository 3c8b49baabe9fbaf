/**
 * The scale stage's table: one block per library, one row per backlog size, every figure with its
 * ratio to the same library's smallest backlog (the goal: within 15 %, in the worse direction).
 */

import type { RoundFigures, ScaleRow } from './scale.js';
import { median } from './stats.js';
import { LABELS } from './svg.js';

/** How far a figure may move from the smallest backlog's in the worse direction (issue #17: 15 %). */
export const SCALE_TOLERANCE = 0.15;

export interface ScaleMetric {
  id: string;
  label: string;
  higherIsBetter: boolean;
  value(row: ScaleRow): number;
}

/**
 * Bytes per job of the queued backlog, waiting and delayed together (the delta over both fills / their
 * jobs). Each kind's own figure moves with where a hash table's doubling lands: the delayed fill of the
 * 1 000 000 ladder step takes Surety's and Bee-Queue's job hashes past 2^20 entries, so the doubled
 * table (16 MiB) is charged to 100 000 delayed jobs alone (+160 B each); together, it is spread fairly.
 */
function bytesPerQueuedJob(r: ScaleRow): number {
  return (r.bytesPerWaitingJob * r.waiting + r.bytesPerDelayedJob * r.delayed) / (r.waiting + r.delayed);
}

/**
 * A fill's settled figures (bench/scale.ts, DEBUG RELOAD) as a row of their own; undefined for results
 * written before they were measured. Its memory is not measured (n/a): the reload comes after the
 * first rounds, which add and drain jobs and may have crossed a power of two themselves, so the memory
 * it frees is shown on its own line (freedLine), not subtracted from the fill's figure.
 */
export function settledView(r: ScaleRow): ScaleRow | undefined {
  if (!r.settled) return undefined;
  const { rounds, reloadS: _, freedBytesPerQueuedJob: __, ...figures } = r.settled;
  return { ...r, ...figures, rounds, bytesPerWaitingJob: Number.NaN, bytesPerDelayedJob: Number.NaN };
}

export const SCALE_METRICS: ScaleMetric[] = [
  {
    id: 'enqueueSerialPerSec',
    label: 'single adds/s ↑',
    higherIsBetter: true,
    value: (r) => r.enqueueSerialPerSec,
  },
  {
    id: 'enqueueBulkPerSec',
    label: 'bulk adds/s ↑',
    higherIsBetter: true,
    value: (r) => r.enqueueBulkPerSec,
  },
  { id: 'drainPerSec', label: 'drain jobs/s ↑', higherIsBetter: true, value: (r) => r.drainPerSec },
  {
    id: 'redisCpuUsPerJob',
    label: 'Redis CPU µs/job ↓',
    higherIsBetter: false,
    value: (r) => r.redisCpuUsPerJob,
  },
  {
    id: 'bytesPerWaitingJob',
    label: 'bytes/waiting job ↓',
    higherIsBetter: false,
    value: (r) => r.bytesPerWaitingJob,
  },
  {
    id: 'bytesPerQueuedJob',
    label: 'bytes/job, waiting + delayed ↓',
    higherIsBetter: false,
    value: bytesPerQueuedJob,
  },
];

/** 1000000 -> '1 000 000', as the rest of the bench writes sizes. */
export function grouped(n: number): string {
  return String(Math.round(n)).replace(/\B(?=(\d{3})+(?!\d))/g, ' ');
}

function figure(v: number): string {
  if (!Number.isFinite(v)) return 'n/a';
  if (v >= 1e4) return `${(v / 1e3).toFixed(1)}k`;
  if (v >= 100) return v.toFixed(0);
  return v.toFixed(1);
}

export interface ScalePoint {
  row: ScaleRow;
  /** Every fill of this library and size (row is the first). */
  runs: ScaleRow[];
  /** Metric id -> median over the fills of this library and size. */
  values: Record<string, number>;
}

/** Medians per library and backlog, in ladder order. */
export function scaleMedians(rows: readonly ScaleRow[]): ScalePoint[] {
  const out: ScalePoint[] = [];
  for (const lib of [...new Set(rows.map((r) => r.lib))]) {
    const sizes = [...new Set(rows.filter((r) => r.lib === lib).map((r) => r.waiting))].sort((a, b) => a - b);
    for (const size of sizes) {
      const runs = rows.filter((r) => r.lib === lib && r.waiting === size);
      const values: Record<string, number> = {};
      for (const m of SCALE_METRICS) values[m.id] = median(runs.map(m.value));
      out.push({ row: runs[0]!, runs, values });
    }
  }
  return out;
}

/** One size's rounds in order (each the median over its fills): drain jobs/s and Redis CPU µs/job. */
function roundsLine({ row, runs }: ScalePoint): string {
  const byRound = (pick: (r: RoundFigures) => number) =>
    row.rounds.map((_, k) => figure(median(runs.map((r) => pick(r.rounds[k]!))))).join(' / ');
  return `By round at ${grouped(row.waiting)}: drain ${byRound((r) => r.drainPerSec)} jobs/s; Redis CPU ${byRound((r) => r.redisCpuUsPerJob)} µs/job`;
}

/** What the reload freed at one size (medians over fills): the growth's passing share of memory. */
function freedLine({ row, runs }: ScalePoint): string {
  const freed = median(runs.map((r) => r.settled!.freedBytesPerQueuedJob));
  const reload = median(runs.map((r) => r.settled!.reloadS));
  return `Reload at ${grouped(row.waiting)}: freed ${figure(freed)} B per queued job, took ${reload.toFixed(1)} s`;
}

/**
 * One library's rows (just after the fill, or settled) with ratios to its smallest backlog, their
 * rounds and, for settled rows, what each reload freed.
 */
function renderBlock(
  title: string,
  mine: readonly ScalePoint[],
  settled = false,
): { lines: string[]; flagged: boolean } {
  const base = mine[0]!.values;
  let flagged = false;
  const lines = [
    '',
    `${title}:`,
    `| backlog (waiting) | delayed | held | ${SCALE_METRICS.map((m) => m.label).join(' | ')} | fill, s |`,
    `|---|---|---|${SCALE_METRICS.map(() => '---|').join('')}---|`,
  ];
  for (const { row: r, values } of mine) {
    const cells = SCALE_METRICS.map(({ id, higherIsBetter }) => {
      const ratio = values[id]! / base[id]!;
      const worse = higherIsBetter ? ratio < 1 - SCALE_TOLERANCE : ratio > 1 + SCALE_TOLERANCE;
      flagged ||= worse;
      if (!Number.isFinite(values[id]!)) return 'n/a';
      return `${figure(values[id]!)} (${Number.isFinite(ratio) ? ratio.toFixed(2) : '–'}x${worse ? '*' : ''})`;
    });
    const fillS = r.stepS.held! + r.stepS.waiting! + r.stepS.delayed!;
    lines.push(
      `| ${grouped(r.waiting)} | ${grouped(r.delayed)} | ${grouped(r.held)} | ${cells.join(' | ')} | ${fillS.toFixed(1)} |`,
    );
  }
  lines.push('', ...mine.map(roundsLine));
  if (settled) lines.push(...mine.map(freedLine));
  return { lines, flagged };
}

export function renderScaleTable(rows: readonly ScaleRow[]): string {
  const medians = scaleMedians(rows);
  const settled = scaleMedians(rows.flatMap((r) => settledView(r) ?? []));
  const lines: string[] = [];
  let flagged = false;
  for (const lib of [...new Set(medians.map((p) => p.row.lib))]) {
    const blocks = [
      renderBlock(
        `${LABELS[lib]}, just after the fill`,
        medians.filter((p) => p.row.lib === lib),
      ),
    ];
    const mineSettled = settled.filter((p) => p.row.lib === lib);
    if (mineSettled.length > 0) blocks.push(renderBlock(`${LABELS[lib]}, settled`, mineSettled, true));
    for (const b of blocks) {
      lines.push(...b.lines);
      flagged ||= b.flagged;
    }
  }
  lines.push('', '(x) = ratio to the same library at the smallest backlog; the goal is within 15 % of it.');
  if (flagged) lines.push('* more than 15 % worse than at the smallest backlog.');
  lines.push(
    'By round: the medians over fills of each round in turn. A fill that grows a hash past a power of two leaves',
    'Redis rehashing it, a bucket per access for a hash value (the keyspace also in the background), and each',
    'access meanwhile costs more; the later rounds show how much of a row is that passing cost of growth',
    '(docs/scaling.md, "Cost as the backlog grows").',
  );
  if (settled.length > 0) {
    lines.push(
      'Settled: the same backlog after DEBUG RELOAD (saved and loaded again, every table built at its final size,',
      'as after a restart), the rounds run again: a backlog that has stopped growing. Its memory is not',
      'measured (n/a); "freed" is what the reload gave back after the first rounds (the old half of a table',
      'still being moved, less any part those rounds had moved).',
    );
  }
  return lines.join('\n').trimStart();
}
