/**
 * The scale stage as `npm run bench -- --only scale` runs it (bench/scale.ts measures): logs what it
 * does, times it with the load average around it, and writes bench/results/<date>-scale[-quick]
 * [-partial].json and latest-scale[...].svg. Returns the stage's part of the printed report.
 */
import { cpus, loadavg } from 'node:os';
import { monoMs } from './clock.js';
import { writeStageResults } from './output.js';
import { ROUNDS, runScaleBench, type ScaleEnv, SERIAL_ADDS } from './scale.js';
import { renderScaleTable } from './scale-report.js';
import { renderScaleSvg } from './scale-svg.js';

export interface ScaleRunInfo {
  started: Date;
  quick: boolean;
  partial: boolean;
  redis: string;
  commit: string;
}

const loads = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

export async function runScaleStage(
  env: ScaleEnv,
  info: ScaleRunInfo,
  log: (line: string) => void,
): Promise<string> {
  const drained = Math.min(env.n, ...env.sizes);
  const what = `backlogs ${env.sizes.join(' / ')} waiting (+ B/10 delayed, + min(${env.maxHeld}, B/2) held); per fill ${ROUNDS} rounds of ${SERIAL_ADDS} single adds, ${env.n} bulk adds and a drain of ${drained} jobs at concurrency 50; ${env.runs} fill(s) per size`;
  log(`\nscale: ${what}`);
  const t0 = monoMs();
  const loadStart = loads();
  const rows = await runScaleBench(env, log);
  const wallS = Math.round((monoMs() - t0) / 1000);
  const load = `load average ${loadStart} at start, ${loads()} at end (${cpus().length} CPUs)`;
  const date = info.started.toISOString().slice(0, 10);
  const suffix = [info.quick ? 'quick' : '', info.partial ? 'partial' : ''].filter(Boolean).join('-');
  const data = {
    startedAt: info.started.toISOString(),
    wallS,
    load,
    redis: info.redis,
    commit: info.commit,
    options: {
      libs: env.libs,
      sizes: env.sizes,
      runs: env.runs,
      rounds: ROUNDS,
      singleAdds: SERIAL_ADDS,
      bulkAdds: env.n,
      drained,
      maxHeld: env.maxHeld,
    },
    rows,
  };
  const svg = renderScaleSvg(
    rows,
    `${date}, drain ${drained} jobs at concurrency 50, medians of ${ROUNDS} rounds`,
  );
  log(`wrote ${writeStageResults('scale', date, suffix, data, svg).join(' and ')}`);
  return `Scale (bench/scale.ts): ${what}. ${wallS} s, ${load}:\n${renderScaleTable(rows)}`;
}
