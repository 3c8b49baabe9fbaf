/**
 * The producer API: enqueue jobs and read (or wait for) their outcome over HTTP, for services in other
 * languages (docs/http-api.md). A thin client of queue.add / addBulk / getJob / waitFor.
 *
 *   POST /api/queues/:q/jobs          { data, options } or { jobs: [{ data, options }, ...] }
 *                                     201 { id, state, isNew } (bulk: { jobs: [...] }); an id that exists: 200
 *   GET  /api/queues/:q/jobs/:id      the job (JobInfo); ?waitMs=N (<= 30 000) waits until it completes or
 *                                     ends dead, and answers the job as it is then, finished or not
 *   POST /api/queues/:q/jobs/:id/signals/:name   { payload? }: queue.signal; 200 { delivered: true, state,
 *                                     woke }; a job that ended (or keeps 1 000 signals) 409, none 404,
 *                                     each with { delivered: false, state, reason } beside the error
 *
 * Mounted alone (`createProducerApi`) or by `createDashboard` when it has a token. Only
 * `Authorization: Bearer <token>` is accepted (a browser never sends it by itself, unlike Basic
 * credentials or cookies), and a POST must be `Content-Type: application/json` (a cross-site page
 * cannot send that without a CORS preflight, which is refused): no CSRF token is needed.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { JobFailedError, SuretyError, ValidationError, WaitTimeoutError } from '../errors.js';
import type { Queue } from '../queue/queue.js';
import type { ConnectionOption } from '../redis/client.js';
import type { JobInfo } from '../types.js';
import { checkInt, checkKnownKeys, checkObject } from '../validate.js';
import { errorResponse, HttpError, json } from './http.js';
import {
  checkJsonType,
  DEFAULT_MAX_BODY_BYTES,
  type JobItem,
  jobsOf,
  MAX_BODY_BYTES,
  readJson,
} from './producer-request.js';
import { QueueRegistry } from './queues.js';
import { checkHost } from './security.js';

export { DEFAULT_MAX_BODY_BYTES, MAX_BODY_BYTES, MAX_JOBS_PER_REQUEST } from './producer-request.js';

/** Longest wait one GET may ask for (`waitMs`): below common proxy and client idle timeouts (60 s). */
export const MAX_WAIT_MS = 30_000;
/** Default bound of the GETs waiting at once (503 ERR_TOO_MANY_WAITS beyond): each holds a connection and a timer. */
export const DEFAULT_MAX_WAITS = 1_000;
/** Longest request URL accepted (414 beyond), as in the dashboard. */
const MAX_URL_LENGTH = 8_192;
/**
 * Failures a client should retry after a moment (503): Redis full or unreachable, replicas behind
 * (the job was added: a retry with the same id is safe), a repartition under way.
 */
const RETRY_LATER = new Set(['ERR_REDIS_OOM', 'ERR_CONNECTION', 'ERR_DURABILITY', 'ERR_PARTITIONS_MISMATCH']);

export interface ProducerApiOptions {
  /** Redis: a URL, ioredis options, or your own client (not closed by `close()`). */
  connection?: ConnectionOption;
  /** Required: clients send `Authorization: Bearer <token>`. At least 8 characters. */
  token: string;
  /** Key prefix of the queues. Default 'surety'. */
  prefix?: string;
  /** Path prefix to strip when the server passes full paths (as in createDashboard). Default ''. */
  basePath?: string;
  /** Accepted Host header names ('loopback': localhost and loopback addresses). Default: any. */
  allowedHosts?: string[] | 'loopback';
  /** Largest request body, in bytes (413 beyond). Default 1 MiB, at most 64 MiB. */
  maxBodyBytes?: number;
  /** Most GETs with waitMs waiting at once (503 ERR_TOO_MANY_WAITS beyond). Default 1 000. */
  maxWaits?: number;
}

export interface ProducerApi {
  fetch(req: Request): Promise<Response>;
  close(): Promise<void>;
}

/** What the routes need from their host (createProducerApi, or createDashboard). */
export interface ProducerRouteOptions {
  token: string;
  allowedHosts?: string[] | 'loopback' | undefined;
  readOnly?: boolean;
  maxBodyBytes?: number;
  maxWaits?: number;
}

export interface Route {
  name: string;
  /** Absent for the queue's job collection (POST). */
  id?: string;
  /** A signal's name: POST .../jobs/:id/signals/:signal. */
  signal?: string;
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

export function checkToken(token: unknown): string {
  if (typeof token !== 'string' || token.length < 8)
    throw new ValidationError(
      'token must be a string of at least 8 characters: the producer API always requires one (it adds jobs)',
    );
  return token;
}

export function checkBasePath(value: unknown): string {
  const basePath = typeof value === 'string' ? value.replace(/\/+$/, '') : value;
  if (basePath === undefined || basePath === '') return '';
  if (typeof basePath !== 'string' || !/^\/[A-Za-z0-9._~\-/]*$/.test(basePath))
    throw new ValidationError(
      `basePath must start with / and use URL-safe characters, got ${JSON.stringify(value)}`,
    );
  return basePath;
}

/** The limits of ProducerRouteOptions, checked (a ValidationError names the option). */
function resolveLimits(opts: ProducerRouteOptions): { maxBodyBytes: number; maxWaits: number } {
  return {
    maxBodyBytes: checkInt('maxBodyBytes', opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES, 1, MAX_BODY_BYTES),
    maxWaits: checkInt('maxWaits', opts.maxWaits ?? DEFAULT_MAX_WAITS, 0, 1_000_000),
  };
}

/** The producer routes over a QueueRegistry: checks (host, token, read-only), then the Queue API. */
export class ProducerRoutes {
  private readonly token: Buffer;
  private readonly maxBodyBytes: number;
  private readonly maxWaits: number;
  private waits = 0;

  constructor(
    private readonly queues: QueueRegistry,
    private readonly opts: ProducerRouteOptions,
  ) {
    this.token = digest(checkToken(opts.token));
    ({ maxBodyBytes: this.maxBodyBytes, maxWaits: this.maxWaits } = resolveLimits(opts));
  }

  /** The producer route of `path` (stripped of the base path), whatever the method; null for any other path. */
  static match(path: string): Route | null {
    const parts = path.split('/');
    // ['', 'api', 'queues', name, 'jobs'], [..., 'jobs', id] or [..., 'jobs', id, 'signals', signal]
    if (parts.length < 5 || parts.length === 7 || parts.length > 8) return null;
    if (parts[0] !== '' || parts[1] !== 'api' || parts[2] !== 'queues' || parts[4] !== 'jobs') return null;
    if (parts.some((p, i) => i > 0 && p === '')) return null;
    if (parts.length === 8 && parts[6] !== 'signals') return null;
    try {
      const name = decodeURIComponent(parts[3]!);
      if (parts.length === 5) return { name };
      const id = decodeURIComponent(parts[5]!);
      return parts.length === 6 ? { name, id } : { name, id, signal: decodeURIComponent(parts[7]!) };
    } catch {
      throw new HttpError(400, 'ERR_BAD_REQUEST', `malformed path: ${path}`);
    }
  }

  /**
   * Answers a request for `route` (null: no such route, 404 once authenticated). Never rejects:
   * errors become their status (Redis full or unreachable: 503 with Retry-After, so clients retry).
   */
  async answer(req: Request, route: Route | null): Promise<Response> {
    try {
      if (req.url.length > MAX_URL_LENGTH)
        throw new HttpError(414, 'ERR_URI_TOO_LONG', `the URL is longer than ${MAX_URL_LENGTH} characters`);
      // The method first: a CORS preflight (OPTIONS) gets 405, as it would from the dashboard.
      const posts = route !== null && (route.id === undefined || route.signal !== undefined);
      if (posts && req.method !== 'POST') throw notAllowed(req, 'POST');
      if (route && !posts && req.method !== 'GET' && req.method !== 'HEAD') throw notAllowed(req, 'GET');
      checkHost(req, this.opts.allowedHosts);
      checkBearer(req, this.token);
      if (!route) throw new HttpError(404, 'ERR_NOT_FOUND', `no such endpoint: ${new URL(req.url).pathname}`);
      if (posts) {
        if (this.opts.readOnly) throw new HttpError(403, 'ERR_READ_ONLY', 'this server is read-only');
        checkJsonType(req);
        const body = await readJson(req, this.maxBodyBytes);
        if (route.signal !== undefined) return await this.signal(route.name, route.id!, route.signal, body);
        return await this.add(route.name, body);
      }
      const waitMs = waitParam(new URL(req.url).searchParams);
      return json(await this.read(route.name, route.id!, waitMs, req.signal));
    } catch (err) {
      // The client went away (mid-body, say): no one reads the answer, and it is not a server fault.
      if (req.signal.aborted)
        return errorResponse(new HttpError(400, 'ERR_BAD_REQUEST', 'the client went away'));
      const response = producerError(err);
      // A body left unread (refused before reading it): close rather than read it to find the next request.
      if (req.body !== null && !req.bodyUsed) response.headers.set('connection', 'close');
      return response;
    }
  }

  private async add(name: string, body: unknown): Promise<Response> {
    const { bulk, items } = jobsOf(body);
    const added = await this.queues.use(name, (queue) => addItems(queue, bulk, items));
    const created = added.some((a) => a.isNew);
    const status = created ? 201 : 200;
    const rows = added.map(({ id, state, isNew }) => ({ id, state, isNew }));
    if (bulk) return json({ jobs: rows }, status);
    // Relative to this URL (.../jobs), so it stays right under any mount point (Express strips its own).
    return json(rows[0], status, { location: `jobs/${encodeURIComponent(rows[0]!.id)}` });
  }

  /** queue.signal: 200 when the job keeps it; 404 (no such job) or 409 (ended, full) with the answer. */
  private async signal(name: string, id: string, signal: string, body: unknown): Promise<Response> {
    const request = checkObject('signal request', body) as { payload?: unknown };
    checkKnownKeys('signal request', request, ['payload']);
    const { payload } = request;
    const r = await this.queues.use(name, (queue) => queue.signal(id, signal, payload));
    if (r.delivered) return json(r);
    const error =
      r.reason === 'missing'
        ? { status: 404, code: 'ERR_JOB_NOT_FOUND', message: `job ${JSON.stringify(id)} does not exist` }
        : {
            status: 409,
            code: 'ERR_SIGNAL_NOT_DELIVERED',
            message:
              r.reason === 'full'
                ? `job ${JSON.stringify(id)} keeps 1 000 signals no wait has taken`
                : `job ${JSON.stringify(id)} has ended (${r.state}): nothing will take the signal`,
          };
    return json({ error: { code: error.code, message: error.message }, ...r }, error.status);
  }

  /** The job; with waitMs > 0 and the job unfinished, once it finishes or waitMs has passed. */
  private read(name: string, id: string, waitMs: number, signal: AbortSignal): Promise<JobInfo> {
    return this.queues.use(name, async (queue) => {
      const job = await queue.getJob(id);
      if (!job) throw notFound(id);
      if (waitMs === 0 || job.state === 'completed' || job.state === 'dead') return job;
      if (this.waits >= this.maxWaits)
        throw new HttpError(
          503,
          'ERR_TOO_MANY_WAITS',
          `${this.maxWaits} requests are waiting already; retry, or poll without waitMs`,
          { 'retry-after': '1' },
        );
      this.waits++;
      // A client that goes away (the request's signal aborts) ends the wait at once, and its place
      // in `waits` with it.
      const ended = queue.waitFor(id, { timeoutMs: waitMs, signal }).then(
        () => 'ended' as const,
        (err: unknown) => {
          // Dead (JobFailedError) or still running (WaitTimeoutError): answered with the job as it is now.
          if (err instanceof JobFailedError || err instanceof WaitTimeoutError) return 'ended' as const;
          if (signal.aborted) return 'gone' as const;
          throw err;
        },
      );
      if ((await ended.finally(() => this.waits--)) === 'gone') return job; // no one reads it
      const now = await queue.getJob(id);
      if (!now) throw notFound(id);
      return now;
    });
  }
}

async function addItems(queue: Queue, bulk: boolean, items: JobItem[]) {
  if (!bulk) return [await queue.add(items[0]!.data, items[0]!.opts)];
  return queue.addBulk(items);
}

function checkBearer(req: Request, token: Buffer): void {
  const m = /^Bearer +(\S+) *$/i.exec(req.headers.get('authorization') ?? '');
  // Digests have one length, so the comparison takes the same time whatever the token sent.
  if (!m || !timingSafeEqual(digest(m[1]!), token))
    throw new HttpError(
      401,
      'ERR_UNAUTHORIZED',
      'missing or wrong token: send Authorization: Bearer <token>',
      // Bearer, not Basic: a browser would prompt for Basic credentials, then send them by itself.
      { 'www-authenticate': 'Bearer realm="surety"' },
    );
}

/**
 * The producer route a dashboard hands over, or null: POST .../jobs (a JSON body, which the
 * dashboard's own API refuses) and GET .../jobs/:id with waitMs. A GET without waitMs stays the
 * dashboard's: the same JobInfo, with the dashboard's auth (its page sends Basic credentials).
 */
export function dashboardRoute(req: Request, basePath: string): Route | null {
  const url = new URL(req.url);
  if (basePath !== '' && !url.pathname.startsWith(`${basePath}/`)) return null;
  const route = ProducerRoutes.match(url.pathname.slice(basePath.length));
  if (!route) return null;
  if (route.id === undefined || route.signal !== undefined) return req.method === 'POST' ? route : null;
  return url.searchParams.has('waitMs') ? route : null;
}

function notFound(id: string): HttpError {
  return new HttpError(404, 'ERR_JOB_NOT_FOUND', `job ${JSON.stringify(id)} does not exist`);
}

function notAllowed(req: Request, allow: string): HttpError {
  return new HttpError(405, 'ERR_METHOD_NOT_ALLOWED', `${req.method} not allowed here, use ${allow}`, {
    allow: allow === 'GET' ? 'GET, HEAD' : allow,
  });
}

function waitParam(params: URLSearchParams): number {
  const raw = params.get('waitMs');
  if (raw === null || raw === '') return 0;
  const n = /^\d{1,6}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(n <= MAX_WAIT_MS))
    throw new ValidationError(
      `waitMs must be an integer from 0 to ${MAX_WAIT_MS}, got ${JSON.stringify(raw.slice(0, 40))}`,
    );
  return n;
}

/** errorResponse, with transient failures as 503 + Retry-After; unexpected ones become a process warning. */
export function producerError(err: unknown): Response {
  if (err instanceof SuretyError && RETRY_LATER.has(err.code))
    return json({ error: { code: err.code, message: err.message } }, 503, { 'retry-after': '1' });
  const response = errorResponse(err);
  if (response.status === 500)
    process.emitWarning(
      `surety producer API: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
    );
  return response;
}

/**
 * The producer API alone, as a fetch-style handler (mount it with `toNodeListener`). A token is
 * required: the API adds jobs, which run code in your workers.
 */
export function createProducerApi(opts: ProducerApiOptions): ProducerApi {
  checkKnownKeys('producer API options', checkObject('producer API options', opts), [
    'connection',
    'token',
    'prefix',
    'basePath',
    'allowedHosts',
    'maxBodyBytes',
    'maxWaits',
  ]);
  checkToken(opts.token);
  const basePath = checkBasePath(opts.basePath);
  // Every option is checked before the registry connects: a refused one leaves nothing open.
  resolveLimits(opts);
  const queues = new QueueRegistry(opts.connection, opts.prefix);
  const routes = new ProducerRoutes(queues, opts);
  return {
    async fetch(req: Request): Promise<Response> {
      try {
        const pathname = new URL(req.url).pathname;
        const inside = basePath === '' || pathname.startsWith(`${basePath}/`);
        // Other paths are 404 too, but only to an authenticated client: the others learn nothing.
        return await routes.answer(
          req,
          inside ? ProducerRoutes.match(pathname.slice(basePath.length)) : null,
        );
      } catch (err) {
        return producerError(err);
      }
    },
    close: () => queues.close(),
  };
}
