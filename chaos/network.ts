/**
 * The network between the workers and Redis: one loopback TCP proxy per worker slot (chaos/tcp-proxy.ts),
 * so a partition can cut one worker off, or all of them, while the producer and the harness keep their
 * direct connections. A replacement worker in a slot connects through the same proxy.
 */
import { TcpProxy } from './tcp-proxy.js';

export class Network {
  private constructor(private readonly proxies: TcpProxy[]) {}

  /** Starts `slots` proxies to Redis on `port` (127.0.0.1); Redis restarts on the same port. */
  static async start(slots: number, port: number): Promise<Network> {
    const proxies: TcpProxy[] = [];
    try {
      for (let i = 0; i < slots; i++) proxies.push(await TcpProxy.start({ host: '127.0.0.1', port }));
    } catch (err) {
      await Promise.allSettled(proxies.map((p) => p.close()));
      throw err;
    }
    return new Network(proxies);
  }

  get size(): number {
    return this.proxies.length;
  }

  /** The port the worker in `slot` connects to. */
  port(slot: number): number {
    return this.proxy(slot).port;
  }

  proxy(slot: number): TcpProxy {
    const p = this.proxies[slot];
    if (!p) throw new Error(`no proxy for worker slot ${slot}`);
    return p;
  }

  /** Ends every black hole and refusal (end of the chaos phase, or cleanup). */
  healAll(): void {
    for (const p of this.proxies) p.heal();
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.proxies.map((p) => p.close()));
  }
}
