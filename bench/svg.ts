/**
 * A hand-written SVG of a run: grouped bars (one per library) on a log scale, with min–max whiskers.
 * Panel 1: jobs/s of every throughput scenario. Panel 2: latency and delayed-job lateness (p50, p99).
 */
import type { LibName } from './adapters/types.js';
import { metricInfo } from './metrics.js';
import type { Results } from './results.js';
import { median } from './stats.js';

export const COLORS: Record<LibName, string> = { surety: '#2b7bb9', bullmq: '#d9822b', beequeue: '#6a9f3a' };
export const LABELS: Record<LibName, string> = { surety: 'Surety', bullmq: 'BullMQ', beequeue: 'Bee-Queue' };
const WIDTH = 960;
const PANEL_HEIGHT = 300;
const LEFT = 70;
const RIGHT = 20;

interface Bar {
  lib: LibName;
  med: number;
  min: number;
  max: number;
}

interface Group {
  label: string;
  bars: Bar[];
}

export function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function groups(results: Results, libs: readonly LibName[], pick: (scenario: string) => string[]): Group[] {
  const out: Group[] = [];
  for (const row of results.rows) {
    for (const metric of pick(row.scenario)) {
      const values = row.runs[metric];
      if (!values?.length) continue;
      const label = `${row.scenario}${row.variant ? ` ${row.variant}` : ''}${pick(row.scenario).length > 1 ? ` ${metricInfo(metric).label}` : ''}`;
      let g = out.find((x) => x.label === label);
      if (!g) {
        g = { label, bars: [] };
        out.push(g);
      }
      g.bars.push({ lib: row.lib, med: median(values), min: Math.min(...values), max: Math.max(...values) });
    }
  }
  for (const g of out) g.bars.sort((a, b) => libs.indexOf(a.lib) - libs.indexOf(b.lib));
  return out;
}

function panel(title: string, unit: string, data: Group[], libs: readonly LibName[], top: number): string {
  const parts: string[] = [];
  const h = PANEL_HEIGHT;
  const plotTop = top + 30;
  const plotBottom = top + h - 60;
  parts.push(`<text x="${LEFT}" y="${top + 18}" class="title">${esc(title)}</text>`);
  const positive = data.flatMap((g) => g.bars.flatMap((b) => [b.min, b.max])).filter((v) => v > 0);
  if (data.length === 0 || positive.length === 0) {
    parts.push(`<text x="${LEFT}" y="${plotTop + 20}">no data</text>`);
    return parts.join('\n');
  }
  const lo = 10 ** Math.floor(Math.log10(Math.min(...positive)));
  const hi = 10 ** Math.ceil(Math.log10(Math.max(...positive)));
  const y = (v: number) =>
    plotBottom -
    ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) *
      (plotBottom - plotTop);
  for (let d = lo; d <= hi * 1.0001; d *= 10) {
    for (const m of [1, 2, 5]) {
      const v = d * m;
      if (v > hi * 1.0001) break;
      const yy = y(v).toFixed(1);
      parts.push(
        `<line x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${yy}" y2="${yy}" class="${m === 1 ? 'grid' : 'minor'}"/>`,
      );
      if (m === 1 || m === 5) parts.push(`<text x="${LEFT - 6}" y="${yy}" class="axis">${fmt(v)}</text>`);
    }
  }
  parts.push(
    `<text x="14" y="${(plotTop + plotBottom) / 2}" class="unit" transform="rotate(-90 14 ${(plotTop + plotBottom) / 2})">${esc(unit)} (log)</text>`,
  );
  const groupWidth = (WIDTH - LEFT - RIGHT) / data.length;
  const barWidth = Math.min(34, (groupWidth - 16) / libs.length);
  data.forEach((g, gi) => {
    const x0 = LEFT + gi * groupWidth + (groupWidth - barWidth * libs.length) / 2;
    for (const b of g.bars) {
      const x = x0 + libs.indexOf(b.lib) * barWidth;
      const yTop = y(b.med);
      const cx = (x + barWidth / 2).toFixed(1);
      parts.push(
        `<rect x="${x.toFixed(1)}" y="${yTop.toFixed(1)}" width="${(barWidth - 2).toFixed(1)}" height="${(plotBottom - yTop).toFixed(1)}" fill="${COLORS[b.lib]}"><title>${LABELS[b.lib]} ${esc(g.label)}: ${fmt(b.med)} (${fmt(b.min)}–${fmt(b.max)})</title></rect>`,
        `<line x1="${cx}" x2="${cx}" y1="${y(b.min).toFixed(1)}" y2="${y(b.max).toFixed(1)}" class="whisker"/>`,
        `<text x="${cx}" y="${(Math.min(yTop, y(b.max)) - 4).toFixed(1)}" class="value">${fmt(b.med)}</text>`,
      );
    }
    const lx = LEFT + gi * groupWidth + groupWidth / 2;
    const [first, ...rest] = g.label.split(' ');
    parts.push(`<text x="${lx.toFixed(1)}" y="${plotBottom + 16}" class="group">${esc(first ?? '')}</text>`);
    if (rest.length)
      parts.push(
        `<text x="${lx.toFixed(1)}" y="${plotBottom + 30}" class="group">${esc(rest.join(' '))}</text>`,
      );
  });
  return parts.join('\n');
}

/** A colour key of the libraries, in one row from (x, y), `step` px apart. */
export function legend(libs: readonly LibName[], x: number, y: number, step: number): string {
  return libs
    .map(
      (l, i) =>
        `<rect x="${x + i * step}" y="${y}" width="12" height="12" fill="${COLORS[l]}"/><text x="${x + i * step + 18}" y="${y + 10}">${LABELS[l]}</text>`,
    )
    .join('');
}

export function fmt(v: number): string {
  if (v >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (v >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  if (v >= 10) return v.toFixed(0);
  if (v >= 1) return `${+v.toFixed(1)}`;
  return `${+v.toFixed(2)}`;
}

export function renderSvg(results: Results, libs: readonly LibName[], subtitle: string): string {
  const throughput = groups(results, libs, (s) =>
    ['enqueue-serial', 'enqueue-bulk', 'e2e', 'e2e-large', 'e2e-live'].includes(s) ? ['jobsPerSec'] : [],
  );
  const timing = groups(results, libs, (s) => (s === 'latency' || s === 'delayed' ? ['p50Ms', 'p99Ms'] : []));
  const height = 60 + PANEL_HEIGHT * 2 + 20;
  const key = legend(libs, LEFT, 40, 120);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="12">
<style>
.title{font-size:14px;font-weight:bold}.axis{text-anchor:end;dominant-baseline:middle;fill:#555;font-size:11px}
.unit{text-anchor:middle;fill:#555}.grid{stroke:#ccc}.minor{stroke:#eee}.whisker{stroke:#222;stroke-width:1.2}
.value{text-anchor:middle;font-size:10px;fill:#222}.group{text-anchor:middle;font-size:11px}
</style>
<rect width="100%" height="100%" fill="#fff"/>
<text x="${LEFT}" y="24" class="title">Surety benchmark: ${esc(subtitle)}</text>
${key}
${panel('Throughput (higher is better): median, whiskers min–max', 'jobs/s', throughput, libs, 60)}
${panel('Latency and delayed-job lateness (lower is better)', 'ms', timing, libs, 60 + PANEL_HEIGHT)}
</svg>
`;
}
