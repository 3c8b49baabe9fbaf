/**
 * The operator features of the dashboard page (issue 16) in a real headless Chromium
 * (/usr/bin/chromium via playwright-core): newest-first lists with a pager labelled Newer/Older, bulk
 * and per-row actions, search by data with its bound stated, relative times with the UTC time on
 * hover, the active job's worker and running time, latency and chart ranges, the Redis warning (this
 * file's redis-server runs without AOF), and no horizontal page scroll at 390 px. Screenshots go to a
 * temp dir only.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue, Worker } from '../../src/index.js';
import {
  CHROMIUM,
  launchChromium,
  type ServedDashboard,
  serveDashboard,
} from '../helpers/dashboard-browser.js';
import { uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const suite = existsSync(CHROMIUM) ? describe : describe.skip;

suite(`dashboard operator features in headless Chromium (${CHROMIUM})`, () => {
  let browser: Browser;
  let page: Page;
  let served: ServedDashboard;
  let url: string;
  const closers: (() => Promise<unknown>)[] = [];
  const pageErrors: string[] = [];
  const shots = mkdtempSync(join(tmpdir(), 'surety-e2e-ops-'));

  function queue(label: string): Queue {
    const q = new Queue(uniqueName(label), { connection: fx.url });
    closers.push(() => q.close());
    return q;
  }
  const ids = () =>
    page.locator('#jobs tbody tr').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-job')));

  beforeAll(async () => {
    served = await serveDashboard({ connection: fx.url, eventsIntervalMs: 300 });
    url = served.url;
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1200, height: 700 } });
    page.on('pageerror', (err) => pageErrors.push(err.message));
  });

  afterAll(async () => {
    await browser?.close();
    for (const close of closers.reverse()) await close();
    await served?.close();
    rmSync(shots, { recursive: true, force: true });
  });

  it('lists jobs newest first; the pager says Newer/Older and counts "1-25 of N"', async () => {
    const q = queue('pager');
    for (let n = 0; n < 30; n++)
      await q.cancel((await q.add({ n }, { id: `d${String(n).padStart(2, '0')}` })).id);
    await page.goto(`${url}#/queue/${encodeURIComponent(q.name)}?state=dead`);
    await page.locator('a.on[data-tab="dead"]').waitFor();
    await expect.poll(ids).toHaveLength(25);
    expect((await ids()).slice(0, 3)).toEqual(['d29', 'd28', 'd27']);
    expect(await page.locator('#page-range').textContent()).toBe('1-25 of 30, newest first');
    expect(await page.locator('#pager a[rel="prev"]').count()).toBe(0);
    await page.locator('#pager a[rel="next"]', { hasText: 'Older' }).click();
    await expect.poll(ids).toEqual(['d04', 'd03', 'd02', 'd01', 'd00']);
    expect(await page.locator('#page-range').textContent()).toBe('26-30 of 30, newest first');
    expect(await page.locator('#pager a[rel="next"]').count()).toBe(0);
    expect(await page.locator('#pager a[rel="prev"]').textContent()).toBe('< Newer');
    expect(pageErrors).toEqual([]);
  });

  it('selects jobs (one by one, or all) and retries them in bulk; a row action removes one job', async () => {
    const q = queue('bulk');
    for (let n = 0; n < 4; n++) await q.cancel((await q.add({ n }, { id: `b${n}` })).id);
    await page.goto(`${url}#/queue/${encodeURIComponent(q.name)}?state=dead`);
    await expect.poll(ids).toEqual(['b3', 'b2', 'b1', 'b0']);
    await page.locator('tr[data-job="b3"] input[type="checkbox"]').check();
    await page.locator('tr[data-job="b1"] input[type="checkbox"]').check();
    expect(await page.locator('#selected-count').textContent()).toBe('2 selected');
    await page.locator('button[data-bulk="retry"]').click();
    await page.locator('#flash', { hasText: 'retry: 2 done' }).waitFor();
    await expect.poll(ids).toEqual(['b2', 'b0']);
    expect((await q.getJob('b3'))!.state).toBe('waiting');
    expect((await q.getJob('b1'))!.state).toBe('waiting');
    // Select all, then deselect: the bulk buttons follow the selection.
    await page.locator('#select-all').check();
    expect(await page.locator('#jobs tbody input[type="checkbox"]:checked').count()).toBe(2);
    expect(await page.locator('#selected-count').textContent()).toBe('2 selected');
    await page.locator('#select-all').uncheck();
    expect(await page.locator('button[data-bulk="remove"]').isDisabled()).toBe(true);
    // A row's own Remove: armed by a first click, done by the second.
    const remove = page.locator('tr[data-job="b0"] button[data-action="remove"]');
    await remove.click();
    await remove.click();
    await expect.poll(ids).toEqual(['b2']);
    expect(await q.getJob('b0')).toBeNull();
    // Retried jobs show attempts made and the fresh budget left, not attempts/maxAttempts.
    await page.goto(`${url}#/queue/${encodeURIComponent(q.name)}?state=waiting`);
    await expect.poll(ids).toEqual(['b1', 'b3']);
    expect(await page.locator('tr[data-job="b3"] td.num').first().textContent()).toBe('0 (3 left)');
    expect(pageErrors).toEqual([]);
  });

  it('searches job data by text and by field=value, stating how many jobs it looks at', async () => {
    const q = queue('search');
    await q.addBulk(
      Array.from({ length: 9 }, (_, n) => ({
        data: { user: { id: n % 3, name: n % 3 === 1 ? 'Ada' : 'Bob' } },
        opts: { id: `s${n}` },
      })),
    );
    await page.goto(`${url}#/queue/${encodeURIComponent(q.name)}?state=waiting`);
    // The hash route may change while the previous queue's waiting tab is still shown: wait for this one.
    await expect
      .poll(() => page.locator('#search-bound').textContent())
      .toBe('looks at the newest 9 of 9 waiting jobs (at most 1,000)');
    await page.locator('#data-search input[name="q"]').fill('ada');
    await page.locator('#data-search button[type="submit"]').click();
    await page.locator('#search-summary', { hasText: '3 matches in the 9 newest waiting jobs' }).waitFor();
    expect(await ids()).toEqual(['s7', 's4', 's1']);
    await page.locator('#data-search input[name="q"]').fill('user.id=2');
    await page.locator('#data-search button[type="submit"]').click();
    await page.locator('#search-summary', { hasText: '3 matches' }).waitFor();
    await expect.poll(ids).toEqual(['s8', 's5', 's2']);
    expect(pageErrors).toEqual([]);
  });

  it('shows relative times with the absolute UTC time on hover, UTC stated once, and active jobs with worker and running time', async () => {
    const q = queue('times');
    const { id } = await q.add({ n: 1 }, { delayMs: 3_600_000 });
    const runAt = (await q.getJob(id))!.runAt;
    await page.goto(`${url}#/queue/${encodeURIComponent(q.name)}?state=delayed`);
    const due = page.locator(`tr[data-job="${id}"] time[data-at="${runAt}"]`);
    await due.waitFor();
    expect(await due.textContent()).toMatch(/^in (59 min|1 h)$/);
    const utc = new Date(runAt)
      .toISOString()
      .replace('T', ' ')
      .replace(/\.\d+Z$/, 'Z');
    expect(await due.getAttribute('title')).toBe(utc);
    expect(await page.locator('#tz').textContent()).toBe('times in UTC');
    expect(await page.getByText('times in UTC').count()).toBe(1);

    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const w = new Worker(q.name, () => held, { connection: fx.url, heartbeatMs: 200 });
    closers.push(() => w.close());
    await q.promote(id);
    await waitUntil(
      async () => (await q.workers())[0]?.activeJobIds.includes(id),
      'the worker to report the job',
    );
    const [me] = await q.workers();
    await page.goto(`${url}#/queue/${encodeURIComponent(q.name)}?state=active`);
    const row = page.locator(`tr[data-job="${id}"]`);
    await row.locator(`[data-worker="${me!.id}"]`).waitFor();
    expect(await row.locator('[data-worker]').textContent()).toBe(`${me!.host}:${me!.pid}`);
    expect(await row.locator('[data-since]').textContent()).toMatch(/^\d+ s$/);
    expect(await row.locator('time').textContent()).toMatch(/ago$|^now$/);
    await row.locator('a').first().click();
    await page.locator('#job-worker').waitFor();
    expect(await page.locator('#job-worker').textContent()).toBe(`${me!.host}:${me!.pid}`);
    expect(await page.locator('#job-worker').getAttribute('title')).toBe(me!.id);
    release();
    expect(pageErrors).toEqual([]);
  });

  it('the overview shows latency, throughput, chart ranges and warns that Redis runs without AOF', async () => {
    const q = queue('overview');
    await q.add({ n: 1 }, { id: 'waits' });
    await page.goto(url);
    const warning = page.locator('#redis [data-warning="NO_PERSISTENCE"]');
    await warning.waitFor({ timeout: 10_000 });
    expect(await warning.textContent()).toContain('Jobs can be lost: appendonly is no');
    expect(await page.locator('#redis dd[data-fact="appendonly"]').textContent()).toBe('no');
    expect(await page.locator('#redis dd[data-fact="maxmemory-policy"]').textContent()).toBe('noeviction');
    const row = page.locator(`tr[data-queue="${q.name}"]`);
    await row.locator('[data-latency] a').waitFor({ timeout: 10_000 });
    expect(await row.locator('[data-latency] a').getAttribute('href')).toContain('/job/waits');
    expect(await row.locator('[data-rate]').textContent()).toBe('0');
    // 1 h is the default retention: longer ranges than that are offered only within it.
    expect(await page.locator('#range button[data-range="7d"]').isDisabled()).toBe(true);
    await q.setMetricsRetention(24 * 3_600_000);
    await page.reload();
    const six = page.locator('#range button[data-range="6h"]');
    await expect.poll(() => six.isDisabled(), { timeout: 15_000 }).toBe(false);
    const asked = page.waitForRequest((r) => r.url().includes('windowMs=21600000&bucketMs=360000'));
    await six.click();
    await asked;
    await page.locator('#queues th', { hasText: 'throughput, 6h' }).waitFor();
    expect(await page.locator('#range button.on').textContent()).toBe('6h');
    expect(pageErrors).toEqual([]);
  });

  it('has no horizontal page scroll at 390 px on the overview, a queue and a job', async () => {
    const q = queue('narrow-queue-with-a-long-name');
    await q.cancel((await q.add({ text: 'x'.repeat(300) }, { id: `job-${'y'.repeat(80)}` })).id);
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 } });
    phone.on('pageerror', (err) => pageErrors.push(err.message));
    try {
      const width = () => phone.evaluate(() => document.scrollingElement!.scrollWidth);
      await phone.goto(url);
      await phone.locator(`tr[data-queue="${q.name}"]`).waitFor({ timeout: 10_000 });
      await phone.locator('#redis').waitFor({ timeout: 10_000 });
      expect(await width()).toBeLessThanOrEqual(390);
      await phone.goto(`${url}#/queue/${encodeURIComponent(q.name)}?state=dead`);
      await phone.locator('#jobs tbody tr').first().waitFor();
      expect(await width()).toBeLessThanOrEqual(390);
      await phone.screenshot({ fullPage: true, path: join(shots, 'queue-390.png') });
      await phone.goto(
        `${url}#/queue/${encodeURIComponent(q.name)}/job/${encodeURIComponent(`job-${'y'.repeat(80)}`)}`,
      );
      await phone.locator('#job-id').waitFor();
      expect(await width()).toBeLessThanOrEqual(390);
    } finally {
      await phone.close();
    }
    expect(pageErrors).toEqual([]);
  });
});
