/** The readable table: one row per scenario variant and metric, one column per library, ratios to BullMQ. */
import type { LibName } from './adapters/types.js';
import { METRICS, metricInfo } from './metrics.js';
import type { ResultRow, Results } from './results.js';
import { median } from './stats.js';

const LABELS: Record<LibName, string> = { surety: 'Surety', bullmq: 'BullMQ', beequeue: 'Bee-Queue' };
const BASE: LibName = 'bullmq';

export function cell(values: readonly number[] | undefined, format: (v: number) => string): string {
  if (!values || values.length === 0) return 'n/a';
  const med = format(median(values));
  if (values.length === 1) return med;
  return `${med} (${format(Math.min(...values))}–${format(Math.max(...values))})`;
}

/** median(lib) / median(base) as `1.23x`, or '–' when either is missing or base is not positive. */
export function ratio(lib: readonly number[] | undefined, base: readonly number[] | undefined): string {
  if (!lib?.length || !base?.length) return '–';
  const b = median(base);
  const l = median(lib);
  if (!(b > 0) || !(l >= 0)) return '–';
  return `${(l / b).toFixed(2)}x`;
}

export function renderTable(results: Results, libs: readonly LibName[]): string {
  const ratioLibs = libs.includes(BASE) ? libs.filter((l) => l !== BASE) : [];
  const header = [
    'scenario',
    'variant',
    'metric',
    'better',
    ...libs.map((l) => LABELS[l]),
    ...ratioLibs.map((l) => `${LABELS[l]}/BullMQ`),
  ];
  const lines: string[][] = [header];
  const groups = new Map<string, ResultRow[]>();
  for (const row of results.rows) {
    const key = `${row.scenario}\u0000${row.variant}`;
    groups.set(key, [...(groups.get(key) ?? []), row]);
  }
  for (const rows of groups.values()) {
    const scenario = rows[0]!.scenario;
    const byLib = new Map(rows.map((r) => [r.lib, r]));
    const mark = (lib: LibName) => (results.errorOf(scenario, lib) ? '*' : '');
    const keys = Object.keys(METRICS).filter((k) => rows.some((r) => r.runs[k]));
    keys.forEach((key, i) => {
      const info = metricInfo(key);
      lines.push([
        i === 0 ? scenario : '',
        i === 0 ? rows[0]!.variant : '',
        info.label,
        info.better === 'higher' ? '↑' : '↓',
        ...libs.map((l) => cell(byLib.get(l)?.runs[key], info.format) + mark(l)),
        ...ratioLibs.map((l) => ratio(byLib.get(l)?.runs[key], byLib.get(BASE)?.runs[key])),
      ]);
    });
  }
  // Scenarios where no library produced a value.
  for (const scenario of new Set(results.errors.map((e) => e.scenario))) {
    if (results.rows.some((r) => r.scenario === scenario)) continue;
    lines.push([scenario, '', '', '', ...libs.map((l) => `n/a${results.errorOf(scenario, l) ? '*' : ''}`)]);
  }
  const notes = results.errors.map(
    (e) => `${e.scenario} ${LABELS[e.lib]} (${e.failedRuns} run(s) failed): ${e.error}`,
  );
  const out = [
    ...alignColumns(lines, 4),
    '',
    'Cells: median (min–max) over runs. Ratios: median of the library / median of BullMQ;',
    '↑ higher is better, ↓ lower is better (for ↓ metrics a ratio below 1x is better).',
  ];
  if (notes.length > 0)
    out.push('', '* n/a or incomplete (failed runs are left out):', ...notes.map((n) => `  ${n}`));
  return out.join('\n');
}

/**
 * Rows of cells as text lines: every column padded to its widest cell (the first `left` columns
 * left-aligned, the others right-aligned), with a rule under the first row, the header.
 */
export function alignColumns(lines: readonly string[][], left: number): string[] {
  const widths = lines[0]!.map((_, c) => Math.max(...lines.map((l) => [...(l[c] ?? '')].length)));
  return lines.map((l, i) => {
    const padded = l.map((v, c) => {
      const gap = ' '.repeat(widths[c]! - [...v].length);
      return c < left ? v + gap : gap + v;
    });
    const line = padded.join('  ').trimEnd();
    return i === 0 ? `${line}\n${widths.map((w) => '-'.repeat(w)).join('  ')}` : line;
  });
}
