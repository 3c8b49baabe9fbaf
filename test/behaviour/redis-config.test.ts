import { describe, expect, it } from 'vitest';
import { Queue, RedisConfigError, Worker } from '../../src/index.js';
import { closeAfterEach, uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis({ config: { 'maxmemory-policy': 'allkeys-lru' } });
const open = closeAfterEach();

describe('checking the Redis server on connect', () => {
  it('warns loudly, once per connection, when maxmemory-policy may evict jobs', async () => {
    const warnings: string[] = [];
    const q = new Queue(uniqueName(), { connection: fx.url, logger: { warn: (m) => warnings.push(m) } });
    open.push(q);
    await q.add({});
    await q.add({});
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/maxmemory-policy is allkeys-lru.*noeviction/);
  });

  it('refuses to work with strict: true', async () => {
    const q = new Queue(uniqueName(), { connection: fx.url, strict: true, logger: { warn: () => {} } });
    open.push(q);
    const err = await q.add({}).catch((e) => e);
    expect(err).toBeInstanceOf(RedisConfigError);
    expect(err.code).toBe('ERR_REDIS_CONFIG');
    expect(await fx.redis.keys(`${q.keys.tag}*`)).toEqual([]);
    const w = new Worker(uniqueName(), () => {}, { connection: fx.url, strict: true, autostart: false });
    open.push(w);
    await expect(w.start()).rejects.toBeInstanceOf(RedisConfigError);
  });

  it('carries on with one warning where CONFIG is blocked (managed Redis)', async () => {
    await fx.redis.call('ACL', 'SETUSER', 'noconfig', 'on', '>pw', '~*', '&*', '+@all', '-config');
    const warnings: string[] = [];
    const q = new Queue(uniqueName(), {
      connection: { host: '127.0.0.1', port: fx.server.port, username: 'noconfig', password: 'pw' },
      logger: { warn: (m) => warnings.push(m) },
    });
    open.push(q);
    await expect(q.add({})).resolves.toMatchObject({ isNew: true });
    expect(warnings).toEqual([expect.stringMatching(/cannot read maxmemory-policy/)]);
  });
});
