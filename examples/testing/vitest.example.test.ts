/**
 * Testing your own jobs with surety/testing, in vitest (docs/testing.md). The real scripts and worker
 * run against a private redis-server; only the clock is virtual, so a day passes in milliseconds.
 *
 * In your project the imports are `from 'surety/testing'` and `from 'surety'`.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTestEnv, type TestEnv } from '../../src/testing/index.js';
import { type Email, scheduleDigest, sendEmail, signUp } from './signup-emails.js';

describe('sign-up emails (vitest)', () => {
  let env: TestEnv;
  let sent: { email: Email; at: string }[];
  let failNext = 0;

  beforeEach(async () => {
    env = await createTestEnv({ startAt: '2026-01-05T08:00:00Z' });
    sent = [];
    failNext = 0;
    const mailer = async (email: Email) => {
      if (failNext > 0) {
        failNext--;
        throw new Error('SMTP 421: try again later');
      }
      sent.push({ email, at: new Date(env.now()).toISOString() });
    };
    env.worker<Email>('emails', sendEmail(mailer));
  });

  afterEach(async () => {
    await env.close();
  });

  it('sends the welcome email at once and the reminder a day later', async () => {
    await signUp(env.queue<Email>('emails'), 'ada@example.com');
    await env.drain();
    expect(sent.map((s) => s.email.kind)).toEqual(['welcome']);

    await env.advance('23h');
    expect(sent).toHaveLength(1);
    await env.advance('1h');
    expect(sent.map((s) => [s.email.kind, s.at])).toEqual([
      ['welcome', '2026-01-05T08:00:00.000Z'],
      ['reminder', '2026-01-06T08:00:00.000Z'],
    ]);
  });

  it('retries a failed send after 10 minutes', async () => {
    failNext = 1;
    const queue = env.queue<Email>('emails');
    await signUp(queue, 'grace@example.com');
    await env.drain();
    expect(sent).toEqual([]);
    expect(await queue.counts()).toMatchObject({ delayed: 2 }); // the retry and the reminder

    await env.advance('10m');
    expect(sent.map((s) => [s.email.kind, s.at])).toEqual([['welcome', '2026-01-05T08:10:00.000Z']]);
  });

  it('sends the digest every day at 09:00', async () => {
    await scheduleDigest(env.queue<Email>('emails'));
    await env.advance('59m');
    expect(sent).toEqual([]);
    await env.advance('1m');
    await env.advance('1d');
    expect(sent.map((s) => s.at)).toEqual(['2026-01-05T09:00:00.000Z', '2026-01-06T09:00:00.000Z']);
  });
});
