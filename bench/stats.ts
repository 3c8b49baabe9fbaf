/** Small statistics helpers: nearest-rank percentiles, median, min, max. */

export function sorted(values: readonly number[]): number[] {
  return [...values].sort((a, b) => a - b);
}

/** Nearest-rank percentile of already sorted values (p in 0..100). */
export function percentile(sortedValues: readonly number[], p: number): number {
  if (sortedValues.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sortedValues.length);
  return sortedValues[Math.min(sortedValues.length, Math.max(1, rank)) - 1]!;
}

export function median(values: readonly number[]): number {
  const s = sorted(values);
  if (s.length === 0) return Number.NaN;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function summary(values: readonly number[]): { p50: number; p99: number; max: number } {
  const s = sorted(values);
  return { p50: percentile(s, 50), p99: percentile(s, 99), max: s[s.length - 1] ?? Number.NaN };
}
