/** Collects the samples of every run and reduces them to median and min–max per metric. */
import type { LibName } from './adapters/types.js';
import type { Sample } from './scenarios/context.js';
import { median } from './stats.js';

export interface ResultRow {
  scenario: string;
  variant: string;
  concurrency?: number;
  lib: LibName;
  /** metric -> one value per successful run, in run order. */
  runs: Record<string, number[]>;
}

export interface RunError {
  scenario: string;
  lib: LibName;
  /** The first failure of this library in this scenario. */
  error: string;
  failedRuns: number;
}

export class Results {
  readonly rows: ResultRow[] = [];
  readonly errors: RunError[] = [];

  add(scenario: string, lib: LibName, sample: Sample): void {
    let row = this.rows.find((r) => r.scenario === scenario && r.variant === sample.variant && r.lib === lib);
    if (!row) {
      row = { scenario, variant: sample.variant, lib, runs: {} };
      if (sample.concurrency !== undefined) row.concurrency = sample.concurrency;
      this.rows.push(row);
    }
    for (const [key, value] of Object.entries(sample.metrics)) {
      row.runs[key] ??= [];
      row.runs[key].push(value);
    }
  }

  /** A run failed: its samples (if any) are not kept, and the library is marked n/a or incomplete. */
  fail(scenario: string, lib: LibName, error: string): void {
    const known = this.errorOf(scenario, lib);
    if (known) known.failedRuns++;
    else this.errors.push({ scenario, lib, error, failedRuns: 1 });
  }

  errorOf(scenario: string, lib: LibName): RunError | undefined {
    return this.errors.find((e) => e.scenario === scenario && e.lib === lib);
  }

  /**
   * One JSON object per scenario variant and library: medians at the top level, runs min/max/values;
   * `error` on rows of a library that failed some runs, and one `{scenario, lib, error}` object for a
   * library that has no successful run of a scenario.
   */
  toJson(): Record<string, unknown>[] {
    const out: Record<string, unknown>[] = this.rows.map((r) => {
      const line: Record<string, unknown> = { scenario: r.scenario };
      if (r.variant) line.variant = r.variant;
      line.lib = r.lib;
      if (r.concurrency !== undefined) line.concurrency = r.concurrency;
      const runs: Record<string, { min: number; max: number; values: number[] }> = {};
      for (const [key, values] of Object.entries(r.runs)) {
        line[key] = round(median(values));
        runs[key] = {
          min: round(Math.min(...values)),
          max: round(Math.max(...values)),
          values: values.map(round),
        };
      }
      line.runs = runs;
      const err = this.errorOf(r.scenario, r.lib);
      if (err) line.error = `${err.failedRuns} run(s) failed: ${err.error}`;
      return line;
    });
    for (const e of this.errors) {
      if (!this.rows.some((r) => r.scenario === e.scenario && r.lib === e.lib)) {
        out.push({ scenario: e.scenario, lib: e.lib, error: e.error });
      }
    }
    return out;
  }
}

function round(v: number): number {
  return Math.abs(v) >= 100 ? Math.round(v) : Math.round(v * 1000) / 1000;
}
