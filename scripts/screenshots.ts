/**
 * `npm run screenshots`: refreshes the dashboard's pictures in docs/ (dashboard.png, the README's;
 * dashboard-queue.png; and both at 390 px wide, -mobile.png) from a real page in headless Chromium
 * (/usr/bin/chromium) over a private redis-server with sample queues. Tests never write docs/: this
 * script is the only writer, run by hand when the page changes.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Page } from 'playwright-core';
import { createDashboard, toNodeListener } from '../src/dashboard/index.js';
import { EmbeddedRedis, Queue, UnrecoverableError, Worker } from '../src/index.js';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const docs = (f: string) => fileURLToPath(new URL(`../docs/${f}`, import.meta.url));

async function until(probe: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'surety-shots-'));
  // everysec: the usual production trade-off, so the Redis panel shows its note.
  const redis = await new EmbeddedRedis({ dir, aof: 'everysec' }).start();
  const connection = redis.url;
  const emails = new Queue<{ to: string; subject?: string; fail?: boolean }>('emails', { connection });
  const reports = new Queue<{ report: string }>('reports', { connection });
  let release!: () => void;
  const held = new Promise<void>((r) => {
    release = r;
  });
  const worker = new Worker<{ to: string; subject?: string; fail?: boolean; hold?: boolean }>(
    'emails',
    async (job) => {
      if (job.data.hold) return held;
      if (job.data.fail) throw new UnrecoverableError(`550 mailbox ${job.data.to} unavailable`);
      if (job.attempt === 1 && job.id.endsWith('3')) throw new Error('421 try again later');
    },
    { connection, concurrency: 4 },
  );
  await emails.setMetricsRetention(24 * 3_600_000);
  await emails.addBulk(
    Array.from({ length: 40 }, (_, i) => ({
      data: { to: `user${i}@example.com`, subject: 'Your receipt', fail: i % 9 === 0 },
      opts: { id: `mail-${i}`, maxAttempts: 2, backoff: { type: 'fixed' as const, delayMs: 0 } },
    })),
  );
  await until(async () => (await emails.counts()).completed + (await emails.counts()).dead === 40, 'emails');
  await emails.add({ to: 'ops@example.com', hold: true } as never, { id: 'mail-digest' });
  await emails.addBulk(
    Array.from({ length: 3 }, (_, i) => ({
      data: { to: `later${i}@example.com` },
      opts: { id: `mail-later-${i}`, delayMs: 3_600_000 * (i + 1) },
    })),
  );
  await reports.addBulk(Array.from({ length: 6 }, (_, i) => ({ data: { report: `daily-${i}` } })));
  await reports.pause();

  const dashboard = createDashboard({ connection, eventsIntervalMs: 500 });
  const server = createServer(toNodeListener(dashboard));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
    ],
  });
  try {
    await until(async () => (await emails.getJobs('active'))[0]?.id === 'mail-digest', 'the active job');
    for (const [width, suffix] of [
      [1200, ''],
      [390, '-mobile'],
    ] as const) {
      const page: Page = await browser.newPage({ viewport: { width, height: 800 } });
      await page.goto(url);
      await page.locator('tr[data-queue="emails"] svg[data-chart="throughput"] rect').first().waitFor();
      await page.locator('#redis dd[data-fact="version"]').waitFor();
      await page.locator('tr[data-queue="reports"] [data-latency] a').waitFor();
      writeFileSync(docs(`dashboard${suffix}.png`), await page.screenshot({ fullPage: true }));
      await page.goto(`${url}#/queue/emails?state=dead`);
      await page.locator('#jobs tbody tr').first().waitFor();
      await page.locator('#jobs tbody input[type="checkbox"]').nth(0).check();
      await page.locator('#jobs tbody input[type="checkbox"]').nth(1).check();
      writeFileSync(docs(`dashboard-queue${suffix}.png`), await page.screenshot({ fullPage: true }));
      await page.close();
    }
  } finally {
    await browser.close();
    release();
    await worker.close();
    await emails.close();
    await reports.close();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await dashboard.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
