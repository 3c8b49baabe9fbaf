/**
 * The application code the two example tests check (vitest.example.test.ts, node-test.example.ts):
 * a sign-up sends a welcome email at once and a reminder a day later; a failed send is retried after
 * 10 minutes; a digest goes out every day at 09:00 UTC. Nothing here knows about tests: the test env
 * hands it a Queue and runs its processor in a Worker, both on a virtual clock.
 */
import type { Job, Queue } from '../../src/index.js';

export interface Email {
  to: string;
  kind: 'welcome' | 'reminder' | 'digest';
}

export const DAY_MS = 86_400_000;

/** Enqueues the sign-up's emails: welcome now, reminder in a day; a failed send retries after 10 min. */
export async function signUp(queue: Queue<Email>, to: string): Promise<void> {
  const retry = { maxAttempts: 5, backoff: { type: 'fixed' as const, delayMs: 10 * 60_000 } };
  await queue.add({ to, kind: 'welcome' }, retry);
  await queue.add({ to, kind: 'reminder' }, { ...retry, delayMs: DAY_MS });
}

/** The daily digest, upserted at every start (an identical schedule changes nothing). */
export async function scheduleDigest(queue: Queue<Email>): Promise<void> {
  await queue.schedule('digest', { cron: '0 9 * * *' }, { data: { to: 'team@example.com', kind: 'digest' } });
}

/** The processor: sends through `mailer` (in production an SMTP client; in the tests a fake). */
export function sendEmail(mailer: (email: Email) => Promise<void>) {
  return async (job: Job<Email>) => {
    await mailer(job.data);
  };
}
