/**
 * The relay's wake-up: a dedicated connection from the pool that LISTENs on the outbox's channel, so a
 * commit that added jobs (outbox.add's pg_notify) starts a batch at once instead of at the next poll.
 * When the connection is lost (Postgres restarted), it is dropped and made again with the one reconnect
 * backoff; each new connection wakes the relay once, for the notifications missed meanwhile. The
 * relay's polling covers those gaps too: a notification is a hint, never the only way a row moves.
 */
import type { Notification, Pool, PoolClient } from 'pg';
import { reconnectDelayMs, safeTimeout } from '../timers.js';
import { checkout, drop } from './checkout.js';
import type { OutboxNames } from './schema.js';

export class Listener {
  private client: PoolClient | undefined;
  private timer: NodeJS.Timeout | undefined;
  private failures = 0;
  private stopped = false;

  constructor(
    private readonly pool: Pool,
    private readonly names: OutboxNames,
    private readonly onWake: () => void,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** True while the LISTEN connection is up. */
  get listening(): boolean {
    return this.client !== undefined;
  }

  start(): void {
    void this.connect();
  }

  private async connect(): Promise<void> {
    let client: PoolClient | undefined;
    try {
      let c: PoolClient | undefined;
      client = await checkout(this.pool, (err) => {
        if (c) this.lost(c, err);
      });
      c = client;
      c.on('end', () => this.lost(c, new Error('the LISTEN connection ended')));
      c.on('notification', (m: Notification) => {
        if (m.channel === this.names.channel) this.onWake();
      });
      if (this.stopped) return drop(c);
      await c.query(`LISTEN ${this.names.channelSql}`);
      if (this.stopped) return drop(c);
      this.client = c;
      this.failures = 0;
      this.onWake();
    } catch (err) {
      if (client) drop(client, err);
      if (this.stopped) return;
      this.failures++;
      this.onError(err);
      this.retry();
    }
  }

  private lost(client: PoolClient, err: unknown): void {
    if (this.client !== client) return;
    this.client = undefined;
    drop(client, err);
    if (this.stopped) return;
    this.onError(err);
    this.retry();
  }

  private retry(): void {
    clearTimeout(this.timer);
    this.timer = safeTimeout(() => void this.connect(), reconnectDelayMs(this.failures));
  }

  /** Stops listening: the connection is closed rather than returned to the pool still subscribed. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    const c = this.client;
    this.client = undefined;
    if (c) drop(c);
  }
}
