/**
 * The scale stage's table: one block per library, one row per backlog size, every figure with its
 * ratio to the same library's smallest backlog (the goal: within 15 %, in the worse direction).
 */

import type { ScaleRow } from './scale.js';
import { median } from './stats.js';
import { LABELS } from './svg.js';

/** How far a figure may move from the smallest backlog's in the worse direction (issue #17: 15 %). */
export const SCALE_TOLERANCE = 0.15;

type MetricKey =
  | 'enqueueSerialPerSec'
  | 'enqueueBulkPerSec'
  | 'drainPerSec'
  | 'redisCpuUsPerJob'
  | 'bytesPerWaitingJob'
  | 'bytesPerDelayedJob';

export const SCALE_METRICS: { key: MetricKey; label: string; higherIsBetter: boolean }[] = [
  { key: 'enqueueSerialPerSec', label: 'single adds/s ↑', higherIsBetter: true },
  { key: 'enqueueBulkPerSec', label: 'bulk adds/s ↑', higherIsBetter: true },
  { key: 'drainPerSec', label: 'drain jobs/s ↑', higherIsBetter: true },
  { key: 'redisCpuUsPerJob', label: 'Redis CPU µs/job ↓', higherIsBetter: false },
  { key: 'bytesPerWaitingJob', label: 'bytes/waiting job ↓', higherIsBetter: false },
  { key: 'bytesPerDelayedJob', label: 'bytes/delayed job ↓', higherIsBetter: false },
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

/** Medians per library and backlog, in ladder order. */
export function scaleMedians(rows: readonly ScaleRow[]): ScaleRow[] {
  const out: ScaleRow[] = [];
  for (const lib of [...new Set(rows.map((r) => r.lib))]) {
    const sizes = [...new Set(rows.filter((r) => r.lib === lib).map((r) => r.waiting))].sort((a, b) => a - b);
    for (const size of sizes) {
      const runs = rows.filter((r) => r.lib === lib && r.waiting === size);
      const med = { ...runs[0]! };
      for (const { key } of SCALE_METRICS) med[key] = median(runs.map((r) => r[key]));
      out.push(med);
    }
  }
  return out;
}

export function renderScaleTable(rows: readonly ScaleRow[]): string {
  const medians = scaleMedians(rows);
  const lines: string[] = [];
  let flagged = false;
  for (const lib of [...new Set(medians.map((r) => r.lib))]) {
    const mine = medians.filter((r) => r.lib === lib);
    const base = mine[0]!;
    lines.push(
      '',
      `${LABELS[lib]}:`,
      `| backlog (waiting) | delayed | held | ${SCALE_METRICS.map((m) => m.label).join(' | ')} | fill, s |`,
      `|---|---|---|${SCALE_METRICS.map(() => '---|').join('')}---|`,
    );
    for (const r of mine) {
      const cells = SCALE_METRICS.map(({ key, higherIsBetter }) => {
        const ratio = r[key] / base[key];
        const worse = higherIsBetter ? ratio < 1 - SCALE_TOLERANCE : ratio > 1 + SCALE_TOLERANCE;
        flagged ||= worse;
        return `${figure(r[key])} (${Number.isFinite(ratio) ? ratio.toFixed(2) : '–'}x${worse ? '*' : ''})`;
      });
      const fillS = r.stepS.held! + r.stepS.waiting! + r.stepS.delayed!;
      lines.push(
        `| ${grouped(r.waiting)} | ${grouped(r.delayed)} | ${grouped(r.held)} | ${cells.join(' | ')} | ${fillS.toFixed(1)} |`,
      );
    }
  }
  lines.push('', '(x) = ratio to the same library at the smallest backlog; the goal is within 15 % of it.');
  if (flagged) lines.push('* more than 15 % worse than at the smallest backlog.');
  return lines.join('\n').trimStart();
}
