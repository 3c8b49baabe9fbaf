/** Collects the samples of every run and reduces them to median and min–max per metric. */
import type { LibName } from './adapters/types.js';
import type { Sample } from './scenarios/context.js';
import { median } from './stats.js';

export interface ResultRow {
  scenario: string;
  variant: string;
  concurrency?: number;
  lib: LibName;
  /** metric -> one value per run, in run order. */
  runs: Record<string, number[]>;
  /** Why there is no value (n/a), when a run failed. */
  error?: string;
}

export class Results {
  readonly rows: ResultRow[] = [];

  add(scenario: string, lib: LibName, sample: Sample): void {
    const row = this.row(scenario, sample.variant, lib, sample.concurrency);
    for (const [key, value] of Object.entries(sample.metrics)) (row.runs[key] ??= []).push(value);
  }

  fail(scenario: string, lib: LibName, error: string): void {
    // Variants are not known when a run fails before producing any: one row for the scenario.
    const existing = this.rows.filter((r) => r.scenario === scenario && r.lib === lib);
    if (existing.length === 0) existing.push(this.row(scenario, '', lib));
    for (const row of existing) row.error ??= error;
  }

  private row(scenario: string, variant: string, lib: LibName, concurrency?: number): ResultRow {
    let row = this.rows.find((r) => r.scenario === scenario && r.variant === variant && r.lib === lib);
    if (!row) {
      row = { scenario, variant, lib, runs: {} };
      if (concurrency !== undefined) row.concurrency = concurrency;
      this.rows.push(row);
    }
    return row;
  }

  /** One JSON object per scenario variant and library: medians at the top level, runs min/max/values. */
  toJson(): Record<string, unknown>[] {
    return this.rows.map((r) => {
      const out: Record<string, unknown> = { scenario: r.scenario };
      if (r.variant) out.variant = r.variant;
      out.lib = r.lib;
      if (r.concurrency !== undefined) out.concurrency = r.concurrency;
      if (r.error) {
        out.error = r.error;
        return out;
      }
      const runs: Record<string, { min: number; max: number; values: number[] }> = {};
      for (const [key, values] of Object.entries(r.runs)) {
        out[key] = round(median(values));
        runs[key] = { min: round(Math.min(...values)), max: round(Math.max(...values)), values: values.map(round) };
      }
      out.runs = runs;
      return out;
    });
  }
}

function round(v: number): number {
  return Math.abs(v) >= 100 ? Math.round(v) : Math.round(v * 1000) / 1000;
}
