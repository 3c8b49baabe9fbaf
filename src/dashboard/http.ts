/**
 * Small HTTP helpers for the dashboard: JSON responses, the mapping from SuretyError codes to HTTP
 * statuses, and `toNodeListener`, which mounts any fetch-style handler on node:http (and so on
 * Express, Fastify or Hono's node server).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { ReadableStream as NodeWebStream } from 'node:stream/web';
import { SuretyError, ValidationError } from '../errors.js';

export type FetchHandler = (req: Request) => Promise<Response>;

/** A request refused before it reached the admin API (bad route, body, auth, CSRF, read-only). */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** Refuses a request whose method is not `expected` (HEAD counts as GET) with 405 and an Allow header. */
export function method(req: Request, expected: 'GET' | 'POST'): void {
  const actual = req.method === 'HEAD' ? 'GET' : req.method;
  if (actual !== expected)
    throw new HttpError(405, 'ERR_METHOD_NOT_ALLOWED', `${req.method} not allowed here, use ${expected}`, {
      allow: expected,
    });
}

const SECURITY_HEADERS: Record<string, string> = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', ...SECURITY_HEADERS, ...headers },
  });
}

export function withSecurityHeaders(headers: Record<string, string>): Record<string, string> {
  return { ...SECURITY_HEADERS, ...headers };
}

/** HTTP status for a SuretyError code: 404 not found, 409 wrong state, 400 bad input, else 500. */
export function statusOf(err: unknown): number {
  if (err instanceof HttpError) return err.status;
  if (err instanceof ValidationError) return 400;
  if (err instanceof SuretyError) {
    if (err.code === 'ERR_JOB_NOT_FOUND') return 404;
    if (err.code === 'ERR_INVALID_STATE') return 409;
  }
  return 500;
}

/** `{ error: { code, message } }` with the status the error maps to. Unknown errors hide their message. */
export function errorResponse(err: unknown): Response {
  const status = statusOf(err);
  if (err instanceof HttpError)
    return json({ error: { code: err.code, message: err.message } }, status, err.headers);
  if (err instanceof SuretyError) return json({ error: { code: err.code, message: err.message } }, status);
  return json({ error: { code: 'ERR_INTERNAL', message: 'internal error (see the server log)' } }, 500);
}

/** A Host header: a name or IPv4 address, or a bracketed IPv6 address, and an optional port. */
const HOST = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+,;=-]+)(?::[0-9]{1,5})?$/;
/** Methods the fetch API refuses to build a Request for. */
const FORBIDDEN_METHODS = new Set(['CONNECT', 'TRACE', 'TRACK']);

/**
 * The URL of a node:http request, or an HttpError for a request no fetch handler can be given: a
 * malformed Host header, a request target that is neither a path (`/...`) nor an absolute http(s) URL
 * (`*`, garbage). A path is appended to the authority, never resolved against it, so `//other/x`
 * stays a path on this host instead of switching hosts.
 */
function requestUrl(req: IncomingMessage): URL {
  const target = req.url ?? '/';
  const bad = (what: string) =>
    new HttpError(400, 'ERR_BAD_REQUEST', `malformed request: ${what}`, { connection: 'close' });
  let authority = req.headers.host ?? '';
  let path = target;
  if (!target.startsWith('/')) {
    // Absolute form (`GET http://host/path`): its authority replaces the Host header (RFC 9112 3.2.2).
    if (!/^https?:\/\//i.test(target)) throw bad('the request target must be a path');
    let absolute: URL;
    try {
      absolute = new URL(target);
    } catch {
      throw bad('the request target is not a valid URL');
    }
    authority = absolute.host;
    path = `${absolute.pathname}${absolute.search}`;
  }
  if (authority === '') authority = 'localhost';
  if (!HOST.test(authority)) throw bad('invalid Host header');
  try {
    return new URL(`http://${authority}${path}`);
  } catch {
    throw bad('invalid Host header or path');
  }
}

function headersOf(req: IncomingMessage): Headers {
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (Array.isArray(v)) for (const item of v) headers.append(k, item);
    else if (v !== undefined) headers.set(k, v);
  }
  return headers;
}

/** Answers `err` (as errorResponse maps it) unless the response has started; then drops the connection. */
function answerError(res: ServerResponse, err: unknown): void {
  if (res.headersSent) return void res.destroy();
  const response = errorResponse(err);
  if (response.status === 500)
    process.emitWarning(
      `surety dashboard: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
    );
  res.statusCode = response.status;
  response.headers.forEach((value, key) => {
    res.setHeader(key, value);
  });
  void response.text().then(
    (text) => res.end(text),
    () => res.destroy(),
  );
}

/**
 * Adapts a fetch-style handler to node:http's `(req, res)`; a closed connection aborts `req.signal`.
 * The listener never throws: a request that cannot become a fetch `Request` (TRACE, a malformed Host
 * header or request target) is answered 405 or 400, and anything unexpected, here or in the handler,
 * 500 `ERR_INTERNAL` (reported as a process warning). A listener that threw would take down the server.
 */
export function toNodeListener(
  handler: FetchHandler | { fetch: FetchHandler },
): (req: IncomingMessage, res: ServerResponse) => void {
  const fetch = typeof handler === 'function' ? handler : handler.fetch.bind(handler);
  return (req, res) => {
    try {
      const method = req.method ?? 'GET';
      if (FORBIDDEN_METHODS.has(method.toUpperCase()))
        throw new HttpError(405, 'ERR_METHOD_NOT_ALLOWED', `${method} is not supported`, {
          allow: 'GET, HEAD, POST',
        });
      const controller = new AbortController();
      res.on('close', () => controller.abort());
      const hasBody = method !== 'GET' && method !== 'HEAD';
      const request = new Request(requestUrl(req), {
        method,
        headers: headersOf(req),
        signal: controller.signal,
        ...(hasBody ? { body: Readable.toWeb(req) as unknown as ReadableStream, duplex: 'half' } : {}),
      } as RequestInit);
      Promise.resolve()
        .then(() => fetch(request))
        .then((response) => {
          res.statusCode = response.status;
          response.headers.forEach((value, key) => {
            res.setHeader(key, value);
          });
          if (!response.body || method === 'HEAD') return void res.end();
          res.flushHeaders();
          const body = Readable.fromWeb(response.body as unknown as NodeWebStream);
          body.on('error', () => res.destroy());
          res.on('close', () => body.destroy());
          body.pipe(res);
        })
        .catch((err: unknown) => answerError(res, err));
    } catch (err) {
      answerError(res, err);
    }
  };
}
