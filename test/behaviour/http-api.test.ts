/**
 * The HTTP producer API (docs/http-api.md), through real HTTP requests to the handler mounted on
 * node:http (127.0.0.1, random port) against a private redis-server, with a real Worker; and the docs'
 * Python example, run with python3 against it.
 */
import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createDashboard,
  createProducerApi,
  type Dashboard,
  MAX_JOBS_PER_REQUEST,
  MAX_WAIT_MS,
  type ProducerApi,
  type ProducerApiOptions,
  toNodeListener,
} from '../../src/dashboard/index.js';
import { DEFAULT_MAX_BODY_BYTES, MAX_BODY_BYTES } from '../../src/dashboard/producer-request.js';
import { Queue, UnrecoverableError, ValidationError, Worker } from '../../src/index.js';
import { uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const TOKEN = 'test-token-0123456789';
const run = promisify(execFile);

interface Served {
  handler: ProducerApi | Dashboard;
  server: Server;
  url: string;
}
const served: Served[] = [];
const closers: (() => Promise<unknown>)[] = [];

async function listen(handler: ProducerApi | Dashboard): Promise<Served> {
  const server = createServer(toNodeListener(handler));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const s = { handler, server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
  served.push(s);
  return s;
}

function serve(opts: Partial<ProducerApiOptions> = {}): Promise<Served> {
  return listen(createProducerApi({ connection: fx.url, token: TOKEN, ...opts }));
}

function queue(name = uniqueName()): Queue {
  const q = new Queue(name, { connection: fx.url });
  closers.push(() => q.close());
  return q;
}

let api: Served;
beforeAll(async () => {
  api = await serve();
});
afterAll(async () => {
  for (const close of closers) await close();
  for (const s of served) {
    s.server.closeAllConnections();
    await new Promise((r) => s.server.close(r));
    await s.handler.close();
  }
});

const bearer = { authorization: `Bearer ${TOKEN}` };

async function call(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = { ...bearer, 'content-type': 'application/json' },
  s = api,
) {
  const res = await fetch(`${s.url}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
  const text = await res.text();
  return { res, status: res.status, body: text === '' ? null : JSON.parse(text) };
}

/** Resolves once a wait on `q` has subscribed to its done channel: that GET is counted and waiting. */
function subscribed(q: Queue) {
  return waitUntil(
    async () => ((await fx.redis.call('PUBSUB', 'SHARDCHANNELS', `*${q.name}*done*`)) as string[]).length > 0,
    `a wait on ${q.name}`,
  );
}

/** A processor that holds its jobs until `release()` (no timing involved). */
function gate() {
  let release!: () => void;
  const opened = new Promise<void>((r) => {
    release = r;
  });
  return { opened, release };
}

describe('POST /api/queues/:q/jobs', () => {
  it('adds one job with JSON options (runAt as an ISO string) and answers 201 { id, state, isNew }', async () => {
    const q = queue();
    const { res, status, body } = await call('POST', `/api/queues/${q.name}/jobs`, {
      data: { to: 'ada@example.com' },
      options: { name: 'welcome', priority: 5, maxAttempts: 7, runAt: '2099-01-01T00:00:00Z', lifo: true },
    });
    expect(status).toBe(201);
    expect(body).toEqual({ id: expect.any(String), state: 'delayed', isNew: true });
    // Relative to the POST's URL, so it holds under any mount point.
    const location = new URL(res.headers.get('location')!, `${api.url}/api/queues/${q.name}/jobs`);
    expect(location.pathname).toBe(`/api/queues/${q.name}/jobs/${encodeURIComponent(body.id)}`);
    const job = await q.getJob(body.id);
    expect(job).toMatchObject({
      data: { to: 'ada@example.com' },
      name: 'welcome',
      priority: 5,
      maxAttempts: 7,
      runAt: Date.parse('2099-01-01T00:00:00Z'),
      lifo: true,
    });
  });

  it('adds a bulk of jobs in order and reports each one, an existing id as isNew: false', async () => {
    const q = queue();
    await q.add({ n: 0 }, { id: 'exists' });
    const { status, body } = await call('POST', `/api/queues/${q.name}/jobs`, {
      jobs: [
        { data: { n: 1 }, options: { id: 'b1' } },
        { data: { n: 2 }, options: { delayMs: 60_000 } },
        { data: { n: 3 }, options: { id: 'exists' } },
      ],
    });
    expect(status).toBe(201);
    expect(body.jobs).toEqual([
      { id: 'b1', state: 'waiting', isNew: true },
      { id: expect.any(String), state: 'delayed', isNew: true },
      { id: 'exists', state: 'waiting', isNew: false },
    ]);
    expect((await q.getJob('exists'))?.data).toEqual({ n: 0 });
    expect(await q.counts()).toMatchObject({ waiting: 2, delayed: 1 });
  });

  it("takes addBulk's `opts` as well as `options`, and refuses a job that gives both", async () => {
    const q = queue();
    const path = `/api/queues/${q.name}/jobs`;
    const one = await call('POST', path, { data: 1, opts: { id: 'via-opts', priority: 4 } });
    expect(one.status).toBe(201);
    expect(await q.getJob('via-opts')).toMatchObject({ data: 1, priority: 4 });
    const bulk = await call('POST', path, { jobs: [{ data: 2, opts: { id: 'b-opts' } }, { data: 3 }] });
    expect(bulk.status).toBe(201);
    expect(await q.getJob('b-opts')).toMatchObject({ data: 2 });
    const both = await call('POST', path, { data: 4, options: { id: 'x' }, opts: { id: 'y' } });
    expect(both.status).toBe(400);
    expect(both.body.error.message).toMatch(/both "options" and "opts"/);
    expect(await q.getJob('x')).toBeNull();
    expect(await q.getJob('y')).toBeNull();
  });

  it('re-POSTing an id that exists returns that job with 200 and adds nothing', async () => {
    const q = queue();
    const path = `/api/queues/${q.name}/jobs`;
    const first = await call('POST', path, { data: { v: 1 }, options: { id: 'order-42' } });
    expect(first.status).toBe(201);
    const again = await call('POST', path, { data: { v: 2 }, options: { id: 'order-42' } });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ id: 'order-42', state: 'waiting', isNew: false });
    expect((await q.getJob('order-42'))?.data).toEqual({ v: 1 });
    expect((await q.counts()).waiting).toBe(1);
  });

  it('refuses invalid jobs with 400 { error: { code, message } } naming the option, and writes nothing', async () => {
    const q = queue();
    const path = `/api/queues/${q.name}/jobs`;
    const cases: [unknown, string, RegExp][] = [
      [
        { data: 1, options: { priority: 1.5 } },
        'ERR_INVALID_OPTION',
        /priority must be an integer .* got 1\.5/,
      ],
      [{ data: 1, options: { retries: 3 } }, 'ERR_INVALID_OPTION', /unknown option "retries"/],
      [
        { data: 1, options: { lifo: 'yes' } },
        'ERR_INVALID_OPTION',
        /^lifo must be true or false, got "yes"$/,
      ],
      [
        { data: 1, options: { dedupe: { key: 'k', keepLastIfActive: true } } },
        'ERR_INVALID_OPTION',
        /keepLastIfActive needs mode 'debounce'/,
      ],
      [
        { data: 1, options: { runAt: '2030-02-30T00:00:00Z' } },
        'ERR_INVALID_OPTION',
        /runAt must be epoch ms or an ISO 8601/,
      ],
      [{ data: 1, options: { runAt: '2030-01-01T09:00:00' } }, 'ERR_INVALID_OPTION', /with a time zone/],
      [{ data: 1, options: { id: '' } }, 'ERR_INVALID_JOB_ID', /job id must be/],
      [{ options: {} }, 'ERR_INVALID_OPTION', /has no data/],
      [{ data: 1, extra: true }, 'ERR_INVALID_OPTION', /unknown option "extra"/],
      [{ jobs: [] }, 'ERR_INVALID_OPTION', /jobs must be a non-empty array/],
      [
        { jobs: [{ data: 1 }, { data: 2, options: { maxAttempts: 0 } }] },
        'ERR_INVALID_OPTION',
        /^jobs\[1\]: maxAttempts must be an integer from 1 to 1000, got 0$/,
      ],
      ['{"data": ', 'ERR_INVALID_JSON', /not valid JSON/],
      ['', 'ERR_INVALID_JSON', /empty/],
    ];
    for (const [body, code, message] of cases) {
      const r = await call('POST', path, body);
      expect({ status: r.status, code: r.body.error.code }).toEqual({ status: 400, code });
      expect(r.body.error.message).toMatch(message);
    }
    const badQueue = await call('POST', '/api/queues/a%3Ab/jobs', { data: 1 });
    expect([badQueue.status, badQueue.body.error.code]).toEqual([400, 'ERR_INVALID_QUEUE_NAME']);
    expect(await q.counts()).toMatchObject({ waiting: 0, delayed: 0 });
  });

  it('takes MAX_JOBS_PER_REQUEST jobs in one request and refuses one more with 413', async () => {
    const q = queue();
    const path = `/api/queues/${q.name}/jobs`;
    const jobs = Array.from({ length: MAX_JOBS_PER_REQUEST + 1 }, (_, i) => ({ data: i }));
    const over = await call('POST', path, { jobs });
    expect([over.status, over.body.error.code]).toEqual([413, 'ERR_TOO_MANY_JOBS']);
    expect((await q.counts()).waiting).toBe(0);
    const at = await call('POST', path, { jobs: jobs.slice(0, MAX_JOBS_PER_REQUEST) });
    expect(at.status).toBe(201);
    expect(at.body.jobs).toHaveLength(MAX_JOBS_PER_REQUEST);
    expect((await q.counts()).waiting).toBe(MAX_JOBS_PER_REQUEST);
  });

  it('reads a body of exactly maxBodyBytes and refuses one byte more with 413, declared or chunked', async () => {
    const q = queue();
    const path = `/api/queues/${q.name}/jobs`;
    const json = JSON.stringify({ data: 'x' });
    // JSON allows trailing whitespace: pad the body to the exact size.
    const exact = json + ' '.repeat(DEFAULT_MAX_BODY_BYTES - json.length);
    expect((await call('POST', path, exact)).status).toBe(201);
    const over = await call('POST', path, `${exact} `);
    expect([over.status, over.body.error.code]).toEqual([413, 'ERR_BODY_TOO_LARGE']);
    expect(over.res.headers.get('connection')).toBe('close');
    // Without a Content-Length (chunked), the limit applies to the bytes read.
    const chunked = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(
        `${api.url}${path}`,
        { method: 'POST', headers: { ...bearer, 'content-type': 'application/json' } },
        (res) => {
          let body = '';
          res.on('data', (c) => {
            body += c;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('error', reject);
      req.write(exact.slice(0, 1000));
      req.end(`${exact.slice(1000)} `);
    });
    expect(chunked.status).toBe(413);
    expect(JSON.parse(chunked.body).error.code).toBe('ERR_BODY_TOO_LARGE');
    expect((await q.counts()).waiting).toBe(1);
  });
});

describe('auth and CSRF', () => {
  it('answers 401 without a token, with a wrong one, and with Basic credentials', async () => {
    const q = queue();
    const path = `/api/queues/${q.name}/jobs`;
    const json = { 'content-type': 'application/json' };
    const basic = `Basic ${Buffer.from(`user:${TOKEN}`).toString('base64')}`;
    for (const headers of [
      json,
      { ...json, authorization: 'Bearer wrong-token-0123456789' },
      { ...json, authorization: `Bearer ${TOKEN}x` },
      { ...json, authorization: basic },
    ]) {
      const r = await call('POST', path, { data: 1 }, headers);
      expect([r.status, r.body.error.code]).toEqual([401, 'ERR_UNAUTHORIZED']);
      expect(r.res.headers.get('www-authenticate')).toBe('Bearer realm="surety"');
    }
    const read = await call('GET', `${path}/x`, undefined, {});
    expect(read.status).toBe(401);
    expect((await q.counts()).waiting).toBe(0);
  });

  it('refuses to be created without a token of at least 8 characters, or with a bad option', () => {
    // @ts-expect-error the type requires a token too
    expect(() => createProducerApi({ connection: fx.url })).toThrow(ValidationError);
    expect(() => createProducerApi({ connection: fx.url, token: 'short' })).toThrow(/at least 8 characters/);
    const bad = { connection: fx.url, token: TOKEN, maxBody: 1 } as ProducerApiOptions;
    expect(() => createProducerApi(bad)).toThrow(/unknown option "maxBody"/);
    expect(() => createProducerApi({ connection: fx.url, token: TOKEN, maxBodyBytes: 0 })).toThrow(
      /maxBodyBytes must be an integer from 1 to 67108864, got 0/,
    );
    const limits = { connection: fx.url, token: TOKEN, maxBodyBytes: MAX_BODY_BYTES };
    expect(() => createProducerApi({ ...limits, maxBodyBytes: MAX_BODY_BYTES + 1 })).toThrow(ValidationError);
    const atMaximum = createProducerApi(limits);
    closers.push(() => atMaximum.close());
  });

  it('refuses a Host outside allowedHosts with 403 (DNS rebinding), before the token', async () => {
    const s = await serve({ allowedHosts: ['jobs.internal'] });
    const q = queue();
    const status = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const req = httpRequest(
          `${s.url}/api/queues/${q.name}/jobs/x`,
          { headers: { ...bearer, host } },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on('error', reject);
        req.end();
      });
    expect(await status('evil.example')).toBe(403);
    expect(await status('jobs.internal')).toBe(404); // allowed: the job does not exist
  });

  it('refuses a form-style POST (text/plain, urlencoded: no CORS preflight) with 415, and OPTIONS with 405', async () => {
    const q = queue();
    const path = `/api/queues/${q.name}/jobs`;
    for (const type of [
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/json; charset=latin1',
    ]) {
      const r = await call('POST', path, JSON.stringify({ data: 1 }), { ...bearer, 'content-type': type });
      expect([r.status, r.body.error.code]).toEqual([415, 'ERR_UNSUPPORTED_MEDIA_TYPE']);
    }
    // The preflight a browser sends before a cross-site JSON POST is refused, without CORS headers.
    const preflight = await fetch(`${api.url}${path}`, {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
    });
    expect(preflight.status).toBe(405);
    expect(preflight.headers.get('access-control-allow-origin')).toBeNull();
    expect((await q.counts()).waiting).toBe(0);
  });
});

describe('POST /api/queues/:q/jobs/:id/signals/:name', () => {
  it('wakes a parked job with the payload; a job that ended answers 409, none 404, a GET 405', async () => {
    const q = queue();
    const w = new Worker(q.name, (job) => job.waitForSignal('delivered'), { connection: fx.url });
    closers.push(() => w.close());
    const { id } = await q.add({});
    await waitUntil(async () => (await q.getJob(id))?.waitingForSignal, 'the job parks');
    const path = `/api/queues/${q.name}/jobs/${id}/signals/delivered`;
    const sent = await call('POST', path, { payload: { at: 'door' } });
    expect(sent).toMatchObject({ status: 200, body: { delivered: true, state: 'waiting', woke: true } });
    expect(await q.waitFor(id, { timeoutMs: 10_000 })).toEqual({ at: 'door' });
    const late = await call('POST', path, {});
    expect(late).toMatchObject({
      status: 409,
      body: {
        error: { code: 'ERR_SIGNAL_NOT_DELIVERED' },
        delivered: false,
        state: 'completed',
        reason: 'ended',
      },
    });
    const missing = await call('POST', `/api/queues/${q.name}/jobs/nope/signals/delivered`, {});
    expect(missing).toMatchObject({
      status: 404,
      body: { error: { code: 'ERR_JOB_NOT_FOUND' }, reason: 'missing' },
    });
    expect((await call('GET', path)).status).toBe(405);
    expect((await call('POST', path, { payload: 1, extra: 2 })).status).toBe(400);
    expect((await call('POST', `/api/queues/${q.name}/jobs/${id}/other/delivered`, {})).status).toBe(404);
  });
});

describe('GET /api/queues/:q/jobs/:id', () => {
  it('with waitMs, answers once a worker completes the job, with its result', async () => {
    const q = queue();
    const g = gate();
    const worker = new Worker(
      q.name,
      async (job) => {
        await g.opened;
        return { doubled: (job.data as { n: number }).n * 2 };
      },
      { connection: fx.url },
    );
    closers.unshift(() => worker.close());
    const { body } = await call('POST', `/api/queues/${q.name}/jobs`, { data: { n: 21 } });
    await waitUntil(async () => (await q.getJob(body.id))?.state === 'active', 'the job to start');
    const answer = call('GET', `/api/queues/${q.name}/jobs/${body.id}?waitMs=10000`);
    // Subscribed to the queue's done channel: the GET read the job (active) and is waiting now.
    await waitUntil(
      async () =>
        ((await fx.redis.call('PUBSUB', 'SHARDCHANNELS', `*${q.name}*done*`)) as string[]).length > 0,
      'the wait to subscribe',
    );
    g.release();
    const { status, body: job } = await answer;
    expect(status).toBe(200);
    expect(job).toMatchObject({ id: body.id, state: 'completed', result: { doubled: 42 }, attempts: 1 });
    expect(job.finishedAt).toEqual(expect.any(Number));
  });

  it('with waitMs, answers a job that ends dead with its errors, and a running one at the timeout', async () => {
    const q = queue();
    const g = gate();
    const worker = new Worker(
      q.name,
      async (job) => {
        if ((job.data as { fail: boolean }).fail) throw new UnrecoverableError('no such image');
        await g.opened;
        return 'ok';
      },
      { connection: fx.url },
    );
    closers.unshift(async () => {
      g.release();
      await worker.close();
    });
    const path = `/api/queues/${q.name}/jobs`;
    const dead = await call('POST', path, { data: { fail: true } });
    const deadJob = await call('GET', `${path}/${dead.body.id}?waitMs=10000`);
    expect(deadJob.body).toMatchObject({ state: 'dead', errors: [{ message: 'no such image' }] });
    const running = await call('POST', path, { data: { fail: false } });
    await waitUntil(async () => (await q.getJob(running.body.id))?.state === 'active', 'the job to start');
    const started = Date.now();
    const timedOut = await call('GET', `${path}/${running.body.id}?waitMs=300`);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    expect([timedOut.status, timedOut.body.state]).toEqual([200, 'active']);
  });

  it('answers a finished job at once, takes waitMs up to MAX_WAIT_MS, refuses more with 400', async () => {
    const q = queue();
    const { id } = await q.add({ n: 1 });
    await q.cancel(id);
    const path = `/api/queues/${q.name}/jobs/${id}`;
    const at = await call('GET', `${path}?waitMs=${MAX_WAIT_MS}`);
    expect([at.status, at.body.state]).toEqual([200, 'dead']);
    const over = await call('GET', `${path}?waitMs=${MAX_WAIT_MS + 1}`);
    expect([over.status, over.body.error.code]).toEqual([400, 'ERR_INVALID_OPTION']);
    expect((await call('GET', `${path}?waitMs=-1`)).status).toBe(400);
  });

  it('answers 404 for a job that does not exist, with or without waitMs, and for other paths', async () => {
    const q = queue();
    for (const suffix of ['', '?waitMs=1000']) {
      const r = await call('GET', `/api/queues/${q.name}/jobs/nope${suffix}`);
      expect([r.status, r.body.error.code]).toEqual([404, 'ERR_JOB_NOT_FOUND']);
    }
    const other = await call('GET', `/api/queues/${q.name}`);
    expect([other.status, other.body.error.code]).toEqual([404, 'ERR_NOT_FOUND']);
    const wrongMethod = await call('GET', `/api/queues/${q.name}/jobs`);
    expect([wrongMethod.status, wrongMethod.res.headers.get('allow')]).toEqual([405, 'POST']);
  });
});

describe('waits', () => {
  it('holds at most maxWaits waiting GETs: one more gets 503 ERR_TOO_MANY_WAITS until one ends', async () => {
    const s = await serve({ maxWaits: 2 });
    const [q1, q2] = [queue(), queue()];
    const [a, b] = [await q1.add({ n: 1 }), await q2.add({ n: 2 })];
    const wait = (q: Queue, id: string, waitMs = 10_000) =>
      call('GET', `/api/queues/${q.name}/jobs/${id}?waitMs=${waitMs}`, undefined, bearer, s);
    const first = wait(q1, a.id);
    await subscribed(q1);
    const second = wait(q2, b.id);
    await subscribed(q2);
    const refused = await wait(q1, a.id);
    expect([refused.status, refused.body.error.code]).toEqual([503, 'ERR_TOO_MANY_WAITS']);
    expect(refused.res.headers.get('retry-after')).toBe('1');
    await q1.cancel(a.id); // ends the first wait (the job is dead)
    expect((await first).body.state).toBe('dead');
    const c = await q1.add({ n: 3 });
    const again = await wait(q1, c.id, 50);
    expect([again.status, again.body.state]).toEqual([200, 'waiting']);
    await q2.cancel(b.id);
    expect((await second).body.state).toBe('dead');
  });

  it('a client that goes away while waiting causes no warning, and its place among the waits is freed at once', async () => {
    const s = await serve({ maxWaits: 1 });
    const q = queue();
    const { id } = await q.add({});
    const path = `/api/queues/${q.name}/jobs/${id}`;
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const controller = new AbortController();
      const first = fetch(`${s.url}${path}?waitMs=30000`, { headers: bearer, signal: controller.signal });
      first.catch(() => {});
      await subscribed(q);
      const refused = await call('GET', `${path}?waitMs=10`, undefined, bearer, s);
      expect([refused.status, refused.body.error.code]).toEqual([503, 'ERR_TOO_MANY_WAITS']);
      controller.abort();
      await expect(first).rejects.toThrow();
      // Freed long before the abandoned wait's 30 s: the server's abort reaches queue.waitFor.
      await waitUntil(
        async () => (await call('GET', `${path}?waitMs=10`, undefined, bearer, s)).status === 200,
        'the abandoned wait to be freed',
        5_000,
      );
      expect(warnings).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe('mounting', () => {
  it('serves under a basePath', async () => {
    const s = await serve({ basePath: '/surety/' });
    const q = queue();
    const added = await call('POST', `/surety/api/queues/${q.name}/jobs`, { data: 1 }, undefined, s);
    expect(added.status).toBe(201);
    const read = await fetch(
      new URL(added.res.headers.get('location')!, `${s.url}/surety/api/queues/${q.name}/jobs`),
      {
        headers: bearer,
      },
    );
    expect([read.status, ((await read.json()) as { data: unknown }).data]).toEqual([200, 1]);
    expect((await call('POST', `/api/queues/${q.name}/jobs`, { data: 1 }, undefined, s)).status).toBe(404);
    // Any other path is 404 to an authenticated client only.
    expect((await call('GET', '/surety/', undefined, bearer, s)).status).toBe(404);
    expect((await call('GET', '/surety/', undefined, {}, s)).status).toBe(401);
  });

  it('a dashboard with a token serves it (Bearer, no CSRF token); its page keeps Basic auth for reads', async () => {
    const s = await listen(createDashboard({ connection: fx.url, auth: { token: TOKEN } }));
    const q = queue();
    const path = `/api/queues/${q.name}/jobs`;
    const added = await call('POST', path, { data: { n: 1 } }, undefined, s);
    expect(added.status).toBe(201);
    const basic = { authorization: `Basic ${Buffer.from(`u:${TOKEN}`).toString('base64')}` };
    const read = await call('GET', `${path}/${added.body.id}`, undefined, basic, s);
    expect([read.status, read.body.data]).toEqual([200, { n: 1 }]);
    // The producer's routes take Bearer only: a POST with the page's Basic credentials is refused.
    const viaBasic = await call(
      'POST',
      path,
      { data: 2 },
      { ...basic, 'content-type': 'application/json' },
      s,
    );
    expect(viaBasic.status).toBe(401);
    const waited = await call('GET', `${path}/${added.body.id}?waitMs=50`, undefined, bearer, s);
    expect([waited.status, waited.body.state]).toEqual([200, 'waiting']);
    expect((await q.counts()).waiting).toBe(1);
  });

  it('a dashboard without a token, or read-only, or with producerApi: false does not add jobs', async () => {
    const q = queue();
    const path = `/api/queues/${q.name}/jobs`;
    const open = await listen(createDashboard({ connection: fx.url }));
    expect((await call('POST', path, { data: 1 }, undefined, open)).body.error.code).toBe(
      'ERR_BODY_NOT_ALLOWED',
    );
    const readOnly = await listen(
      createDashboard({ connection: fx.url, auth: { token: TOKEN }, readOnly: true }),
    );
    expect((await call('POST', path, { data: 1 }, undefined, readOnly)).body.error.code).toBe(
      'ERR_READ_ONLY',
    );
    const off = await listen(
      createDashboard({ connection: fx.url, auth: { token: TOKEN }, producerApi: false }),
    );
    expect((await call('POST', path, { data: 1 }, undefined, off)).status).toBe(413);
    expect((await q.counts()).waiting).toBe(0);
    expect(() => createDashboard({ connection: fx.url, producerApi: true })).toThrow(/needs auth/);
  });
});

describe('surety dashboard (CLI)', () => {
  const BIN = fileURLToPath(new URL('../../bin/surety.js', import.meta.url));

  it('serves the producer API when started with a token, not with --no-producer-api; --help says so', async () => {
    const help = await run(process.execPath, [BIN, 'dashboard', '--help']);
    // Compared with its line breaks as spaces: the wrapping depends on the terminal's width.
    expect(help.stdout.replace(/\s+/g, ' ')).toContain('POST /api/queues/<name>/jobs adds jobs');
    expect(help.stdout).toContain('--no-producer-api');
    const start = async (args: string[]) => {
      const env: NodeJS.ProcessEnv = { ...process.env, REDIS_URL: fx.url, SURETY_DASHBOARD_TOKEN: TOKEN };
      const proc = spawn(process.execPath, [BIN, 'dashboard', '--port', '0', '--json', ...args], { env });
      let stdout = '';
      proc.stdout.on('data', (d) => {
        stdout += d;
      });
      const exited = new Promise((resolve) => proc.on('close', resolve));
      closers.unshift(async () => {
        if (proc.exitCode === null) proc.kill('SIGTERM');
        await exited;
      });
      const line = await waitUntil(() => /\{.*"event":"ready".*\}/.exec(stdout)?.[0], 'ready line', 15_000);
      return { ready: JSON.parse(line) as { url: string; producerApi: boolean }, proc, exited };
    };
    const q = queue();
    const on = await start([]);
    expect(on.ready.producerApi).toBe(true);
    const added = await fetch(`${on.ready.url}api/queues/${q.name}/jobs`, {
      method: 'POST',
      headers: { ...bearer, 'content-type': 'application/json' },
      body: JSON.stringify({ data: { n: 1 }, options: { id: 'from-cli' } }),
    });
    expect(added.status).toBe(201);
    expect((await q.getJob('from-cli'))?.data).toEqual({ n: 1 });
    on.proc.kill('SIGTERM');
    expect(await on.exited).toBe(0);
    const off = await start(['--no-producer-api']);
    expect(off.ready.producerApi).toBe(false);
  });
});

describe('the Python example (examples/http/enqueue.py)', () => {
  const example = new URL('../../examples/http/enqueue.py', import.meta.url).pathname;

  it('is the code shown in docs/http-api.md', () => {
    const doc = readFileSync(new URL('../../docs/http-api.md', import.meta.url), 'utf8');
    expect(doc).toContain(readFileSync(example, 'utf8').trim());
  });

  it('enqueues a job, re-sends it safely, and prints the result a worker returns', async () => {
    const q = queue();
    const worker = new Worker(
      q.name,
      async (job) => {
        const { image, width } = job.data as { image: string; width: number };
        return { thumbnail: `${image.replace(/\.png$/, '')}-${width}.png` };
      },
      { connection: fx.url },
    );
    closers.unshift(() => worker.close());
    const env = { PATH: process.env.PATH, SURETY_URL: api.url, SURETY_TOKEN: TOKEN, SURETY_QUEUE: q.name };
    const { stdout } = await run('python3', [example], { env, timeout: 20_000 }).catch((err) => {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT')
        throw new Error('python3 is needed to run the Python example (bash .ci/run installs it)');
      throw err;
    });
    const lines = stdout.trim().split('\n');
    // active: the idle worker took the job in the add (a handoff); waiting: it claims it after.
    expect(lines[0]).toMatch(/^added thumbnail:cat\.png:200 \((waiting|active)\)$/);
    expect(lines.slice(1)).toEqual([
      'sent again: 200, same job thumbnail:cat.png:200, isNew=False',
      'completed: {"thumbnail": "cat-200.png"}',
    ]);
    expect(await q.counts()).toMatchObject({ completed: 1, waiting: 0 });
  });
});
