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

/** Adapts a fetch-style handler to node:http's `(req, res)`; a closed connection aborts `req.signal`. */
export function toNodeListener(
  handler: FetchHandler | { fetch: FetchHandler },
): (req: IncomingMessage, res: ServerResponse) => void {
  const fetch = typeof handler === 'function' ? handler : handler.fetch.bind(handler);
  return (req, res) => {
    const controller = new AbortController();
    res.on('close', () => controller.abort());
    const host = req.headers.host ?? 'localhost';
    const url = new URL(req.url ?? '/', `http://${host}`);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
      if (Array.isArray(v)) for (const item of v) headers.append(k, item);
      else if (v !== undefined) headers.set(k, v);
    }
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    const request = new Request(url, {
      method: req.method ?? 'GET',
      headers,
      signal: controller.signal,
      ...(hasBody ? { body: Readable.toWeb(req) as unknown as ReadableStream, duplex: 'half' } : {}),
    } as RequestInit);
    fetch(request)
      .then(async (response) => {
        res.statusCode = response.status;
        response.headers.forEach((value, key) => {
          res.setHeader(key, value);
        });
        if (!response.body || req.method === 'HEAD') return void res.end();
        res.flushHeaders();
        const body = Readable.fromWeb(response.body as unknown as NodeWebStream);
        body.on('error', () => res.destroy());
        res.on('close', () => body.destroy());
        body.pipe(res);
      })
      .catch((err: unknown) => {
        if (res.headersSent) return void res.destroy();
        const response = errorResponse(err);
        res.statusCode = response.status;
        res.setHeader('content-type', 'application/json; charset=utf-8');
        void response.text().then((text) => res.end(text));
      });
  };
}
