/**
 * The dashboard page in a real headless Chromium (Debian's /usr/bin/chromium through playwright-core;
 * CI installs it with `apt-get install -y chromium`): the live overview with its per-queue charts, a dead
 * job opened, retried and completed by a worker, an XSS payload in job data shown as text, and the dead
 * tab cleaned. Screenshots go to a temp dir; docs/dashboard*.png come from `npm run screenshots`.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, UnrecoverableError, Worker } from '../../src/index.js';
import {
  CHROMIUM,
  launchChromium,
  type ServedDashboard,
  serveDashboard,
} from '../helpers/dashboard-browser.js';
import { uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const XSS = '<script>alert(1)</script><img src=x onerror=alert(2)>';
const shots = mkdtempSync(join(tmpdir(), 'surety-e2e-'));

const fx = useRedis();

const suite = existsSync(CHROMIUM) ? describe : describe.skip;

suite(`dashboard page in headless Chromium (${CHROMIUM}; skipped only when it is not installed)`, () => {
  let browser: Browser;
  let page: Page;
  let served: ServedDashboard;
  let url: string;
  let worker: Worker;
  const queues: Queue[] = [];
  const dialogs: string[] = [];
  const pageErrors: string[] = [];
  const name = uniqueName('emails');

  beforeAll(async () => {
    served = await serveDashboard({ connection: fx.url, eventsIntervalMs: 500 });
    url = served.url;
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1200, height: 360 } });
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    page.on('pageerror', (err) => pageErrors.push(err.message));
  });

  afterAll(async () => {
    rmSync(shots, { recursive: true, force: true });
    await browser?.close();
    await worker?.close();
    for (const q of queues) await q.close();
    await served?.close();
  });

  it('shows live counts and charts, retries a dead job until a worker completes it, and renders data as text', async () => {
    const q = new Queue(name, { connection: fx.url });
    const reports = new Queue(uniqueName('reports'), { connection: fx.url });
    queues.push(q, reports);
    // The welcome job's first attempt dies at once, and a retry completes it. Flaky jobs fail once and
    // are retried at once; the rest complete: the charts have completions and failures to show.
    worker = new Worker(
      name,
      async (job) => {
        const data = job.data as { subject?: string; flaky?: boolean };
        if (data.subject && job.attempt === 1) throw new UnrecoverableError('smtp refused the message');
        if (data.flaky && job.attempt === 1) throw new Error('greylisted, try again');
        return { delivered: true };
      },
      { connection: fx.url },
    );
    const { id } = await q.add({ to: 'ada@example.com', subject: XSS }, { id: 'welcome-ada' });
    await q.addBulk(
      Array.from({ length: 8 }, (_, i) => ({
        data: { to: `user${i}@example.com`, flaky: i % 4 === 0 },
        opts: { maxAttempts: 2, backoff: { type: 'fixed' as const, delayMs: 0 } },
      })),
    );
    await waitUntil(async () => (await q.getJob(id))?.state === 'dead', 'the job to die');
    // The page fetches a queue's metrics when it first lists it: let them be recorded first.
    await waitUntil(async () => {
      const m = await q.metrics();
      return m.completed === 8 && m.failed === 3;
    }, 'the completions and failures in queue.metrics()');
    await reports.addBulk([
      { data: { n: 1 } },
      { data: { n: 2 } },
      { data: { n: 3 }, opts: { delayMs: 3_600_000 } },
    ]);
    await reports.pause();

    await page.goto(url);
    const row = page.locator(`tr[data-queue="${name}"]`);
    await row.locator('[data-count="dead"]', { hasText: '1' }).waitFor({ timeout: 10_000 });
    await page.locator(`tr[data-queue="${reports.name}"] [data-count="waiting"]`, { hasText: '2' }).waitFor();
    // One throughput and one failure-rate chart per queue; this queue's show its completions and failures.
    await row.locator('svg[data-chart="throughput"] rect').first().waitFor({ timeout: 10_000 });
    await row.locator('svg[data-chart="failure"] rect').first().waitFor();
    for (const r of [row, page.locator(`tr[data-queue="${reports.name}"]`)]) {
      expect(await r.locator('svg[data-chart="throughput"]').count()).toBe(1);
      expect(await r.locator('svg[data-chart="failure"]').count()).toBe(1);
    }
    expect(await row.locator('[data-total="completed"]').textContent()).toBe(' 8/h');
    expect(await row.locator('[data-total="failure"]').textContent()).toBe(' 27.3%'); // 3 of 11 attempts
    expect(await page.locator('tr[data-queue] svg').count()).toBe(
      2 * (await page.locator('tr[data-queue]').count()),
    );
    // A screenshot renders; the README's pictures come from `npm run screenshots` (tests never write docs/).
    const shot = await page.screenshot({ fullPage: true, path: join(shots, 'overview.png') });
    expect(shot.length).toBeGreaterThan(1_000);

    await row.locator('[data-count="dead"] a').click();
    await page.locator(`tr[data-job="${id}"] a`).click();
    await expect.poll(() => page.locator('#job-id').textContent()).toBe(id);
    expect(await page.locator('#job-data').textContent()).toContain(XSS);
    await page.getByText('smtp refused the message').first().waitFor();
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.locator('script').count()).toBe(1);

    await page.locator('button[data-action="retry"]').click();
    await page.locator('dd [data-state="completed"]').waitFor({ timeout: 15_000 });
    expect(await page.locator('#job-result').textContent()).toContain('"delivered": true');
    expect((await q.getJob(id))?.state).toBe('completed');
    expect(dialogs).toEqual([]);
    expect(pageErrors).toEqual([]);
  });

  it('the queue view follows counts live and resumes a paused queue from the page', async () => {
    const reports = queues[1]!;
    await page.goto(`${url}#/queue/${encodeURIComponent(reports.name)}?state=waiting`);
    await page.locator('button[data-action="resume"]').click();
    await page.locator('button[data-action="pause"]').waitFor();
    expect(await reports.isPaused()).toBe(false);
    await reports.pause();
    await reports.add({ n: 4 });
    await page.locator('nav.tabs [data-count="waiting"]', { hasText: '3' }).waitFor({ timeout: 10_000 });
    expect(dialogs).toEqual([]);
  });

  it('the Clean button empties the dead tab', async () => {
    const q = new Queue(uniqueName('cleanup'), { connection: fx.url });
    queues.push(q);
    for (let i = 0; i < 3; i++) await q.cancel((await q.add({ i })).id);
    await page.goto(`${url}#/queue/${encodeURIComponent(q.name)}?state=dead`);
    await expect.poll(() => page.locator('#jobs tbody tr').count()).toBe(3);
    const clean = page.locator('button[data-action="clean"]');
    await clean.click(); // arms it
    await clean.click(); // confirms
    await page.getByText('removed 3 dead jobs').waitFor();
    await page.locator('nav.tabs [data-count="dead"]', { hasText: '0' }).waitFor();
    expect(await page.locator('#jobs tbody tr').count()).toBe(0);
    expect(await page.locator('button[data-action="clean"]').count()).toBe(0);
    expect((await q.counts()).dead).toBe(0);
    expect(dialogs).toEqual([]);
  });

  it("the job page says why a job isn't running: the DELAYED reason with its due time", async () => {
    const q = new Queue(uniqueName('later'), { connection: fx.url });
    queues.push(q);
    const { id } = await q.add({ n: 1 }, { delayMs: 3_600_000 });
    const due = new Date((await q.getJob(id))!.runAt).toISOString();
    await page.goto(`${url}#/queue/${encodeURIComponent(q.name)}/job/${encodeURIComponent(id)}`);
    const delayed = page.locator('#job-why li[data-reason="DELAYED"]');
    await delayed.waitFor({ timeout: 10_000 });
    await page.getByRole('heading', { name: "Why isn't it running?" }).waitFor();
    expect(await delayed.textContent()).toContain(`DELAYED delayed: due at ${due}`);
    expect(await page.locator('#job-why li[data-reason="NO_WORKERS"]').textContent()).toContain(
      'no worker of this queue is alive',
    );
    expect(dialogs).toEqual([]);
    expect(pageErrors).toEqual([]);
  });

  it('the queue page lists groups by backlog; a group page shows its jobs, and its form sets an override', async () => {
    const q = new Queue(uniqueName('groups'), { connection: fx.url });
    queues.push(q);
    await q.addBulk([
      ...Array.from({ length: 3 }, (_, n) => ({ data: { n }, opts: { group: 'tenant-a', id: `a${n}` } })),
      { data: {}, opts: { group: 'tenant-b', id: 'b0' } },
    ]);
    await page.goto(`${url}#/queue/${encodeURIComponent(q.name)}`);
    const rows = page.locator('#groups tbody tr');
    await rows.first().waitFor();
    expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-group')))).toEqual([
      'tenant-a',
      'tenant-b',
    ]);
    expect(await page.locator('#groups tr[data-group="tenant-a"]').textContent()).toContain('3');
    await page.locator('#groups a', { hasText: 'tenant-a' }).click();
    await page.locator('#group-jobs tr[data-job="a0"]').waitFor();
    expect(await page.locator('#group-override').textContent()).toContain('none (inherits the defaults)');
    await page.locator('#group-form input[name="concurrency"]').fill('1');
    await page.locator('#group-form button[type="submit"]').click();
    await page.locator('#group-limits', { hasText: 'concurrency 1' }).waitFor();
    expect(await q.getGroupLimits({ group: 'tenant-a' })).toMatchObject({
      concurrency: 1,
      override: { concurrency: 1 },
    });
    expect(dialogs).toEqual([]);
    expect(pageErrors).toEqual([]);
  });

  it("the queue page's forms change the group defaults and the rate limit; the groups table follows", async () => {
    const q = new Queue(uniqueName('limits'), { connection: fx.url });
    queues.push(q);
    await q.add({}, { group: 'tenant-x', id: 'x0' });
    await q.setGroupLimits({ rateLimit: { max: 10, durationMs: 1000 } });
    await q.setRateLimit({ max: 100, durationMs: 1000 });
    await page.goto(`${url}#/queue/${encodeURIComponent(q.name)}`);
    const row = page.locator('#groups tr[data-group="tenant-x"]');
    await row.waitFor();
    expect(await row.textContent()).toContain('no concurrency limit, 10 per 1000 ms');
    await page.locator('#group-defaults-form input[name="concurrency"]').fill('2');
    await page.locator('#group-defaults-form button[type="submit"]').click();
    // Only concurrency was filled: the default rate limit stays (the API merges into what is stored).
    await page
      .locator('#groups tr[data-group="tenant-x"]', { hasText: 'concurrency 2, 10 per 1000 ms' })
      .waitFor();
    expect(await page.locator('#group-defaults').textContent()).toContain('concurrency 2, 10 per 1000 ms');
    expect(await q.getGroupLimits()).toEqual({ concurrency: 2, rateLimit: { max: 10, durationMs: 1000 } });
    // An empty rate form is refused with a message, and the stored limit stays.
    await page.locator('#rate-form button[type="submit"]').click();
    await page.locator('.flash.bad', { hasText: 'max is required' }).waitFor();
    expect(await q.getRateLimit()).toEqual({ max: 100, durationMs: 1000 });
    await page.locator('#rate-form input[name="max"]').fill('5');
    await page.locator('#rate-form input[name="durationMs"]').fill('2000');
    await page.locator('#rate-form button[type="submit"]').click();
    await page.locator('#rate-limit', { hasText: '5 starts per 2000 ms' }).waitFor();
    expect(await q.getRateLimit()).toEqual({ max: 5, durationMs: 2000 });
    expect(dialogs).toEqual([]);
    expect(pageErrors).toEqual([]);
  });

  it('searches a job by id from the queue view and shows a 404 as a message', async () => {
    await page.goto(`${url}#/queue/${encodeURIComponent(name)}?state=completed`);
    // A hash change renders the view asynchronously: filling the previous view's search box would be
    // lost when the new view replaces it, so wait for the completed tab to be the selected one.
    await page.locator('a.on[data-tab="completed"]').waitFor();
    await page.locator('input[name="id"]').fill('no-such-job');
    await page.locator('#job-search button[type="submit"]').click();
    await page.getByText('ERR_JOB_NOT_FOUND').waitFor();
    expect(dialogs).toEqual([]);
  });
});
