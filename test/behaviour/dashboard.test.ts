/**
 * The dashboard's HTTP API, security and metrics, through real HTTP requests to the handler mounted on
 * node:http (random port) against a private redis-server.
 */
import { spawn } from 'node:child_process';
import { createServer, get as httpGet, type Server } from 'node:http';
import { type AddressInfo, connect as tcpConnect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_LIMIT, MAX_OFFSET } from '../../src/dashboard/api.js';
import {
  createDashboard,
  type Dashboard,
  type DashboardOptions,
  isLoopbackHost,
  MAX_EVENT_STREAMS,
  MAX_URL_LENGTH,
  toNodeListener,
  workerMetrics,
} from '../../src/dashboard/index.js';
import { QueueRegistry } from '../../src/dashboard/queues.js';
import { ClosedError, Queue, UnrecoverableError, Worker } from '../../src/index.js';
import { runScript, scripts } from '../../src/scripts/specs.js';
import { claimArgs } from '../helpers/claim-args.js';
import { uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const BIN = fileURLToPath(new URL('../../bin/surety.js', import.meta.url));
const XSS = '<script>alert(1)</script>';

interface Served {
  dashboard: Dashboard;
  url: string;
  server: Server;
}

const served: Served[] = [];
const closers: (() => Promise<unknown>)[] = [];

async function serve(opts: Omit<DashboardOptions, 'connection'> = {}): Promise<Served> {
  const dashboard = createDashboard({ connection: fx.url, ...opts });
  const server = createServer(toNodeListener(dashboard));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const s = { dashboard, server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
  served.push(s);
  return s;
}

function queue(name = uniqueName()): Queue {
  const q = new Queue(name, { connection: fx.url });
  closers.push(() => q.close());
  return q;
}

let main: Served;
beforeAll(async () => {
  main = await serve();
});
afterAll(async () => {
  for (const close of closers) await close();
  for (const s of served) {
    s.server.closeAllConnections();
    await new Promise((r) => s.server.close(r));
    await s.dashboard.close();
  }
});

async function get(path: string, s = main, headers: Record<string, string> = {}) {
  const res = await fetch(`${s.url}${path}`, { headers });
  const text = await res.text();
  return { res, text, body: res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : null };
}

async function post(path: string, s = main, headers: Record<string, string> = {}) {
  const res = await fetch(`${s.url}${path}`, {
    method: 'POST',
    headers: { 'x-surety-csrf': s.dashboard.csrfToken, ...headers },
  });
  return { res, body: await res.json() };
}

/** A job ended dead at once (cancelled while waiting): no worker needed. */
async function deadJob(q: Queue, data: unknown = { n: 1 }): Promise<string> {
  const { id } = await q.add(data);
  await q.cancel(id);
  return id;
}

describe('dashboard HTTP API', () => {
  it('GET /api/queues lists every queue with its counts, paused flag and worker count', async () => {
    const q = queue();
    await q.add({ n: 1 });
    await q.add({ n: 2 }, { delayMs: 60_000 });
    await deadJob(q);
    await q.pause();
    const { res, body } = await get('/api/queues');
    expect(res.status).toBe(200);
    const mine = body.queues.find((x: { name: string }) => x.name === q.name);
    expect(mine).toEqual({
      name: q.name,
      counts: { waiting: 1, delayed: 1, blocked: 0, active: 0, completed: 0, dead: 1 },
      paused: true,
      workers: 0,
    });
    const one = await get(`/api/queues/${q.name}`);
    expect(one.body).toEqual(mine);
  });

  it('GET /api/queues/:q of a misspelt name is a 404 naming the closest queue, and creates nothing', async () => {
    // The name ends in two different letters, so swapping them always misspells it (a random
    // ending of two equal letters would "misspell" it into itself).
    const q = queue(`${uniqueName()}-ab`);
    await q.add({ n: 1 });
    const misspelt = `${q.name.slice(0, -2)}ba`;
    expect(misspelt).not.toBe(q.name);
    // The dashboard's list of queue names is cached for 2 s (discoverTtlMs): the suggestion may wait for it.
    const answer = await waitUntil(async () => {
      const r = await get(`/api/queues/${misspelt}`);
      return r.body.error?.message.includes(`did you mean ${JSON.stringify(q.name)}`) ? r : undefined;
    }, 'the suggestion of the real name');
    expect(answer.res.status).toBe(404);
    expect(answer.body.error.code).toBe('ERR_QUEUE_NOT_FOUND');
    const ghost = new Queue(misspelt, { connection: fx.url });
    closers.push(() => ghost.close());
    expect(await ghost.exists()).toBe(false);
    expect((await get('/api/queues')).body.queues.map((x: { name: string }) => x.name)).not.toContain(
      misspelt,
    );
  });

  it('GET /api/queues/:q/jobs pages the jobs of one state and reports the total', async () => {
    const q = queue();
    for (let i = 0; i < 5; i++) await q.add({ i }, { id: `job-${i}` });
    const first = await get(`/api/queues/${q.name}/jobs?state=waiting&offset=0&limit=2`);
    expect(first.res.status).toBe(200);
    expect(first.body.total).toBe(5);
    expect(first.body.jobs.map((j: { id: string }) => j.id)).toEqual(['job-0', 'job-1']);
    const second = await get(`/api/queues/${q.name}/jobs?state=waiting&offset=4&limit=2`);
    expect(second.body.jobs.map((j: { id: string }) => j.id)).toEqual(['job-4']);
    const dead = await get(`/api/queues/${q.name}/jobs?state=dead`);
    expect(dead.body).toMatchObject({ state: 'dead', total: 0, jobs: [] });
  });

  it('GET /api/queues/:q/jobs/:id returns the job, with ids that need URL encoding', async () => {
    const q = queue();
    await q.add({ to: 'ada' }, { id: 'welcome:ada/1 ?' });
    const { res, body } = await get(`/api/queues/${q.name}/jobs/${encodeURIComponent('welcome:ada/1 ?')}`);
    expect(res.status).toBe(200);
    expect(body).toMatchObject({ id: 'welcome:ada/1 ?', state: 'waiting', data: { to: 'ada' } });
  });

  it('flow control: groups by backlog, one group, limits; POSTs set group limits and the rate limit (refused read-only)', async () => {
    const q = queue();
    await q.addBulk([
      ...Array.from({ length: 3 }, (_, n) => ({ data: {}, opts: { group: 'big', id: `b${n}` } })),
      { data: {}, opts: { group: 'small', id: 's0' } },
    ]);
    const groups = await get(`/api/queues/${q.name}/groups?limit=10`);
    expect(groups.res.status).toBe(200);
    expect(groups.body.groups.map((g: { group: string; waiting: number }) => [g.group, g.waiting])).toEqual([
      ['big', 3],
      ['small', 1],
    ]);
    const set = await post(`/api/queues/${q.name}/group-limits?concurrency=2&rateMax=10&rateDurationMs=1000`);
    expect(set.res.status).toBe(200);
    expect(set.body.limits).toEqual({ concurrency: 2, rateLimit: { max: 10, durationMs: 1000 } });
    const own = await post(`/api/queues/${q.name}/group-limits?group=big&concurrency=none`);
    expect(own.body.limits).toMatchObject({ concurrency: null, override: { concurrency: null } });
    expect(await q.getGroupLimits({ group: 'big' })).toMatchObject({ concurrency: null });
    const big = await get(`/api/queues/${q.name}/groups/big`);
    expect(big.body.waiting.map((j: { id: string }) => j.id)).toEqual(['b0', 'b1', 'b2']);
    expect(big.body.limits.override).toEqual({ concurrency: null });
    await post(`/api/queues/${q.name}/group-limits?group=big&clear=1`);
    expect((await q.getGroupLimits({ group: 'big' })).override).toBeNull();
    const rate = await post(`/api/queues/${q.name}/rate-limit?max=50&durationMs=1000`);
    expect(rate.body.rateLimit).toEqual({ max: 50, durationMs: 1000 });
    expect((await get(`/api/queues/${q.name}/limits`)).body).toMatchObject({
      rateLimit: { max: 50, durationMs: 1000 },
      groupLimits: { concurrency: 2 },
    });
    const bad = await post(`/api/queues/${q.name}/group-limits?concurrency=0`);
    expect(bad.res.status).toBe(400);
    expect((await post(`/api/queues/${q.name}/rate-limit?max=abc`)).res.status).toBe(400);
    const ro = await serve({ readOnly: true });
    expect((await get(`/api/queues/${q.name}/groups`, ro)).res.status).toBe(200);
    expect((await post(`/api/queues/${q.name}/rate-limit?max=1&durationMs=1000`, ro)).res.status).toBe(403);
    expect(await q.getRateLimit()).toEqual({ max: 50, durationMs: 1000 });
    await post(`/api/queues/${q.name}/rate-limit?max=none`);
    expect(await q.getRateLimit()).toBeNull();
  });

  it('a limits POST changes only the fields it sends; an empty or half rate, or clear with fields, is a 400', async () => {
    const q = queue();
    await q.setGroupLimits({ concurrency: 2, rateLimit: { max: 10, durationMs: 1000 } });
    await q.setGroupLimits({ rateLimit: { max: 5, durationMs: 1000 } }, { group: 'g' });
    await q.setRateLimit({ max: 50, durationMs: 1000 });
    // setGroupLimits replaces the record: without a merge, concurrency=3 would drop the default rate.
    const conc = await post(`/api/queues/${q.name}/group-limits?concurrency=3`);
    expect(conc.body.limits).toEqual({ concurrency: 3, rateLimit: { max: 10, durationMs: 1000 } });
    const own = await post(`/api/queues/${q.name}/group-limits?group=g&concurrency=1`);
    expect(own.body.limits.override).toEqual({ concurrency: 1, rateLimit: { max: 5, durationMs: 1000 } });
    const noRate = await post(`/api/queues/${q.name}/group-limits?group=g&rateMax=none`);
    expect(noRate.body.limits).toEqual({
      concurrency: 1,
      rateLimit: null,
      override: { concurrency: 1, rateLimit: null },
    });
    const refused: [string, RegExp][] = [
      ['rate-limit', /max is required/],
      ['rate-limit?max=5', /max needs durationMs/],
      ['group-limits?rateMax=5', /rateMax needs rateDurationMs/],
      ['group-limits?rateDurationMs=5', /rateDurationMs needs rateMax/],
      ['group-limits?group=g&clear=1&concurrency=4', /clear=1 removes the limits/],
      ['group-limits?concurrency=-1', /concurrency must be a positive integer or none/],
    ];
    for (const [path, message] of refused) {
      const { res, body } = await post(`/api/queues/${q.name}/${path}`);
      expect(res.status, path).toBe(400);
      expect(body.error.message, path).toMatch(message);
    }
    expect(await q.getRateLimit()).toEqual({ max: 50, durationMs: 1000 });
    expect(await q.getGroupLimits()).toEqual({ concurrency: 3, rateLimit: { max: 10, durationMs: 1000 } });
    expect((await q.getGroupLimits({ group: 'g' })).override).toEqual({ concurrency: 1, rateLimit: null });
    const wrongMethod = await get(`/api/queues/${q.name}/group-limits?concurrency=1`);
    expect(wrongMethod.res.status).toBe(405);
    expect((await post(`/api/queues/${q.name}/groups`)).res.status).toBe(405);
  });

  it('the limit POSTs need the CSRF token and the auth token, and read-only mode refuses them', async () => {
    const q = queue();
    const ro = await serve({ readOnly: true });
    const authed = await serve({ auth: { token: 'flow-token-1234' } });
    for (const path of [
      'group-limits?concurrency=1',
      'group-limits?group=g&concurrency=1',
      'rate-limit?max=1&durationMs=1000',
    ]) {
      const url = `/api/queues/${q.name}/${path}`;
      const noCsrf = await fetch(`${main.url}${url}`, { method: 'POST' });
      expect(noCsrf.status, path).toBe(403);
      expect((await noCsrf.json()).error.code).toBe('ERR_CSRF');
      const readOnly = await post(url, ro);
      expect(readOnly.res.status, path).toBe(403);
      expect(readOnly.body.error.code).toBe('ERR_READ_ONLY');
      expect((await post(url, authed)).res.status, path).toBe(401);
    }
    for (const path of ['groups', 'groups/g', 'limits'])
      expect((await get(`/api/queues/${q.name}/${path}`, authed)).res.status, path).toBe(401);
    const bearer = { authorization: 'Bearer flow-token-1234' };
    expect((await get(`/api/queues/${q.name}/limits`, authed, bearer)).res.status).toBe(200);
    expect(await q.getRateLimit()).toBeNull();
    expect(await q.getGroupLimits({ group: 'g' })).toEqual({
      concurrency: null,
      rateLimit: null,
      override: null,
    });
    // The same request with both tokens goes through: the refusals above were the checks, not the route.
    expect(
      (await post(`/api/queues/${q.name}/rate-limit?max=1&durationMs=1000`, authed, bearer)).res.status,
    ).toBe(200);
    expect(await q.getRateLimit()).toEqual({ max: 1, durationMs: 1000 });
  });

  it('GET /api/queues/:q/jobs/:id/flow returns queue.flow, bounded by maxNodes; a read, 404 for an unknown job', async () => {
    const q = queue();
    await q.add({}, { id: 'a' });
    await q.add({}, { id: 'b', dependsOn: ['a'] });
    await q.add({}, { id: 'c', dependsOn: ['a'] });
    const { res, body } = await get(`/api/queues/${q.name}/jobs/b/flow`);
    expect(res.status).toBe(200);
    expect(body).toEqual(await q.flow('b'));
    expect(body.nodes).toHaveLength(3);
    const max = await get(`/api/queues/${q.name}/jobs/b/flow?maxNodes=10000`);
    expect(max.body.truncated).toBe(false);
    const cut = await get(`/api/queues/${q.name}/jobs/b/flow?maxNodes=2`);
    expect(cut.body).toMatchObject({ truncated: true, cut: [{ queue: q.name, id: 'a' }] });
    const bad = await get(`/api/queues/${q.name}/jobs/b/flow?maxNodes=10001`);
    expect(bad.res.status).toBe(400);
    expect(bad.body.error.message).toBe('maxNodes must be an integer from 1 to 10000, got "10001"');
    const missing = await get(`/api/queues/${q.name}/jobs/nope/flow`);
    expect(missing.res.status).toBe(404);
    expect(missing.body.error.code).toBe('ERR_JOB_NOT_FOUND');
    expect((await post(`/api/queues/${q.name}/jobs/b/flow`)).res.status).toBe(405);
    const ro = await serve({ readOnly: true });
    expect((await get(`/api/queues/${q.name}/jobs/b/flow`, ro)).body.root).toEqual({
      queue: q.name,
      id: 'b',
    });
  });

  it('GET /api/queues/:q/jobs/:id/explain returns why the job is not running, through queue.explain', async () => {
    const q = queue();
    await q.add({}, { id: 'later', delayMs: 60_000 });
    await q.add({}, { id: 'first' });
    await q.add({}, { id: 'next' });
    await q.pause();
    const runAt = (await q.getJob('later'))!.runAt;
    const { res, body } = await get(`/api/queues/${q.name}/jobs/later/explain`);
    expect(res.status).toBe(200);
    expect(body).toMatchObject({ queue: q.name, id: 'later', state: 'delayed' });
    expect(body.reasons.map((r: { code: string }) => r.code)).toEqual(['DELAYED', 'PAUSED', 'NO_WORKERS']);
    expect(body.reasons[0]).toEqual({
      code: 'DELAYED',
      message: `delayed: due at ${new Date(runAt).toISOString()}`,
      until: runAt,
    });
    const next = await get(`/api/queues/${q.name}/jobs/next/explain`);
    expect(next.body.reasons[0]).toMatchObject({ code: 'QUEUED', ahead: 1 });
    expect(next.body).toEqual({ queue: q.name, ...(await q.explain('next')) });
    const missing = await get(`/api/queues/${q.name}/jobs/nope/explain`);
    expect(missing.res.status).toBe(404);
    expect(missing.body.error.code).toBe('ERR_JOB_NOT_FOUND');
    // A read: POST is the wrong method, read-only mode still answers it, and auth applies to it.
    expect((await post(`/api/queues/${q.name}/jobs/later/explain`)).res.status).toBe(405);
    const ro = await serve({ readOnly: true });
    expect((await get(`/api/queues/${q.name}/jobs/later/explain`, ro)).body.state).toBe('delayed');
    const authed = await serve({ auth: { token: 'explain-token-123' } });
    expect((await get(`/api/queues/${q.name}/jobs/later/explain`, authed)).res.status).toBe(401);
    const ok = await get(`/api/queues/${q.name}/jobs/later/explain`, authed, {
      authorization: 'Bearer explain-token-123',
    });
    expect(ok.body.reasons[0].code).toBe('DELAYED');
  });

  it('answers 404 ERR_JOB_NOT_FOUND, 409 ERR_INVALID_STATE and 400 for bad input', async () => {
    const q = queue();
    const { id } = await q.add({});
    expect((await get(`/api/queues/${q.name}/jobs/nope`)).res.status).toBe(404);
    const missing = await post(`/api/queues/${q.name}/jobs/nope/retry`);
    expect(missing.res.status).toBe(404);
    expect(missing.body.error.code).toBe('ERR_JOB_NOT_FOUND');
    const wrong = await post(`/api/queues/${q.name}/jobs/${id}/retry`);
    expect(wrong.res.status).toBe(409);
    expect(wrong.body.error).toMatchObject({ code: 'ERR_INVALID_STATE' });
    const badState = await get(`/api/queues/${q.name}/jobs?state=sleeping`);
    expect(badState.res.status).toBe(400);
    expect(badState.body.error.message).toContain('sleeping');
    expect((await get(`/api/queues/${q.name}/jobs?limit=abc`)).res.status).toBe(400);
    expect((await get(`/api/queues/${q.name}/jobs?limit=0`)).res.status).toBe(400);
    const badName = await get(`/api/queues/${encodeURIComponent('a b{c}')}/jobs`);
    expect(badName.res.status).toBe(400);
    expect(badName.body.error.code).toMatch(/^ERR_/);
    expect((await get('/api/nothing')).res.status).toBe(404);
    const method = await fetch(`${main.url}/api/queues/${q.name}/pause`);
    expect(method.status).toBe(405);
  });

  it('POST retry, promote, cancel and remove change the job through the admin API', async () => {
    const q = queue();
    const dead = await deadJob(q);
    expect((await post(`/api/queues/${q.name}/jobs/${dead}/retry`)).body).toMatchObject({ ok: true });
    expect((await q.getJob(dead))?.state).toBe('waiting');
    const { id: delayed } = await q.add({}, { delayMs: 60_000 });
    expect((await post(`/api/queues/${q.name}/jobs/${delayed}/promote`)).res.status).toBe(200);
    expect((await q.getJob(delayed))?.state).toBe('waiting');
    expect((await post(`/api/queues/${q.name}/jobs/${delayed}/cancel`)).res.status).toBe(200);
    const cancelled = await q.getJob(delayed);
    expect(cancelled?.state).toBe('dead');
    expect(cancelled?.errors.at(-1)?.code).toBe('ERR_CANCELLED');
    expect((await post(`/api/queues/${q.name}/jobs/${delayed}/remove`)).res.status).toBe(200);
    expect(await q.getJob(delayed)).toBeNull();
  });

  it('POST pause, resume and retry-dead act on the whole queue', async () => {
    const q = queue();
    const ids = [await deadJob(q), await deadJob(q), await deadJob(q)];
    expect((await post(`/api/queues/${q.name}/pause`)).body).toMatchObject({ paused: true });
    expect(await q.isPaused()).toBe(true);
    expect((await post(`/api/queues/${q.name}/resume`)).body).toMatchObject({ paused: false });
    expect(await q.isPaused()).toBe(false);
    const { body } = await post(`/api/queues/${q.name}/retry-dead`);
    expect(body.done.sort()).toEqual([...ids].sort());
    expect(body.failed).toEqual([]);
    expect((await q.counts()).dead).toBe(0);
  });

  it('GET /api/queues/:q/metrics counts completions, failed attempts and dead jobs per minute', async () => {
    const q = queue();
    const worker = new Worker(
      q.name,
      async (job) => {
        if ((job.data as { fail?: boolean }).fail) throw new UnrecoverableError('no');
        return 'ok';
      },
      { connection: fx.url },
    );
    closers.unshift(() => worker.close());
    await q.addBulk([{ data: {} }, { data: {} }, { data: { fail: true } }]);
    const body = await waitUntil(async () => {
      const r = await get(`/api/queues/${q.name}/metrics`);
      return r.body.completed === 2 && r.body.failed === 1 && r.body.dead === 1 ? r.body : null;
    }, 'two completions and one death in the metrics');
    expect(body).toMatchObject({ queue: q.name, bucketMs: 60_000 });
    expect(body.buckets).toHaveLength(60);
    const ats = body.buckets.map((b: { at: number }) => b.at);
    expect(ats).toEqual([...ats].sort((a, b) => a - b));
    expect(ats.at(-1) - ats[0]).toBe(59 * 60_000);
    const sum = (k: string) => body.buckets.reduce((n: number, b: Record<string, number>) => n + b[k]!, 0);
    expect([sum('completed'), sum('failed'), sum('dead')]).toEqual([2, 1, 1]);
    const short = await get(`/api/queues/${q.name}/metrics?windowMs=120000`);
    expect(short.body.buckets).toHaveLength(2);
    expect(short.body.completed).toBe(2);
    for (const bad of ['abc', '10', '99999999'])
      expect((await get(`/api/queues/${q.name}/metrics?windowMs=${bad}`)).res.status).toBe(400);
    expect((await post(`/api/queues/${q.name}/metrics`)).res.status).toBe(405);
  });

  it('POST clean removes the completed or dead jobs older than olderThanMs and returns the count', async () => {
    const q = queue();
    const dead = [await deadJob(q), await deadJob(q), await deadJob(q)];
    const { id: waiting } = await q.add({});
    const young = await post(`/api/queues/${q.name}/clean?state=dead&olderThanMs=3600000`);
    expect(young.body).toEqual({
      queue: q.name,
      state: 'dead',
      olderThanMs: 3_600_000,
      removed: 0,
      more: false,
    });
    const all = await post(`/api/queues/${q.name}/clean?state=dead`);
    expect(all.body).toMatchObject({ removed: 3, more: false });
    for (const id of dead) expect(await q.getJob(id)).toBeNull();
    expect((await q.getJob(waiting))?.state).toBe('waiting');

    const worker = new Worker(q.name, async () => 'ok', { connection: fx.url });
    closers.unshift(() => worker.close());
    await waitUntil(async () => (await q.counts()).completed === 1, 'the waiting job to complete');
    expect((await post(`/api/queues/${q.name}/clean?state=completed&olderThanMs=0`)).body.removed).toBe(1);
    expect(await q.getJob(waiting)).toBeNull();

    const badState = await post(`/api/queues/${q.name}/clean?state=waiting`);
    expect(badState.res.status).toBe(400);
    expect(badState.body.error.message).toContain('completed or dead');
    expect((await post(`/api/queues/${q.name}/clean?state=dead&olderThanMs=-1`)).res.status).toBe(400);
    expect((await fetch(`${main.url}/api/queues/${q.name}/clean?state=dead`)).status).toBe(405);
  });

  it('clean stops at its cap and says more are left', async () => {
    const q = queue();
    for (let i = 0; i < 5; i++) await deadJob(q);
    const registry = new QueueRegistry(fx.url, undefined);
    closers.push(() => registry.close());
    expect(await registry.clean(q.name, 'dead', 0, 2)).toEqual({ removed: 2, more: true });
    expect(await registry.clean(q.name, 'dead', 0, 2)).toEqual({ removed: 2, more: true });
    expect(await registry.clean(q.name, 'dead', 0, 2)).toEqual({ removed: 1, more: false });
    expect((await q.counts()).dead).toBe(0);
  });

  it('GET workers and schedules list live workers and repeatable schedules', async () => {
    const q = queue();
    const worker = new Worker(q.name, async () => 'ok', { connection: fx.url, heartbeatMs: 200 });
    closers.unshift(() => worker.close());
    await q.schedule('tick', { everyMs: 60_000 }, { data: { kind: 'tick' } });
    const workers = await waitUntil(async () => {
      const { body } = await get(`/api/queues/${q.name}/workers`);
      return body.workers.length === 1 ? body.workers : null;
    }, 'the worker to appear');
    expect(workers[0]).toMatchObject({ id: worker.id, pid: process.pid });
    const { body } = await get(`/api/queues/${q.name}/schedules`);
    expect(body.schedules).toHaveLength(1);
    expect(body.schedules[0]).toMatchObject({ key: 'tick', everyMs: 60_000 });
  });

  it('GET /api/events streams every queue overview as Server-Sent Events', async () => {
    const q = queue();
    await q.add({});
    const controller = new AbortController();
    const res = await fetch(`${main.url}/api/events`, { signal: controller.signal });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    // Queues are rediscovered every 2 s: read events until this new queue shows up.
    const waiting = await waitUntil(async () => {
      text += decoder.decode((await reader.read()).value);
      const events = [...text.matchAll(/event: queues\ndata: (.*)\n\n/g)];
      const last = events.at(-1)?.[1];
      const mine = last && JSON.parse(last).queues.find((x: { name: string }) => x.name === q.name);
      return mine ? { n: mine.counts.waiting as number } : null;
    }, 'the queue in the event stream');
    controller.abort();
    expect(waiting.n).toBe(1);
  });
});

describe('dashboard mounting', () => {
  it('basePath serves everything under the prefix and nothing outside it', async () => {
    const mounted = await serve({ basePath: '/admin/surety/' });
    expect((await get('/admin/surety/api/queues', mounted)).res.status).toBe(200);
    expect((await get('/admin/surety', mounted)).text).toContain('<title>Surety</title>');
    expect((await get('/admin/surety/metrics', mounted)).res.status).toBe(200);
    expect((await get('/api/queues', mounted)).res.status).toBe(404);
    expect(() => createDashboard({ basePath: 'admin' })).toThrow(/basePath must start with \//);
    expect(() => createDashboard({ auth: { token: 'short' } })).toThrow(/at least 8 characters/);
  });
});

describe('dashboard security', () => {
  it('refuses a POST without the CSRF token, or with a wrong one, and changes nothing', async () => {
    const q = queue();
    const dead = await deadJob(q);
    const variants: Record<string, string>[] = [{}, { 'x-surety-csrf': 'forged' }];
    for (const headers of variants)
      for (const action of ['pause', 'clean?state=dead']) {
        const res = await fetch(`${main.url}/api/queues/${q.name}/${action}`, { method: 'POST', headers });
        expect(res.status).toBe(403);
        expect((await res.json()).error.code).toBe('ERR_CSRF');
      }
    expect(await q.isPaused()).toBe(false);
    expect((await q.getJob(dead))?.state).toBe('dead');
  });

  it('the page carries the CSRF token in a meta tag and a nonce-only Content-Security-Policy', async () => {
    const { res, text } = await get('/');
    expect(res.headers.get('content-type')).toContain('text/html');
    expect(text).toContain(`<meta name="surety-csrf" content="${main.dashboard.csrfToken}">`);
    expect(res.headers.get('content-security-policy')).toMatch(/script-src 'nonce-[^']+'/);
    expect(res.headers.get('content-security-policy')).not.toContain('unsafe-inline');
  });

  it('read-only mode refuses every POST with 403 and still answers reads', async () => {
    const ro = await serve({ readOnly: true });
    const q = queue();
    const dead = await deadJob(q);
    for (const path of [
      `/api/queues/${q.name}/pause`,
      `/api/queues/${q.name}/jobs/${dead}/retry`,
      `/api/queues/${q.name}/clean?state=dead`,
    ]) {
      const { res, body } = await post(path, ro);
      expect(res.status).toBe(403);
      expect(body.error.code).toBe('ERR_READ_ONLY');
    }
    expect((await q.getJob(dead))?.state).toBe('dead');
    expect(await q.isPaused()).toBe(false);
    expect((await get(`/api/queues/${q.name}/jobs?state=dead`, ro)).body.total).toBe(1);
    expect((await get('/', ro)).text).toContain('<meta name="surety-read-only" content="true">');
  });

  it('with a token, refuses requests without it (401) and accepts Bearer and Basic auth', async () => {
    const token = 's3cret-token-123';
    const authed = await serve({ auth: { token } });
    for (const path of ['/', '/api/queues', '/metrics', '/api/events']) {
      const { res } = await get(path, authed);
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toContain('Basic');
    }
    expect((await get('/api/queues', authed, { authorization: 'Bearer wrong-token-1234' })).res.status).toBe(
      401,
    );
    expect((await get('/api/queues', authed, { authorization: `Bearer ${token}` })).res.status).toBe(200);
    const basic = `Basic ${Buffer.from(`admin:${token}`).toString('base64')}`;
    expect((await get('/api/queues', authed, { authorization: basic })).res.status).toBe(200);
    const q = queue();
    const refused = await fetch(`${authed.url}/api/queues/${q.name}/pause`, {
      method: 'POST',
      headers: { 'x-surety-csrf': authed.dashboard.csrfToken },
    });
    expect(refused.status).toBe(401);
    expect(await q.isPaused()).toBe(false);
  });

  it('allowedHosts "loopback" refuses foreign Host names (DNS rebinding)', async () => {
    const local = await serve({ allowedHosts: 'loopback' });
    expect((await get('/api/queues', local)).res.status).toBe(200);
    const { port } = new URL(local.url);
    const res = await new Promise<number>((resolve, reject) => {
      const req = httpGet(
        { host: '127.0.0.1', port, path: '/api/queues', headers: { host: 'evil.example:80' } },
        (r) => {
          r.resume();
          resolve(r.statusCode ?? 0);
        },
      );
      req.on('error', reject);
    });
    expect(res).toBe(403);
    expect(isLoopbackHost('127.0.0.1') && isLoopbackHost('::1') && isLoopbackHost('localhost')).toBe(true);
    expect(isLoopbackHost('0.0.0.0') || isLoopbackHost('10.0.0.5') || isLoopbackHost('::')).toBe(false);
  });

  it('returns job data with an XSS payload only as JSON, never as markup', async () => {
    const q = queue();
    const { id } = await q.add({ name: XSS });
    const { res, text, body } = await get(`/api/queues/${q.name}/jobs/${id}`);
    expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(body.data.name).toBe(XSS);
    expect(text).toContain(JSON.stringify(XSS));
    const page = await get('/');
    expect(page.text).not.toContain('alert(1)');
    expect(page.text).not.toContain('innerHTML');
  });

  it('`surety dashboard` refuses a non-loopback address without a token (exit 2), serves loopback', async () => {
    const run = (args: string[], env: Record<string, string> = {}) => {
      const e: NodeJS.ProcessEnv = { ...process.env, REDIS_URL: fx.url, NO_COLOR: '1', ...env };
      delete e.SURETY_DASHBOARD_TOKEN;
      Object.assign(e, env);
      const proc = spawn(process.execPath, [BIN, 'dashboard', ...args], { env: e });
      const out = { stdout: '', stderr: '' };
      proc.stdout.on('data', (d) => (out.stdout += d));
      proc.stderr.on('data', (d) => (out.stderr += d));
      const exited = new Promise<number | null>((resolve) => proc.on('close', resolve));
      return { proc, out, exited };
    };
    const refused = run(['--host', '0.0.0.0', '--port', '0']);
    expect(await refused.exited).toBe(2);
    expect(refused.out.stderr).toContain('without authentication');
    expect(refused.out.stderr).toContain('SURETY_DASHBOARD_TOKEN');

    const ok = run(['--port', '0', '--json']);
    const ready = await waitUntil(
      () => /\{.*"event":"ready".*\}/.exec(ok.out.stdout)?.[0],
      'ready line',
      15_000,
    );
    const { url } = JSON.parse(ready) as { url: string };
    expect((await fetch(`${url}api/queues`)).status).toBe(200);
    ok.proc.kill('SIGTERM');
    expect(await ok.exited).toBe(0);
  });
});

describe('dashboard metrics', () => {
  it('GET /metrics reports surety_jobs{queue,state} and surety_workers{queue} in Prometheus format', async () => {
    const q = queue();
    await q.add({});
    await deadJob(q);
    // Queues are rediscovered every 2 s: scrape until this new queue shows up.
    const { res, text } = await waitUntil(async () => {
      const r = await get('/metrics');
      return r.text.includes(q.name) ? r : null;
    }, 'the queue in /metrics');
    expect(res.headers.get('content-type')).toContain('text/plain');
    expect(text).toContain('# TYPE surety_jobs gauge');
    expect(text).toContain(`surety_jobs{queue="${q.name}",state="waiting"} 1`);
    expect(text).toContain(`surety_jobs{queue="${q.name}",state="dead"} 1`);
    expect(text).toContain(`surety_workers{queue="${q.name}"} 0`);
  });

  it('workerMetrics counts outcomes and retries and measures run duration, wait and latency, served on /metrics', async () => {
    const q = queue();
    const worker = new Worker(
      q.name,
      async (job) => {
        const data = job.data as { fail?: boolean; flaky?: boolean };
        if (data.fail) throw new UnrecoverableError('no');
        if (data.flaky && job.attempt === 1) throw new Error('flaky');
        return 'ok';
      },
      { connection: fx.url },
    );
    closers.unshift(() => worker.close());
    const registry = new Registry();
    const m = workerMetrics(worker, registry);
    const second = workerMetrics(worker, registry); // a second worker may share the registry
    expect(second.registry).toBe(registry);
    second.stop(); // this one stops counting: the values below are counted once
    await q.add({});
    await q.add({ fail: true });
    await q.add({ flaky: true }, { maxAttempts: 2, backoff: { type: 'fixed', delayMs: 0 } });
    const line = (text: string, metric: string) =>
      Number(new RegExp(`^${metric.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1]);
    const shared = await serve({ registry }); // /metrics serves the queue gauges and the worker's metrics
    const text = await waitUntil(async () => {
      const t = (await get('/metrics', shared)).text;
      const done = line(t, `surety_jobs_completed_total{queue="${q.name}"}`) === 2;
      return done && t.includes(`surety_jobs_failed_total{queue="${q.name}",outcome="dead"} 1`) ? t : null;
    }, 'two completions and one death in the metrics');
    expect(line(text, `surety_jobs_retried_total{queue="${q.name}"}`)).toBe(1);
    expect(line(text, `surety_job_latency_seconds_count{queue="${q.name}",status="completed"}`)).toBe(2);
    expect(line(text, `surety_job_duration_seconds_count{queue="${q.name}",status="completed"}`)).toBe(2);
    expect(line(text, `surety_job_duration_seconds_count{queue="${q.name}",status="failed"}`)).toBe(2);
    expect(line(text, `surety_job_wait_seconds_count{queue="${q.name}"}`)).toBe(4);
    expect(text).toContain('# TYPE surety_job_duration_seconds histogram');
    expect(text).toContain('# TYPE surety_job_wait_seconds histogram');
    expect(text).toContain('# TYPE surety_jobs gauge');
    expect(text).toContain(
      `surety_job_duration_seconds_bucket{le="+Inf",queue="${q.name}",status="completed"} 2`,
    );
    const took = line(text, `surety_job_duration_seconds_sum{queue="${q.name}",status="completed"}`);
    expect(took).toBeGreaterThanOrEqual(0);
    expect(took).toBeLessThan(10); // seconds, not milliseconds
    m.stop();
  });

  it('workerMetrics counts jobs recovered from a crashed worker', async () => {
    const q = queue();
    // A worker that "crashed": it claimed the job with a lease that ended ten minutes ago.
    await q.add({});
    await runScript(
      fx.redis,
      scripts.claim,
      q.keys,
      claimArgs({ now: Date.now() - 600_000, defaultLeaseMs: 1_000, limit: 10 }),
    );
    const worker = new Worker(q.name, () => 'ok', { connection: fx.url, recoverIntervalMs: 20 });
    closers.unshift(() => worker.close());
    const registry = new Registry();
    const m = workerMetrics(worker, registry);
    const shared = await serve({ registry });
    await waitUntil(
      async () =>
        (await get('/metrics', shared)).text.includes(
          `surety_jobs_recovered_total{queue="${q.name}",outcome="requeued"} 1`,
        ),
      'one recovered job in the metrics',
    );
    m.stop();
  });
});

/** Sends `request` as is over TCP and resolves with the status line's code (0: no answer at all). */
function rawRequest(s: Served, request: string): Promise<{ status: number; text: string }> {
  const { port } = new URL(s.url);
  return new Promise((resolve, reject) => {
    const socket = tcpConnect(Number(port), '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => {
      text += d;
    });
    socket.on('error', reject);
    socket.on('close', () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text }));
    // Not end(): a half-closed client makes node:http drop the request before it is answered. Every
    // request says `Connection: close`, so the server closes once it has answered.
    socket.write(request, 'latin1');
  });
}

describe('dashboard under hostile requests', () => {
  const alive = async (s: Served) => expect((await get('/api/queues', s)).res.status).toBe(200);

  it('answers every malformed or unsupported request with a 4xx and keeps serving', async () => {
    const local = await serve({ allowedHosts: 'loopback' });
    const req = (line: string, headers: string[] = ['Host: 127.0.0.1']) =>
      `${line}\r\n${[...headers, 'Connection: close'].join('\r\n')}\r\n\r\n`;
    const cases: [string, number, Served?][] = [
      [req('TRACE / HTTP/1.1'), 405],
      [req('DELETE /api/queues HTTP/1.1'), 405],
      [req('OPTIONS /api/queues HTTP/1.1'), 405],
      [req('PUT /api/queues/q/pause HTTP/1.1', ['Host: 127.0.0.1', 'Content-Length: 0']), 405],
      [req('GET / HTTP/1.1', ['Host: a b']), 400],
      [req('GET / HTTP/1.1', ['Host: [']), 400],
      [req('GET /api/queues HTTP/1.1', ['Host: a@evil.example']), 400],
      [req('GET /api/queues HTTP/1.1', ['Host: a%zz']), 400],
      [req('GET /api/queues HTTP/1.1', ['Host: 127.0.0.1:99999']), 400],
      [req('GET /api/queues HTTP/1.1', ['Host: a/b']), 400],
      [req('GET * HTTP/1.1'), 400],
      [req('OPTIONS * HTTP/1.1'), 400],
      [req('GET //api/queues HTTP/1.1'), 404],
      [req('GET /api/queues/%E0%A4%A/jobs HTTP/1.1'), 400],
      [req('GET /api/queues/q/jobs?state=%ZZ&offset=%FF HTTP/1.1'), 400],
      [req(`GET /api/queues/q/jobs?x=${'a'.repeat(MAX_URL_LENGTH)} HTTP/1.1`), 414],
      [req('POST /api/queues/q/pause HTTP/1.1', ['Host: 127.0.0.1', 'Content-Length: 5']), 413],
      [req('POST /api/queues/q/pause HTTP/1.1', ['Host: 127.0.0.1', 'Transfer-Encoding: chunked']), 413],
      // Absolute form: its authority is the host, so the Host allow-list still applies.
      [req('GET http://evil.example/api/queues HTTP/1.1'), 403, local],
      [req('GET //evil.example/api/queues HTTP/1.1'), 404, local],
      [req('GET /api/queues HTTP/1.1', ['Host: evil.example']), 403, local],
      [req('GET http://x/api/queues HTTP/1.1'), 200],
      [req('GET /api/queues HTTP/1.0', []), 200],
    ];
    for (const [request, status, s = main] of cases) {
      const answer = await rawRequest(s, request);
      expect({ request: request.split('\r\n')[0]!.slice(0, 80), status: answer.status }).toEqual({
        request: request.split('\r\n')[0]!.slice(0, 80),
        status,
      });
      if (status === 405) expect(answer.text.toLowerCase()).toContain('allow: get, head, post');
      if (status >= 400) expect(answer.text).toMatch(/"code":"ERR_[A-Z_]+"/);
      await alive(s);
    }
  });

  it('a handler that throws, even synchronously, answers 500 ERR_INTERNAL and is reported, never crashes', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on('warning', onWarning);
    const server = createServer(
      toNodeListener((() => {
        throw new Error('handler bug (thrown on purpose by test/behaviour/dashboard.test.ts)');
      }) as unknown as (req: Request) => Promise<Response>),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      for (let i = 0; i < 2; i++) {
        const res = await fetch(url);
        expect(res.status).toBe(500);
        expect((await res.json()).error.code).toBe('ERR_INTERNAL');
      }
      await waitUntil(() => warnings.some((w) => w.includes('handler bug')), 'the warning');
    } finally {
      process.off('warning', onWarning);
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('serves a page at the deepest offset with a read of one page, and refuses offsets and limits out of range', async () => {
    const q = queue();
    const n = MAX_OFFSET + 10;
    const id = (i: number) => `bounded-read-job-${String(i).padStart(6, '0')}`;
    for (let from = 0; from < n; from += 5_000)
      await q.addBulk(
        Array.from({ length: Math.min(5_000, n - from) }, (_, i) => ({
          data: {},
          opts: { id: id(from + i) },
        })),
      );
    const outBytes = async () =>
      Number(/total_net_output_bytes:(\d+)/.exec(await fx.redis.info('stats'))?.[1] ?? Number.NaN);
    const before = await outBytes();
    const page = await get(`/api/queues/${q.name}/jobs?state=waiting&offset=${MAX_OFFSET}&limit=5`);
    const sent = (await outBytes()) - before;
    expect(page.res.status).toBe(200);
    expect(page.body.total).toBe(n);
    expect(page.body.jobs.map((j: { id: string }) => j.id)).toEqual(
      Array.from({ length: 5 }, (_, i) => id(MAX_OFFSET + i)),
    );
    // Reading every id before the offset would be more than 250 kB; one page is a few kB.
    expect(sent).toBeLessThan(50_000);
    for (const bad of [
      `offset=${MAX_OFFSET + 1}`,
      'offset=99999999999999999999999',
      'offset=1e9',
      'offset=-1',
      `limit=${MAX_LIMIT + 1}`,
      'limit=0',
    ]) {
      const r = await get(`/api/queues/${q.name}/jobs?state=waiting&${bad}`);
      expect(r.res.status).toBe(400);
      expect(r.body.error.code).toBe('ERR_INVALID_OPTION');
    }
  });

  it('pages the waiting jobs in claim order across priorities < 0, the list and priorities > 0', async () => {
    const q = queue();
    await q.add({}, { id: 'p0-a' });
    await q.add({}, { id: 'p5-a', priority: 5 });
    await q.add({}, { id: 'neg-a', priority: -3 });
    await q.add({}, { id: 'p0-b' });
    await q.add({}, { id: 'p5-b', priority: 5 });
    await q.add({}, { id: 'p1', priority: 1 });
    await q.add({}, { id: 'neg-b', priority: -3 });
    await q.add({}, { id: 'p0-c' });
    const all = ['neg-a', 'neg-b', 'p0-a', 'p0-b', 'p0-c', 'p1', 'p5-a', 'p5-b'];
    expect((await q.getJobs('waiting')).map((j) => j.id)).toEqual(all);
    for (let offset = 0; offset <= all.length; offset++)
      for (let limit = 1; limit <= all.length; limit++)
        expect((await q.getJobs('waiting', { offset, limit })).map((j) => j.id)).toEqual(
          all.slice(offset, offset + limit),
        );
  });

  it('keeps a bounded number of Queues, closing evicted ones once no request uses them', async () => {
    const registry = new QueueRegistry(fx.url, undefined, 2_000, 3);
    closers.push(() => registry.close());
    const seen: Queue[] = [];
    let release: () => void = () => {};
    const held = registry.use('held-0', async (q) => {
      seen.push(q);
      await new Promise<void>((r) => {
        release = r;
      });
      return q.counts(); // still usable: it was evicted while in use, not closed
    });
    for (let i = 1; i <= 10; i++) await registry.use(`name-${i}`, async (q) => void seen.push(q));
    expect(registry.size).toBe(3);
    await expect(seen[1]!.counts()).rejects.toBeInstanceOf(ClosedError);
    release();
    expect((await held).waiting).toBe(0);
    await waitUntil(async () => {
      try {
        await seen[0]!.counts();
        return false;
      } catch (err) {
        return err instanceof ClosedError;
      }
    }, 'the evicted queue to close once released');
    expect(await registry.use('name-10', async (q) => q === seen[10])).toBe(true);
    const many = await Promise.all(
      Array.from({ length: 50 }, (_, i) => get(`/api/queues/${encodeURIComponent(`many-${i}`)}`)),
    );
    // Names nothing has used: each a clean 404 (the registry's bound holds all the same).
    expect(many.every((r) => r.res.status === 404 && r.body.error.code === 'ERR_QUEUE_NOT_FOUND')).toBe(true);
  });

  it('retry-dead retries at most its cap per call and says more are left', async () => {
    const q = queue();
    const ids = [await deadJob(q), await deadJob(q), await deadJob(q)];
    const registry = new QueueRegistry(fx.url, undefined);
    closers.push(() => registry.close());
    const first = await registry.retryDead(q.name, 2);
    expect(first).toEqual({ done: ids.slice(0, 2), failed: [], more: true });
    expect(await registry.retryDead(q.name, 2)).toEqual({ done: [ids[2]], failed: [], more: false });
    expect((await post(`/api/queues/${q.name}/retry-dead`)).body).toEqual({
      queue: q.name,
      done: [],
      failed: [],
      more: false,
    });
  });

  it(`refuses more than ${MAX_EVENT_STREAMS} open event streams (503) and accepts one again when one closes`, async () => {
    const sse = await serve({ eventsIntervalMs: 60_000 });
    const open: AbortController[] = [];
    const responses: Response[] = []; // kept: an unreferenced fetch body may be collected and closed
    for (let i = 0; i < MAX_EVENT_STREAMS; i++) {
      const c = new AbortController();
      const res = await fetch(`${sse.url}/api/events`, { signal: c.signal });
      expect(res.status).toBe(200);
      open.push(c);
      responses.push(res);
    }
    const refused = await fetch(`${sse.url}/api/events`);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect((await refused.json()).error.code).toBe('ERR_TOO_MANY_STREAMS');
    open.pop()!.abort();
    const again = await waitUntil(async () => {
      const c = new AbortController();
      const res = await fetch(`${sse.url}/api/events`, { signal: c.signal });
      if (res.status === 200) return c;
      await res.body?.cancel();
      return null;
    }, 'a stream slot to be free again');
    for (const c of [...open, again]) c.abort();
    expect(responses).toHaveLength(MAX_EVENT_STREAMS);
  });
});
