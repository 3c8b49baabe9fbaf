/**
 * Terminal output: colours (only on a TTY, never with NO_COLOR), aligned tables that fit the terminal,
 * and durations both ways (`5s`, `2m`, `1h30m` <-> ms).
 */
import { styleText } from 'node:util';
import { UsageError } from './errors.js';

export type Style = 'red' | 'green' | 'yellow' | 'blue' | 'cyan' | 'magenta' | 'gray' | 'bold' | 'dim';

/** Whether to colour `stream`: a TTY, no NO_COLOR (no-color.org), not TERM=dumb; FORCE_COLOR overrides. */
export function colorEnabled(stream: NodeJS.WriteStream, env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '') return env.FORCE_COLOR !== '0';
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  return stream.isTTY === true && env.TERM !== 'dumb';
}

export interface Painter {
  readonly enabled: boolean;
  (style: Style | Style[], text: string): string;
}

export function painter(stream: NodeJS.WriteStream): Painter {
  const enabled = colorEnabled(stream);
  const paint = (style: Style | Style[], text: string) => (enabled ? styleText(style, text) : text);
  return Object.assign(paint, { enabled });
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escape sequences start with ESC.
const ANSI = /\x1b\[[0-9;]*m/g;

export function visibleLength(s: string): number {
  return s.replace(ANSI, '').length;
}

export function truncate(s: string, width: number): string {
  if (width <= 0) return '';
  return s.length <= width ? s : `${s.slice(0, Math.max(0, width - 1))}…`;
}

export type Cell = string | number | { text: string; style?: Style | Style[] };

export interface TableOptions {
  /** Right-align these columns (numbers). */
  right?: number[];
  /** Columns that may be shortened (with …) when the table is wider than `width`. */
  flex?: number[];
  /** Available width; default the terminal's, unlimited when not a terminal. */
  width?: number;
  paint?: Painter;
}

/** An aligned table as text lines: a header row, then one line per row. */
export function table(headers: string[], rows: Cell[][], opts: TableOptions = {}): string {
  const paint = opts.paint ?? painter(process.stdout);
  const cells = rows.map((r) =>
    r.map((c) => (typeof c === 'object' ? c : { text: String(c), style: undefined as Style | undefined })),
  );
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => r[i]?.text.length ?? 0)));
  const gap = 2;
  const limit = opts.width ?? (process.stdout.isTTY ? process.stdout.columns : Number.POSITIVE_INFINITY);
  let total = widths.reduce((a, b) => a + b, 0) + gap * (widths.length - 1);
  const flex = opts.flex ?? [];
  while (total > limit && flex.length > 0) {
    const widest = flex.reduce((a, b) => ((widths[b] ?? 0) > (widths[a] ?? 0) ? b : a));
    const min = Math.max(6, headers[widest]!.length);
    if ((widths[widest] ?? 0) <= min) break;
    const cut = Math.min(total - limit, (widths[widest] ?? 0) - min);
    widths[widest] = (widths[widest] ?? 0) - cut;
    total -= cut;
  }
  const right = new Set(opts.right ?? []);
  const line = (texts: { text: string; style?: Style | Style[] | undefined }[], header: boolean) =>
    texts
      .map((c, i) => {
        const w = widths[i] ?? 0;
        const text = truncate(c.text, w);
        const padded = right.has(i) ? text.padStart(w) : i === texts.length - 1 ? text : text.padEnd(w);
        const style = header ? 'bold' : c.style;
        return style ? paint(style, padded) : padded;
      })
      .join(' '.repeat(gap))
      .trimEnd();
  return [
    line(
      headers.map((text) => ({ text })),
      true,
    ),
    ...cells.map((r) => line(r, false)),
  ].join('\n');
}

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `500ms`, `5s`, `2m`, `1h30m`, `1d`, `1.5s` or `0` -> milliseconds. */
export function parseDuration(text: string, what = 'duration'): number {
  const s = text.trim();
  if (s === '0') return 0;
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/gy;
  let ms = 0;
  let matched = 0;
  for (let m = re.exec(s); m; m = re.exec(s)) {
    ms += Number(m[1]) * UNITS[m[2]!]!;
    matched = re.lastIndex;
  }
  if (s === '' || matched !== s.length) {
    throw new UsageError(
      `${what} must be a duration like 500ms, 5s, 2m, 1h30m or 1d, got ${JSON.stringify(text)}`,
    );
  }
  return Math.round(ms);
}

/** 35ms, 1.2s, 42s, 2m 5s, 3h 2m, 4d 1h. */
export function formatDuration(ms: number): string {
  const a = Math.abs(ms);
  const sign = ms < 0 ? '-' : '';
  if (a < 1_000) return `${sign}${Math.round(a)}ms`;
  if (a < 10_000) return `${sign}${(a / 1_000).toFixed(1)}s`;
  if (a < 60_000) return `${sign}${Math.round(a / 1_000)}s`;
  const two = (big: number, bigUnit: string, small: number, smallUnit: string) => {
    const hi = Math.floor(a / big);
    const lo = Math.floor((a % big) / small);
    return `${sign}${hi}${bigUnit}${lo ? ` ${lo}${smallUnit}` : ''}`;
  };
  if (a < 3_600_000) return two(60_000, 'm', 1_000, 's');
  if (a < 86_400_000) return two(3_600_000, 'h', 60_000, 'm');
  return two(86_400_000, 'd', 3_600_000, 'h');
}

/** "5s ago" / "in 2m" relative to `now`; "-" when there is no time. */
export function formatWhen(at: number | undefined, now = Date.now()): string {
  if (at === undefined || !Number.isFinite(at) || at <= 0) return '-';
  const d = at - now;
  if (Math.abs(d) < 1_000) return 'now';
  return d < 0 ? `${formatDuration(-d)} ago` : `in ${formatDuration(d)}`;
}

export function formatTime(at: number | undefined): string {
  return at === undefined || at <= 0 ? '-' : new Date(at).toISOString();
}

export function formatCount(n: number): string {
  return n.toLocaleString('en-US');
}

/** JSON on one line, shortened to `width` characters. */
export function preview(value: unknown, width = 60): string {
  let s: string;
  try {
    s = value === undefined ? '' : JSON.stringify(value);
  } catch {
    s = String(value);
  }
  return truncate(s ?? '', width);
}
