/**
 * `surety dashboard`: serves the web dashboard, JSON API and /metrics (src/dashboard) on node:http.
 * Loopback only unless a token is given: binding any other address without one is refused (exit 2).
 * With a token it also serves the producer API (docs/http-api.md), unless --no-producer-api.
 */
import { createServer } from 'node:http';
import type { Command } from 'commander';
import { createDashboard, isLoopbackHost, toNodeListener } from '../../dashboard/index.js';
import { examples, globals, intOption, out } from '../command-kit.js';
import { openRedis } from '../connection.js';
import { CliError, UsageError } from '../errors.js';
import { addCleanup, nextInterrupt } from '../lifecycle.js';

interface DashboardCliOptions {
  port: number;
  host: string;
  token?: string;
  readOnly?: boolean;
  /** False with --no-producer-api. */
  producerApi: boolean;
}

export function registerDashboard(program: Command): void {
  const cmd = program
    .command('dashboard')
    .summary('serve the web dashboard, JSON API and Prometheus /metrics')
    .description(
      'serve the web dashboard (queues, jobs, workers, schedules; retry, remove, promote, cancel, pause), its JSON API under /api and Prometheus metrics at /metrics, until Ctrl-C. Binding anything but loopback requires a token. With a token it also serves the producer API, for services in other languages: POST /api/queues/<name>/jobs adds jobs, GET /api/queues/<name>/jobs/<id>?waitMs=30000 waits for a result (Authorization: Bearer <token>; docs/http-api.md).',
    )
    .option('-p, --port <port>', 'TCP port (0: any free port)', intOption('--port', 0, 65_535), 4_000)
    .option('--host <address>', 'address to listen on', '127.0.0.1')
    .option(
      '--token <token>',
      'require this token (Authorization: Bearer <token>, or Basic auth with it as the password); default $SURETY_DASHBOARD_TOKEN',
    )
    .option('--read-only', 'refuse every change (no retry, remove, pause, nor adding jobs)')
    .option(
      '--no-producer-api',
      'with a token, do not serve the producer API (POST /api/queues/<name>/jobs, GET .../jobs/<id>?waitMs=)',
    )
    .action(async (o: DashboardCliOptions, c: Command) => {
      const g = globals(c);
      const token = o.token ?? process.env.SURETY_DASHBOARD_TOKEN;
      const loopback = isLoopbackHost(o.host);
      if (!loopback && !token)
        throw new UsageError(
          `refusing to serve the dashboard on ${o.host} without authentication: anyone who can reach it could retry, cancel and remove jobs. Set SURETY_DASHBOARD_TOKEN (or --token), or listen on 127.0.0.1.`,
        );
      if (token !== undefined && token.length < 8)
        throw new UsageError('the dashboard token must be at least 8 characters');
      const handle = await openRedis(g);
      const dashboard = createDashboard({
        connection: handle.client,
        ...(g.prefix ? { prefix: g.prefix } : {}),
        readOnly: o.readOnly === true,
        ...(token ? { auth: { token }, producerApi: o.producerApi } : {}),
        // Without a token the loopback-only server also refuses foreign Host names (DNS rebinding).
        ...(token ? {} : { allowedHosts: 'loopback' as const }),
      });
      const server = createServer(toNodeListener(dashboard));
      addCleanup(async () => {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await dashboard.close();
      });
      await new Promise<void>((resolve, reject) => {
        server.once('error', (err: NodeJS.ErrnoException) =>
          reject(new CliError(`cannot listen on ${o.host}:${o.port}: ${err.code ?? err.message}`)),
        );
        server.listen(o.port, o.host, () => resolve());
      });
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : o.port;
      const host = o.host.includes(':') ? `[${o.host}]` : o.host;
      const url = `http://${host}:${port}/`;
      const { signal, release } = nextInterrupt();
      const producerApi = Boolean(token) && o.producerApi;
      if (g.json)
        out.jsonLine({
          event: 'ready',
          url,
          readOnly: o.readOnly === true,
          auth: Boolean(token),
          producerApi,
        });
      else
        out.note(
          `surety: dashboard at ${url}${o.readOnly ? ' (read-only)' : ''}${token ? ' (any user name, the token as password)' : ''}; metrics at ${url}metrics${producerApi ? `; producer API at ${url}api/queues/<name>/jobs (Authorization: Bearer <token>)` : ''}; Ctrl-C to stop`,
        );
      await signal;
      release();
    });
  examples(cmd, [
    'surety dashboard',
    'surety dashboard --port 8080 --read-only',
    'SURETY_DASHBOARD_TOKEN=$(openssl rand -hex 16) surety dashboard --host 0.0.0.0',
    'curl -X POST -H "Authorization: Bearer $SURETY_DASHBOARD_TOKEN" -H \'Content-Type: application/json\' -d \'{"data":{"to":"ada@example.com"}}\' http://127.0.0.1:4000/api/queues/emails/jobs',
  ]);
}
