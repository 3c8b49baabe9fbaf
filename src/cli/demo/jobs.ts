/**
 * The demo's workload: a realistic mix of jobs and the built-in processor that runs them.
 * Every demo job gets a 2 s lease, so a killed worker's job is recovered within seconds.
 */
import { UnrecoverableError } from '../../errors.js';
import type { JobOptions } from '../../types.js';
import type { Job } from '../../worker/job.js';

export type DemoKind = 'email' | 'reminder' | 'webhook' | 'broken' | 'report';

export interface DemoData {
  kind: DemoKind;
  /** How long the job works, in ms. */
  workMs: number;
  to?: string;
}

export interface DemoJob {
  id: string;
  data: DemoData;
  opts: JobOptions;
}

export const DEMO_LEASE_MS = 2_000;
export const DEMO_RECOVER_INTERVAL_MS = 250;
/** The report job: long enough to be killed mid-job. */
export const REPORT_ID = 'report';

export const KIND_LABELS: Record<DemoKind, string> = {
  email: 'emails (now)',
  reminder: 'reminders (delayed)',
  webhook: 'webhooks (fail twice, then ok)',
  broken: 'broken (always fail)',
  report: 'report (worker killed)',
};

export function demoJobs(): DemoJob[] {
  const jobs: DemoJob[] = [{ id: REPORT_ID, data: { kind: 'report', workMs: 3_000 }, opts: {} }];
  const people = [
    'ada',
    'grace',
    'alan',
    'edsger',
    'barbara',
    'donald',
    'margaret',
    'ken',
    'dennis',
    'linus',
  ];
  people.forEach((p, i) => {
    const id = `email-${String(i + 1).padStart(2, '0')}`;
    jobs.push({
      id,
      data: { kind: 'email', workMs: 150 + ((i * 137) % 500), to: `${p}@example.com` },
      opts: {},
    });
  });
  [3, 6, 9, 12].forEach((s, i) => {
    jobs.push({
      id: `reminder-${i + 1}`,
      data: { kind: 'reminder', workMs: 50 },
      opts: { delayMs: s * 1_000 },
    });
  });
  for (let i = 1; i <= 3; i++) {
    jobs.push({
      id: `webhook-${i}`,
      data: { kind: 'webhook', workMs: 100 },
      opts: { maxAttempts: 4, backoff: { type: 'fixed', delayMs: 1_000 } },
    });
  }
  for (let i = 1; i <= 2; i++) {
    jobs.push({
      id: `broken-${i}`,
      data: { kind: 'broken', workMs: 80 },
      opts: { maxAttempts: 3, backoff: { type: 'fixed', delayMs: 800 } },
    });
  }
  jobs.push({ id: 'broken-3', data: { kind: 'broken', workMs: 20, to: 'nobody@invalid' }, opts: {} });
  return jobs;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The built-in demo processor. */
export async function demoProcessor(job: Job<DemoData>): Promise<unknown> {
  const { kind, workMs, to } = job.data;
  await sleep(workMs);
  switch (kind) {
    case 'webhook':
      if (job.attempt < 3) throw new Error(`upstream answered 503 (attempt ${job.attempt})`);
      return { status: 200 };
    case 'broken':
      if (to?.endsWith('@invalid')) throw new UnrecoverableError(`no mail server for ${to}`);
      throw new Error('template "invoice" is missing');
    case 'report':
      return { pages: 12 };
    default:
      return { sent: true, to };
  }
}
