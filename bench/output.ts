/** Writes a run's results: bench/results/<date>[-suffix].json and the SVG chart. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Results } from './results.js';

export const RESULTS_DIR = fileURLToPath(new URL('./results/', import.meta.url));

export interface RunInfo {
  date: string;
  startedAt: string;
  durationS: number;
  machine: Record<string, string | number>;
  options: Record<string, unknown>;
  scenarios: Record<string, string>;
  notes: string[];
}

/** `suffix` is '' for the standard full run; otherwise e.g. 'quick' or 'partial'. */
export function writeResults(info: RunInfo, results: Results, svg: string, suffix: string): string[] {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const tail = suffix ? `-${suffix}` : '';
  const jsonPath = `${RESULTS_DIR}${info.date}${tail}.json`;
  const svgPath = `${RESULTS_DIR}latest${tail}.svg`;
  writeFileSync(jsonPath, `${JSON.stringify({ ...info, results: results.toJson() }, null, 2)}\n`);
  writeFileSync(svgPath, svg);
  return [jsonPath, svgPath];
}

/**
 * A stage's own results (bench/scale.ts): bench/results/<date>-<stage>[-suffix].json and, with `svg`,
 * bench/results/latest-<stage>[-suffix].svg.
 */
export function writeStageResults(
  stage: string,
  date: string,
  suffix: string,
  data: unknown,
  svg?: string,
): string[] {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const tail = suffix ? `-${suffix}` : '';
  const jsonPath = `${RESULTS_DIR}${date}-${stage}${tail}.json`;
  writeFileSync(jsonPath, `${JSON.stringify(data, null, 2)}\n`);
  if (svg === undefined) return [jsonPath];
  const svgPath = `${RESULTS_DIR}latest-${stage}${tail}.svg`;
  writeFileSync(svgPath, svg);
  return [jsonPath, svgPath];
}
