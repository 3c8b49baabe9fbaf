/**
 * The scale stage's chart (bench/results/latest-scale.svg): one panel per figure, each against the
 * backlog size on a log x axis, one line per library. Y axes are linear from 0, so a flat line is what
 * "cost does not grow with the backlog" looks like, and a drop of 15 % is a visible one.
 */
import type { LibName } from './adapters/types.js';
import type { ScaleRow } from './scale.js';
import { grouped, SCALE_METRICS, scaleMedians } from './scale-report.js';
import { COLORS, esc, fmt, LABELS, legend } from './svg.js';

const PANEL_W = 330;
const PANEL_H = 250;
const COLUMNS = 3;
const PAD = { left: 58, right: 16, top: 34, bottom: 42 };
const HEADER = 64;

interface Series {
  lib: LibName;
  points: { x: number; y: number }[];
}

/** 1, 2, 5 steps: a tick spacing giving at most about five intervals up to `max`. */
function niceStep(max: number): number {
  const raw = max / 5;
  const pow = 10 ** Math.floor(Math.log10(raw));
  return ([1, 2, 5, 10].find((m) => m * pow >= raw) ?? 10) * pow;
}

function xTicks(lo: number, hi: number): number[] {
  const ticks: number[] = [];
  for (let d = 10 ** Math.floor(Math.log10(lo)); d <= hi; d *= 10) {
    for (const m of [1, 2, 5]) if (d * m >= lo * 0.999 && d * m <= hi * 1.001) ticks.push(d * m);
  }
  return ticks;
}

function panel(title: string, series: Series[], x0: number, y0: number): string {
  const parts = [`<text x="${x0 + PAD.left}" y="${y0 + 20}" class="title">${esc(title)}</text>`];
  const all = series.flatMap((s) => s.points).filter((p) => Number.isFinite(p.y));
  if (all.length === 0) return parts.join('\n');
  const left = x0 + PAD.left;
  const right = x0 + PANEL_W - PAD.right;
  const top = y0 + PAD.top;
  const bottom = y0 + PANEL_H - PAD.bottom;
  const xs = all.map((p) => p.x);
  // A single size still gets a visible x range.
  const xlo = Math.min(...xs) / 1.25;
  const xhi = Math.max(...xs) * 1.25;
  const step = niceStep(Math.max(...all.map((p) => p.y)) * 1.1 || 1);
  const yhi = Math.ceil((Math.max(...all.map((p) => p.y)) * 1.1) / step) * step || step;
  const x = (v: number) =>
    left + ((Math.log10(v) - Math.log10(xlo)) / (Math.log10(xhi) - Math.log10(xlo))) * (right - left);
  const y = (v: number) => bottom - (v / yhi) * (bottom - top);
  for (let v = 0; v <= yhi * 1.0001; v += step) {
    parts.push(
      `<line x1="${left}" x2="${right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" class="grid"/>`,
      `<text x="${left - 5}" y="${y(v).toFixed(1)}" class="axis">${fmt(v)}</text>`,
    );
  }
  for (const t of xTicks(xlo, xhi)) {
    parts.push(
      `<line x1="${x(t).toFixed(1)}" x2="${x(t).toFixed(1)}" y1="${top}" y2="${bottom}" class="minor"/>`,
      `<text x="${x(t).toFixed(1)}" y="${bottom + 14}" class="xaxis">${fmt(t)}</text>`,
    );
  }
  parts.push(
    `<text x="${(left + right) / 2}" y="${bottom + 32}" class="xaxis">backlog, waiting jobs (log)</text>`,
  );
  for (const s of series) {
    const pts = s.points.filter((p) => Number.isFinite(p.y));
    const path = pts.map((p) => `${x(p.x).toFixed(1)},${y(p.y).toFixed(1)}`).join(' ');
    parts.push(`<polyline points="${path}" fill="none" stroke="${COLORS[s.lib]}" stroke-width="2"/>`);
    for (const p of pts) {
      parts.push(
        `<circle cx="${x(p.x).toFixed(1)}" cy="${y(p.y).toFixed(1)}" r="3.5" fill="${COLORS[s.lib]}"><title>${LABELS[s.lib]}, backlog ${grouped(p.x)}: ${fmt(p.y)}</title></circle>`,
        `<text x="${x(p.x).toFixed(1)}" y="${(y(p.y) - 7).toFixed(1)}" class="value" fill="${COLORS[s.lib]}">${fmt(p.y)}</text>`,
      );
    }
  }
  return parts.join('\n');
}

export function renderScaleSvg(rows: readonly ScaleRow[], subtitle: string): string {
  const medians = scaleMedians(rows);
  const libs = [...new Set(medians.map((p) => p.row.lib))];
  const metrics = SCALE_METRICS;
  const rowsOfPanels = Math.ceil(metrics.length / COLUMNS);
  const width = PANEL_W * COLUMNS;
  const height = HEADER + rowsOfPanels * PANEL_H;
  const panels = metrics.map((m, i) =>
    panel(
      m.label,
      libs.map((lib) => ({
        lib,
        points: medians
          .filter((p) => p.row.lib === lib)
          .map((p) => ({ x: p.row.waiting, y: p.values[m.id]! })),
      })),
      (i % COLUMNS) * PANEL_W,
      HEADER + Math.floor(i / COLUMNS) * PANEL_H,
    ),
  );
  const key = legend(libs, PAD.left, 38, 110);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">
<style>
.title{font-size:13px;font-weight:bold}.axis{text-anchor:end;dominant-baseline:middle;fill:#555;font-size:11px}
.xaxis{text-anchor:middle;fill:#555;font-size:11px}.grid{stroke:#ddd}.minor{stroke:#f0f0f0}
.value{text-anchor:middle;font-size:10px}
</style>
<rect width="100%" height="100%" fill="#fff"/>
<text x="${PAD.left}" y="22" class="title">Cost as the backlog grows: ${esc(subtitle)}</text>
${key}
${panels.join('\n')}
</svg>
`;
}
