/**
 * Who may use the dashboard: an optional shared token (Bearer, or the password of Basic auth), a
 * per-process CSRF token that every POST must echo in `x-surety-csrf` (the page carries it in a meta
 * tag), read-only mode, and an optional Host allow-list against DNS rebinding on loopback.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { HttpError } from './http.js';

export interface AuthOptions {
  /** Shared secret: `Authorization: Bearer <token>`, or Basic auth with this as the password. */
  token: string;
}

/** True for 127.0.0.0/8, ::1, ::ffff:127.x and `localhost`. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h === '::1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice(7) : h;
  return isIP(v4) === 4 && v4.startsWith('127.');
}

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** The token presented by a request, from a Bearer or Basic Authorization header. */
function presented(req: Request): string | null {
  const header = req.headers.get('authorization') ?? '';
  const bearer = /^Bearer\s+(.+)$/i.exec(header);
  if (bearer) return bearer[1]!.trim();
  const basic = /^Basic\s+(.+)$/i.exec(header);
  if (!basic) return null;
  const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? decoded : decoded.slice(colon + 1);
}

export function checkAuth(req: Request, auth: AuthOptions | undefined): void {
  if (!auth) return;
  const token = presented(req);
  if (token === null || !same(token, auth.token))
    throw new HttpError(401, 'ERR_UNAUTHORIZED', 'missing or wrong dashboard token', {
      'www-authenticate': 'Basic realm="surety", charset="UTF-8"',
    });
}

/** Refuses a Host header outside `allowed` (hostnames, without port); `'loopback'` allows loopback names. */
export function checkHost(req: Request, allowed: readonly string[] | 'loopback' | undefined): void {
  if (!allowed) return;
  const hostname = new URL(req.url).hostname;
  const ok = allowed === 'loopback' ? isLoopbackHost(hostname) : allowed.includes(hostname.toLowerCase());
  if (!ok) throw new HttpError(403, 'ERR_FORBIDDEN_HOST', `host ${JSON.stringify(hostname)} is not allowed`);
}

export class Csrf {
  readonly token = randomBytes(24).toString('base64url');

  check(req: Request): void {
    const sent = req.headers.get('x-surety-csrf');
    if (!sent || !same(sent, this.token))
      throw new HttpError(
        403,
        'ERR_CSRF',
        'missing or wrong x-surety-csrf header (the dashboard page carries the token in <meta name="surety-csrf">)',
      );
  }
}
