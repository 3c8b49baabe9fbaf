/** Every metric a scenario can report: its label, unit, which direction is better, and its format. */

export interface MetricInfo {
  label: string;
  better: 'higher' | 'lower';
  format(value: number): string;
}

function compact(v: number): string {
  if (!Number.isFinite(v)) return 'n/a';
  const a = Math.abs(v);
  if (a >= 1e6) return `${(v / 1e6).toFixed(2)}M`;
  if (a >= 1e4) return `${(v / 1e3).toFixed(1)}k`;
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

export const METRICS: Record<string, MetricInfo> = {
  jobsPerSec: { label: 'jobs/s', better: 'higher', format: compact },
  p50Ms: { label: 'p50 ms', better: 'lower', format: compact },
  p99Ms: { label: 'p99 ms', better: 'lower', format: compact },
  maxMs: { label: 'max ms', better: 'lower', format: compact },
  early: { label: 'started early (jobs)', better: 'lower', format: (v) => v.toFixed(0) },
  bytesPerJob: { label: 'bytes/job', better: 'lower', format: compact },
  redisCommandsPerJob: { label: 'Redis commands/job', better: 'lower', format: compact },
  redisCommandsAddPerJob: { label: '  of which add', better: 'lower', format: compact },
  clientCommandsPerJob: { label: 'client commands/job', better: 'lower', format: compact },
  roundTripsPerJob: { label: 'client round trips/job', better: 'lower', format: compact },
  redisCpuUsPerJob: { label: 'Redis CPU µs/job', better: 'lower', format: compact },
  workerCpuUsPerJob: { label: 'worker CPU µs/job', better: 'lower', format: compact },
  redisInstructionsPerJob: { label: 'Redis instructions/job', better: 'lower', format: compact },
  scriptCallsPerJob: { label: 'script calls/job', better: 'lower', format: (v) => v.toFixed(4) },
};

export function metricInfo(key: string): MetricInfo {
  return METRICS[key] ?? { label: key, better: 'lower', format: compact };
}
