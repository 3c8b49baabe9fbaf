/**
 * `createDashboard(options)`: the web dashboard, JSON API and Prometheus metrics as one fetch-style
 * handler. Mount it with `toNodeListener(dashboard)` on node:http, Express, Fastify, or any runtime
 * that speaks `Request -> Response`. It reads and changes queues only through the Queue admin API.
 *
 *   GET  /             the page (one HTML document, inline CSS and JS, no external assets)
 *   GET  /api/...      JSON API (see api.ts); POST actions need the `x-surety-csrf` header
 *   GET  /api/events   Server-Sent Events: every queue's counts every `eventsIntervalMs`
 *   GET  /metrics      Prometheus text format (surety_jobs{queue,state}, surety_workers{queue}, and
 *                      whatever else is in `options.registry`, e.g. workerMetrics' counters)
 *   POST /api/queues/:q/jobs, GET /api/queues/:q/jobs/:id?waitMs=   the producer API (producer-api.ts),
 *                      with a token only
 */
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { Registry } from 'prom-client';
import { ValidationError } from '../errors.js';
import { MAX_METRICS_RETENTION_MS } from '../queue/metrics-history.js';
import type { ConnectionOption } from '../redis/client.js';
import { checkTimerMs } from '../validate.js';
import { handleApi, isMutation } from './api.js';
import { errorResponse, HttpError, json, withSecurityHeaders } from './http.js';
import { queueMetrics } from './metrics.js';
import { renderPage } from './page.js';
import { dashboardRoute, ProducerRoutes } from './producer-api.js';
import { QueueRegistry } from './queues.js';
import { type AuthOptions, Csrf, checkAuth, checkHost } from './security.js';
import { eventStream } from './sse.js';

export { type FetchHandler, toNodeListener } from './http.js';
export { queueMetrics, type WorkerMetrics, workerMetrics } from './metrics.js';
export {
  createProducerApi,
  MAX_JOBS_PER_REQUEST,
  MAX_WAIT_MS,
  type ProducerApi,
  type ProducerApiOptions,
} from './producer-api.js';
export { type AuthOptions, isLoopbackHost } from './security.js';

export interface DashboardOptions {
  /** Redis: a URL, ioredis options, or your own client (not closed by `close()`). */
  connection?: ConnectionOption;
  /** Key prefix of the queues. Default 'surety'. */
  prefix?: string;
  /** Refuse every POST (403 ERR_READ_ONLY); the page hides its action buttons. Default false. */
  readOnly?: boolean;
  /** Require this token on every request (Bearer, or Basic auth password). Default: none. */
  auth?: AuthOptions;
  /**
   * Path prefix to strip when the server passes full paths (plain node:http under '/admin/surety').
   * Frameworks that strip their mount path themselves (Express `app.use(path, ...)`) need none.
   * Default '' (the root).
   */
  basePath?: string;
  /** Accepted Host header names ('loopback': localhost and loopback addresses). Default: any. */
  allowedHosts?: string[] | 'loopback';
  /** Interval of the live counts stream. Default 1 500 ms. */
  eventsIntervalMs?: number;
  /**
   * prom-client Registry that `/metrics` serves; the queue gauges are added to it. Pass the one given to
   * `workerMetrics(worker, registry)` to serve both on one endpoint (one dashboard per registry).
   * Default: a registry of its own.
   */
  registry?: Registry;
  /**
   * Serve the producer API (POST /api/queues/:q/jobs, GET .../jobs/:id?waitMs=; docs/http-api.md),
   * Bearer token only. Default: on when `auth` is given; it cannot be turned on without `auth`.
   */
  producerApi?: boolean;
  /**
   * Keep every listed queue's per-minute metrics this long (queue.setMetricsRetention: whole minutes,
   * up to 7 days), applied once per queue when the dashboard first lists it. Default: leave it as set.
   */
  metricsRetentionMs?: number;
}

export interface Dashboard {
  fetch(req: Request): Promise<Response>;
  /** The per-process token the page sends in `x-surety-csrf` with every POST. */
  readonly csrfToken: string;
  close(): Promise<void>;
}

/** Methods the dashboard answers; any other gets 405 before any other check. */
const METHODS = new Set(['GET', 'HEAD', 'POST']);
/** Longest request URL accepted (414 beyond): no route needs more than a job id and a few params. */
export const MAX_URL_LENGTH = 8_192;
/** Most `/api/events` streams open at once (503 beyond): each one reads every queue's counts. */
export const MAX_EVENT_STREAMS = 64;

/**
 * Refuses, before any other work, what no route answers: another method than GET, HEAD or POST
 * (405), an absurdly long URL (414), a request body (413: no endpoint reads one, so a body is never
 * buffered; `connection: close` keeps the server from reading it to find the next request).
 */
function checkRequest(req: Request): void {
  if (!METHODS.has(req.method))
    throw new HttpError(405, 'ERR_METHOD_NOT_ALLOWED', `${req.method} not allowed, use GET, HEAD or POST`, {
      allow: 'GET, HEAD, POST',
    });
  if (req.url.length > MAX_URL_LENGTH)
    throw new HttpError(414, 'ERR_URI_TOO_LONG', `the URL is longer than ${MAX_URL_LENGTH} characters`, {
      connection: 'close',
    });
  const length = req.headers.get('content-length');
  if ((length !== null && length.trim() !== '0') || req.headers.has('transfer-encoding'))
    throw new HttpError(
      413,
      'ERR_BODY_NOT_ALLOWED',
      'dashboard requests take no body (parameters go in the URL)',
      {
        connection: 'close',
      },
    );
}

function checkOptions(
  opts: DashboardOptions,
): Required<Pick<DashboardOptions, 'basePath' | 'eventsIntervalMs'>> {
  const basePath = (opts.basePath ?? '').replace(/\/+$/, '');
  if (basePath !== '' && !/^\/[A-Za-z0-9._~\-/]*$/.test(basePath))
    throw new ValidationError(
      `basePath must start with / and use URL-safe characters, got ${JSON.stringify(opts.basePath)}`,
    );
  if (opts.auth !== undefined && (typeof opts.auth.token !== 'string' || opts.auth.token.length < 8))
    throw new ValidationError('auth.token must be a string of at least 8 characters');
  if (opts.producerApi === true && opts.auth === undefined)
    throw new ValidationError('producerApi needs auth: the producer API always requires a token');
  const eventsIntervalMs = checkTimerMs('eventsIntervalMs', opts.eventsIntervalMs ?? 1_500, 100);
  return { basePath, eventsIntervalMs };
}

function checkRetention(ms: number | undefined): number | undefined {
  if (ms === undefined) return undefined;
  if (!Number.isInteger(ms) || ms < 60_000 || ms > MAX_METRICS_RETENTION_MS || ms % 60_000 !== 0)
    throw new ValidationError(
      `metricsRetentionMs must be a whole number of minutes from 60000 to ${MAX_METRICS_RETENTION_MS} ms, got ${String(ms)}`,
    );
  return ms;
}

export function createDashboard(opts: DashboardOptions = {}): Dashboard {
  const { basePath, eventsIntervalMs } = checkOptions(opts);
  const queues = new QueueRegistry(opts.connection, opts.prefix);
  queues.metricsRetentionMs = checkRetention(opts.metricsRetentionMs);
  const registry = queueMetrics(queues, opts.registry);
  const csrf = new Csrf();
  const closing = new AbortController();
  // One abort listener per open event stream (removed when it stops): up to MAX_EVENT_STREAMS.
  setMaxListeners(MAX_EVENT_STREAMS + 1, closing.signal);
  const readOnly = opts.readOnly === true;
  const producer =
    opts.auth && opts.producerApi !== false
      ? new ProducerRoutes(queues, { token: opts.auth.token, allowedHosts: opts.allowedHosts, readOnly })
      : null;

  let streams = 0;

  async function route(req: Request): Promise<Response> {
    // The producer API's requests carry a JSON body and a Bearer token instead of a CSRF token:
    // they go through its own checks (producer-api.ts), since checkRequest refuses every body.
    const produced = producer && dashboardRoute(req, basePath);
    if (producer && produced) return producer.answer(req, produced);
    checkRequest(req);
    checkHost(req, opts.allowedHosts);
    checkAuth(req, opts.auth);
    const pathname = new URL(req.url).pathname;
    if (basePath && pathname !== basePath && !pathname.startsWith(`${basePath}/`))
      throw new HttpError(404, 'ERR_NOT_FOUND', `no such path: ${pathname}`);
    const path = pathname.slice(basePath.length) || '/';
    if (isMutation(req)) {
      if (readOnly) throw new HttpError(403, 'ERR_READ_ONLY', 'this dashboard is read-only');
      csrf.check(req);
    }
    const read = req.method === 'GET' || req.method === 'HEAD';
    if (path === '/' && read) {
      const nonce = randomBytes(16).toString('base64');
      return new Response(renderPage({ csrf: csrf.token, nonce, readOnly }), {
        headers: withSecurityHeaders({
          'content-type': 'text/html; charset=utf-8',
          'content-security-policy': `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
          'x-frame-options': 'DENY',
        }),
      });
    }
    if (path === '/metrics' && read)
      return new Response(await registry.metrics(), {
        headers: withSecurityHeaders({ 'content-type': registry.contentType }),
      });
    if (path === '/api/events' && req.method === 'GET') {
      if (streams >= MAX_EVENT_STREAMS)
        throw new HttpError(
          503,
          'ERR_TOO_MANY_STREAMS',
          `${MAX_EVENT_STREAMS} event streams are open already: close one (another tab?) and retry`,
          { 'retry-after': '5' },
        );
      streams++;
      return eventStream(req, queues, eventsIntervalMs, closing.signal, () => streams--);
    }
    if (path.startsWith('/api/')) return handleApi(req, path, queues);
    return json({ error: { code: 'ERR_NOT_FOUND', message: `no such path: ${pathname}` } }, 404);
  }

  return {
    csrfToken: csrf.token,
    async fetch(req: Request): Promise<Response> {
      try {
        return await route(req);
      } catch (err) {
        if (!(err instanceof HttpError) && errorResponse(err).status === 500)
          process.emitWarning(
            `surety dashboard: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
          );
        return errorResponse(err);
      }
    },
    async close(): Promise<void> {
      closing.abort();
      await queues.close();
    },
  };
}
