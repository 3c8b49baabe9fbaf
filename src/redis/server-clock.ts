/**
 * Redis's clock: the one clock due times, leases, retention cut-offs and metrics use, so skewed client
 * clocks can neither start jobs early nor expire leases early. (Scripts read it themselves with TIME;
 * this is for the few client-side computations that need the same clock, e.g. cron ticks.)
 */
import { clockOf } from '../clock.js';
import type { RedisClient } from './client.js';
import { untilClosed } from './in-flight.js';

/** Redis's clock in epoch ms (or the test clock bound to this client: clock.ts). */
export async function serverNow(client: RedisClient): Promise<number> {
  const clock = clockOf(client);
  if (clock) return clock.now();
  const [s, us] = await untilClosed(client, client.time());
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}
