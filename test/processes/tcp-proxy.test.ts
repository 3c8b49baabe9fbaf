/**
 * The chaos harness's loopback TCP proxy: the connection-loss tests and chaos runs rely on its faults
 * being real (a reset is seen by the client, a black hole moves no byte until healed).
 */
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { TcpProxy } from '../../chaos/tcp-proxy.js';
import { useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});

async function proxied(): Promise<{ proxy: TcpProxy; client: Redis }> {
  const proxy = await TcpProxy.start({ host: '127.0.0.1', port: fx.server.port });
  open.push(proxy);
  const client = new Redis(proxy.port, '127.0.0.1', { retryStrategy: () => 50, maxRetriesPerRequest: null });
  client.on('error', () => {}); // resets are the point here; ioredis reconnects by itself
  open.push({ close: async () => client.disconnect() });
  return { proxy, client };
}

describe('TcpProxy', () => {
  it('forwards commands and replies both ways', async () => {
    const { client } = await proxied();
    await client.set('proxy:k', 'v');
    expect(await fx.redis.get('proxy:k')).toBe('v');
    expect(await client.get('proxy:k')).toBe('v');
  });

  it('a reset closes the connection and refuses new ones until it ends', async () => {
    const { proxy, client } = await proxied();
    await client.ping();
    let closes = 0;
    client.on('close', () => closes++);
    proxy.reset(400);
    await waitUntil(() => closes > 0, 'the client to see its connection close');
    // Reconnect attempts during the refusal are dropped: still not ready right away.
    expect(client.status).not.toBe('ready');
    expect(await client.ping()).toBe('PONG'); // queued until the refusal ends
    expect(closes).toBeGreaterThan(1); // at least one reconnect attempt was refused
  });

  it('a black hole holds a command and its reply until healed, then delivers both in order', async () => {
    const { proxy, client } = await proxied();
    await client.ping();
    proxy.blackhole();
    let done = false;
    const reply = client.incr('proxy:n').then((v) => {
      done = true;
      return v;
    });
    await waitUntil(() => proxy.heldBytes > 0, 'the proxy to hold the command');
    expect(done).toBe(false);
    expect(await fx.redis.get('proxy:n')).toBeNull(); // never reached Redis
    proxy.heal();
    expect(await reply).toBe(1);
  });

  it('a black hole towards the client lets the command run but holds its reply', async () => {
    const { proxy, client } = await proxied();
    await client.ping();
    proxy.blackhole('toClient');
    let done = false;
    const reply = client.incr('proxy:m').then((v) => {
      done = true;
      return v;
    });
    await waitUntil(async () => (await fx.redis.get('proxy:m')) === '1', 'the command to run in Redis');
    await waitUntil(() => proxy.heldBytes > 0, 'the proxy to hold the reply');
    expect(done).toBe(false);
    proxy.heal();
    expect(await reply).toBe(1);
  });
});
