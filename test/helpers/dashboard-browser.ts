/**
 * What the dashboard's browser tests share: Debian's Chromium (never a downloaded browser) started
 * headless through playwright-core, and a dashboard served on a free loopback port.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Browser, chromium } from 'playwright-core';
import {
  createDashboard,
  type Dashboard,
  type DashboardOptions,
  toNodeListener,
} from '../../src/dashboard/index.js';

export const CHROMIUM = '/usr/bin/chromium';

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}

export interface ServedDashboard {
  dashboard: Dashboard;
  /** The page's URL, ending in `/`. */
  url: string;
  /** Closes open connections, the server and the dashboard's own Redis connection. */
  close(): Promise<void>;
}

export async function serveDashboard(options: DashboardOptions): Promise<ServedDashboard> {
  const dashboard = createDashboard(options);
  const server = createServer(toNodeListener(dashboard));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    dashboard,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await dashboard.close();
    },
  };
}
