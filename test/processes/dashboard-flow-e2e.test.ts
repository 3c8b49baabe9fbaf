/**
 * The flow on a job's page in a real headless Chromium (Debian's /usr/bin/chromium through
 * playwright-core): a workflow over two queues drawn as links with states, a diamond's join drawn
 * once, and a flow link followed to another queue's job page. And the route behind it,
 * GET /api/queues/:q/jobs/:id/flow.
 */
import { existsSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue } from '../../src/index.js';
import {
  CHROMIUM,
  launchChromium,
  type ServedDashboard,
  serveDashboard,
} from '../helpers/dashboard-browser.js';
import { uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const suite = existsSync(CHROMIUM) ? describe : describe.skip;

suite(`a job's flow in headless Chromium (${CHROMIUM}; skipped only when it is not installed)`, () => {
  let browser: Browser;
  let page: Page;
  let served: ServedDashboard;
  const pageErrors: string[] = [];
  let a: Queue;
  let b: Queue;

  beforeAll(async () => {
    // Here, not in the suite's body: the private server's URL is known once its beforeAll ran.
    a = new Queue(uniqueName('flow-a'), { connection: fx.url });
    b = new Queue(uniqueName('flow-b'), { connection: fx.url });
    served = await serveDashboard({ connection: fx.url });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
    page.on('pageerror', (err) => pageErrors.push(err.message));
    // extract -> (transform [b], check) -> load: a diamond over two queues.
    await a.add({}, { id: 'extract', name: 'extract' });
    await b.add({}, { id: 'transform', dependsOn: [{ queue: a.name, id: 'extract' }] });
    await a.add({}, { id: 'check', dependsOn: ['extract'] });
    await a.add({}, { id: 'load', dependsOn: ['check', { queue: b.name, id: 'transform' }] });
  });

  afterAll(async () => {
    await browser?.close();
    await a?.close();
    await b?.close();
    await served?.close();
  });

  it('serves the flow at /api/queues/:q/jobs/:id/flow, 404 for an unknown job, 400 for a bad maxNodes', async () => {
    const base = `${served.url}api/queues/${a.name}/jobs`;
    const ok = await fetch(`${base}/load/flow?maxNodes=10000`);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual(await a.flow('load'));
    const cut = (await (await fetch(`${base}/load/flow?maxNodes=2`)).json()) as { truncated: boolean };
    expect(cut.truncated).toBe(true);
    const missing = await fetch(`${base}/nope/flow`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('ERR_JOB_NOT_FOUND');
    const bad = await fetch(`${base}/load/flow?maxNodes=10001`);
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(
      /maxNodes must be an integer from 1 to 10000/,
    );
  });

  it("draws the flow on the job's page, each job a link with its state, and follows one to another queue", async () => {
    await page.goto(`${served.url}#/queue/${a.name}/job/load`);
    const flow = page.locator('#job-flow');
    await flow.waitFor({ timeout: 10_000 });
    const node = (queue: string, id: string) => flow.locator(`a[data-flow-node="${queue}/${id}"]`);
    // The join is drawn once, then referred to: two links to it, one "(see above)".
    expect(await node(a.name, 'load').count()).toBe(2);
    expect(await flow.getByText('(see above)').count()).toBe(1);
    expect(await node(a.name, 'extract').count()).toBe(1);
    const transform = node(b.name, 'transform');
    expect(await transform.textContent()).toBe(`transform [${b.name}]`);
    // Each node carries its state, in the badge beside its link.
    const state = (link: ReturnType<typeof node>) =>
      link
        .first()
        .locator('xpath=following-sibling::span[contains(@class, "badge")][1]')
        .getAttribute('data-state');
    expect(await state(node(a.name, 'extract'))).toBe('waiting');
    expect(await state(transform)).toBe('blocked');
    await transform.click();
    await expect.poll(() => page.locator('#job-id').textContent()).toBe('transform');
    expect(page.url()).toContain(`#/queue/${b.name}/job/transform`);
    // The other queue's page draws the same flow, with that job as its root.
    await page.locator('#job-flow strong a[data-flow-node]').waitFor();
    expect(await page.locator('#job-flow strong a').textContent()).toBe('transform');
    expect(pageErrors).toEqual([]);
  });
});
