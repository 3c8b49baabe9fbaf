/**
 * Testing your own jobs with surety/testing, in node:test (docs/testing.md). Run it with
 * `node --import tsx --test examples/testing/node-test.example.ts` (test/processes/examples.test.ts does).
 *
 * In your project the imports are `from 'surety/testing'` and `from 'surety'`.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { createTestEnv, type TestEnv } from '../../src/testing/index.js';
import { type Email, scheduleDigest, sendEmail, signUp } from './signup-emails.js';

describe('sign-up emails (node:test)', () => {
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
    assert.deepEqual(
      sent.map((s) => s.email.kind),
      ['welcome'],
    );

    await env.advance('1d');
    assert.deepEqual(
      sent.map((s) => [s.email.kind, s.at]),
      [
        ['welcome', '2026-01-05T08:00:00.000Z'],
        ['reminder', '2026-01-06T08:00:00.000Z'],
      ],
    );
  });

  it('retries a failed send after 10 minutes', async () => {
    failNext = 1;
    await signUp(env.queue<Email>('emails'), 'grace@example.com');
    await env.drain();
    assert.equal(sent.length, 0);

    await env.advance('10m');
    assert.deepEqual(
      sent.map((s) => [s.email.kind, s.at]),
      [['welcome', '2026-01-05T08:10:00.000Z']],
    );
  });

  it('sends the digest every day at 09:00', async () => {
    await scheduleDigest(env.queue<Email>('emails'));
    await env.advance('1h');
    await env.advance('1d');
    assert.deepEqual(
      sent.map((s) => s.at),
      ['2026-01-05T09:00:00.000Z', '2026-01-06T09:00:00.000Z'],
    );
  });
});
