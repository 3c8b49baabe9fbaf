/**
 * The dashboard's operator endpoints (issue 16) over real HTTP: newest-first job pages, the worker of
 * each active job, bulk actions with per-id results (bounded, CSRF, read-only), search by id and by
 * data, latency and throughput, long metrics windows and the retention option, and the Redis panel's
 * info with its persistence warning (this file's redis-server runs without AOF).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createDashboard,
  type Dashboard,
  type DashboardOptions,
  toNodeListener,
} from '../../src/dashboard/index.js';
import { MAX_BULK_IDS } from '../../src/dashboard/ops-api.js';
import { Queue, Worker } from '../../src/index.js';
import { ACL_MODE, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const closers: (() => Promise<unknown>)[] = [];

async function serve(opts: Omit<DashboardOptions, 'connection'> = {}) {
  const dashboard: Dashboard = createDashboard({ connection: fx.url, ...opts });
  const server: Server = createServer(toNodeListener(dashboard));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await dashboard.close();
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    dashboard,
    async get(path: string) {
      const res = await fetch(`${url}${path}`);
      return { status: res.status, body: await res.json() };
    },
    async post(path: string, csrf = dashboard.csrfToken) {
      const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'x-surety-csrf': csrf } });
      return { status: res.status, body: await res.json() };
    },
  };
}

function queue(): Queue<{ n: number; user?: string }> {
  const q = new Queue<{ n: number; user?: string }>(uniqueName(), { connection: fx.url });
  closers.push(() => q.close());
  return q;
}

afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

describe('dashboard operator API', () => {
  it('pages jobs newest first with order=desc and refuses another order', async () => {
    const d = await serve();
    const q = queue();
    await q.addBulk(Array.from({ length: 5 }, (_, n) => ({ data: { n }, opts: { id: `j${n}` } })));
    const page = await d.get(`/api/queues/${q.name}/jobs?state=waiting&order=desc&limit=2&offset=1`);
    expect(page.body).toMatchObject({ order: 'desc', offset: 1, limit: 2, total: 5 });
    expect(page.body.jobs.map((j: { id: string }) => j.id)).toEqual(['j3', 'j2']);
    const asc = await d.get(`/api/queues/${q.name}/jobs?state=waiting&limit=2`);
    expect(asc.body.jobs.map((j: { id: string }) => j.id)).toEqual(['j0', 'j1']);
    const bad = await d.get(`/api/queues/${q.name}/jobs?order=sideways`);
    expect(bad).toMatchObject({ status: 400, body: { error: { code: 'ERR_INVALID_OPTION' } } });
  });

  it('shows the worker running each active job, with its start time', async () => {
    const d = await serve();
    const q = queue();
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const w = new Worker(q.name, () => held, { connection: fx.url, heartbeatMs: 200 });
    closers.push(() => w.close());
    await q.add({ n: 1 }, { id: 'busy' });
    const active = await waitUntil(async () => {
      const r = await d.get(`/api/queues/${q.name}/jobs?state=active`);
      return r.body.jobs[0]?.worker ? r.body.jobs[0] : null;
    }, 'the active job with its worker');
    expect(active.id).toBe('busy');
    expect(active.startedAt).toBeGreaterThan(0);
    const [me] = await q.workers();
    expect(active.worker).toEqual({ id: me!.id, host: me!.host, pid: me!.pid });
    release();
  });

  it('bulk actions report a result per id; bounded ids, CSRF and read-only apply', async () => {
    const d = await serve();
    const q = queue();
    for (let n = 0; n < 3; n++) await q.cancel((await q.add({ n }, { id: `dead${n}` })).id);
    await q.add({ n: 9 }, { id: 'later', delayMs: 60_000 });
    const retried = await d.post(`/api/queues/${q.name}/bulk/retry?id=dead0&id=dead1&id=nope`);
    expect(retried.status).toBe(200);
    expect(retried.body.results).toEqual([
      { id: 'dead0', ok: true },
      { id: 'dead1', ok: true },
      { id: 'nope', ok: false, code: 'ERR_JOB_NOT_FOUND', message: expect.any(String) },
    ]);
    expect((await q.counts()).waiting).toBe(2);
    const promoted = await d.post(`/api/queues/${q.name}/bulk/promote?id=later`);
    expect(promoted.body.results).toEqual([{ id: 'later', ok: true }]);
    expect((await q.getJob('later'))!.state).toBe('waiting');
    const removed = await d.post(`/api/queues/${q.name}/bulk/remove?id=dead2&id=later`);
    expect(removed.body.results.every((r: { ok: boolean }) => r.ok)).toBe(true);
    expect(await q.getJob('dead2')).toBeNull();
    const cancelled = await d.post(`/api/queues/${q.name}/bulk/cancel?id=dead0`);
    expect((await q.getJob('dead0'))!.state).toBe('dead');
    expect(cancelled.body.results).toEqual([{ id: 'dead0', ok: true }]);

    // At the maximum: every id answered (here none exists), in order.
    const atMax = Array.from({ length: MAX_BULK_IDS }, (_, i) => `id=x${i}`).join('&');
    const answered = await d.post(`/api/queues/${q.name}/bulk/remove?${atMax}`);
    expect(answered.body.results).toHaveLength(MAX_BULK_IDS);
    expect(answered.body.results[99]).toMatchObject({ id: 'x99', ok: false, code: 'ERR_JOB_NOT_FOUND' });
    const tooMany = Array.from({ length: MAX_BULK_IDS + 1 }, (_, i) => `id=x${i}`).join('&');
    const refused = await d.post(`/api/queues/${q.name}/bulk/remove?${tooMany}`);
    expect(refused).toMatchObject({ status: 400, body: { error: { code: 'ERR_INVALID_OPTION' } } });
    expect(refused.body.error.message).toContain(
      `1 to ${MAX_BULK_IDS} id parameters, got ${MAX_BULK_IDS + 1}`,
    );
    expect((await d.post(`/api/queues/${q.name}/bulk/explode?id=dead1`)).status).toBe(400);
    expect((await d.post(`/api/queues/${q.name}/bulk/remove?id=dead1`, 'wrong')).status).toBe(403);
    const ro = await serve({ readOnly: true });
    expect((await ro.post(`/api/queues/${q.name}/bulk/remove?id=dead1`)).body.error.code).toBe(
      'ERR_READ_ONLY',
    );
    expect(await q.getJob('dead1')).not.toBeNull();
  });

  it('searches by exact id (any state) and by data over a bounded scan', async () => {
    const d = await serve();
    const q = queue();
    await q.addBulk(
      Array.from({ length: 12 }, (_, n) => ({
        data: { n, user: n % 4 === 0 ? 'ada' : 'bob' },
        opts: { id: `j${n}` },
      })),
    );
    const byId = await d.get(`/api/queues/${q.name}/search?id=j7`);
    expect(byId.body).toMatchObject({ by: 'id', jobs: [{ id: 'j7' }] });
    expect((await d.get(`/api/queues/${q.name}/search?id=j77`)).body.jobs).toEqual([]);
    const text = await d.get(`/api/queues/${q.name}/search?state=waiting&q=ADA`);
    expect(text.body.jobs.map((j: { id: string }) => j.id)).toEqual(['j8', 'j4', 'j0']);
    expect(text.body).toMatchObject({ by: 'data', scan: 1000, scanned: 12, more: false });
    const field = await d.get(`/api/queues/${q.name}/search?field=n&value=5`);
    expect(field.body.jobs.map((j: { id: string }) => j.id)).toEqual(['j5']);
    const bounded = await d.get(`/api/queues/${q.name}/search?q=ada&scan=4`);
    expect(bounded.body).toMatchObject({ scanned: 4, more: true });
    expect(bounded.body.jobs.map((j: { id: string }) => j.id)).toEqual(['j8']);
    const tooWide = await d.get(`/api/queues/${q.name}/search?q=ada&scan=10001`);
    expect(tooWide).toMatchObject({ status: 400, body: { error: { code: 'ERR_INVALID_OPTION' } } });
  });

  it('stats give the oldest waiting job and completions per minute', async () => {
    const d = await serve();
    const q = queue();
    await q.add({ n: 1 }, { id: 'old' });
    const s = await d.get(`/api/queues/${q.name}/stats`);
    expect(s.body).toMatchObject({ queue: q.name, oldestWaiting: { id: 'old' }, completedPerMinute: 0 });
    expect(s.body.oldestWaiting.ageMs).toBeGreaterThanOrEqual(0);
  });

  it('serves metrics windows beyond an hour in wider buckets, and sets the retention', async () => {
    const d = await serve();
    const q = queue();
    await q.cancel((await q.add({ n: 1 })).id);
    const week = await d.get(`/api/queues/${q.name}/metrics?windowMs=604800000&bucketMs=10080000`);
    expect(week.body).toMatchObject({ bucketMs: 10_080_000, dead: 1, retentionMs: 3_600_000 });
    expect(week.body.buckets).toHaveLength(60);
    const set = await d.post(`/api/queues/${q.name}/metrics-retention?retentionMs=86400000`);
    expect(set.body).toEqual({ ok: true, queue: q.name, retentionMs: 86_400_000 });
    expect((await q.metrics()).retentionMs).toBe(86_400_000);
    const bad = await d.post(`/api/queues/${q.name}/metrics-retention?retentionMs=999999999`);
    expect(bad.status).toBe(400);
  });

  it('the metricsRetentionMs option applies to each queue the dashboard lists', async () => {
    const q = queue();
    await q.add({ n: 1 });
    expect(() => createDashboard({ connection: fx.url, metricsRetentionMs: 30_000 })).toThrow(
      /metricsRetentionMs must be a whole number of minutes from 60000 to 604800000 ms, got 30000/,
    );
    const d = await serve({ metricsRetentionMs: 6 * 3_600_000 });
    await d.get('/api/queues');
    await waitUntil(
      async () => (await q.metrics()).retentionMs === 21_600_000,
      'the retention to be applied',
    );
  });

  it('GET /api/redis shows version, memory, clients, persistence and warns when AOF is off', async () => {
    const d = await serve();
    const { status, body } = await d.get('/api/redis');
    expect(status).toBe(200);
    expect(body).toMatchObject({ appendonly: false, maxMemoryPolicy: 'noeviction', maxMemory: 0 });
    expect(body.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(body.usedMemory).toBeGreaterThan(0);
    expect(body.connectedClients).toBeGreaterThan(0);
    expect(body.warnings[0]).toMatchObject({ code: ACL_MODE ? 'NO_AOF' : 'NO_PERSISTENCE', level: 'danger' });
    expect(body.warnings).toHaveLength(ACL_MODE ? 2 : 1);
  });
});
