/**
 * TLS connections: a private redis-server with only a TLS port, a throwaway CA (test/helpers/tls.ts),
 * and Queue/Worker connected with each documented connection form.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConnectionError, type ConnectionOption, Queue, Worker } from '../../src/index.js';
import { closeAfterEach, nextEvent, uniqueName } from '../helpers/setup.js';
import { startTlsRedis, type TlsRedis } from '../helpers/tls.js';

const open = closeAfterEach();

async function runOneJob(connection: ConnectionOption): Promise<void> {
  const name = uniqueName();
  const queue = new Queue<{ n: number }, number>(name, { connection });
  const worker = new Worker<{ n: number }, number>(name, async (job) => job.data.n * 2, { connection });
  open.push(worker, queue);
  const { id } = await queue.add({ n: 21 });
  expect(await queue.waitFor(id, { timeoutMs: 10_000 })).toBe(42);
  expect(await queue.getJob(id)).toMatchObject({ state: 'completed', result: 42, attempts: 1 });
}

/**
 * For clients whose connection never comes up: reconnect a few times, then give up. Without it,
 * close() hangs: it sends QUIT, which waits in ioredis's offline queue for a connection (a Worker's
 * forever, maxRetriesPerRequest being null; see the report on src/redis/connection.ts closeConnection).
 */
const giveUp = (attempt: number) => (attempt > 3 ? null : 20);

describe('TLS (server certificate only)', () => {
  let srv: TlsRedis;
  beforeAll(async () => {
    srv = await startTlsRedis();
  });
  afterAll(() => srv?.stop());

  it('runs a job end to end over a rediss:// URL with the CA given as ioredis options', async () => {
    await runOneJob({ url: `rediss://127.0.0.1:${srv.port}`, tls: { ca: srv.files.ca } });
  });

  it('runs a job end to end with the options form { host, port, tls: { ca } }', async () => {
    await runOneJob({ host: '127.0.0.1', port: srv.port, tls: { ca: srv.files.ca } });
  });

  it('refuses a connection that does not trust the CA with a ConnectionError, at once', async () => {
    const queue = new Queue(uniqueName(), {
      connection: { url: `rediss://127.0.0.1:${srv.port}`, retryStrategy: giveUp },
    });
    open.push(queue);
    const started = Date.now();
    const err = await queue.add({ n: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectionError);
    expect((err as ConnectionError).code).toBe('ERR_CONNECTION');
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await srv.redis.keys(`${queue.keys.tag}*`)).toEqual([]);
  });

  it('a worker that does not trust the CA reports typed ConnectionError events instead of hanging', async () => {
    const worker = new Worker(uniqueName(), async () => 1, {
      connection: { host: '127.0.0.1', port: srv.port, tls: {}, retryStrategy: giveUp },
    });
    open.push(worker);
    const [err] = await nextEvent<[Error]>(worker, 'error');
    expect(err).toBeInstanceOf(ConnectionError);
    expect((err as ConnectionError).code).toBe('ERR_CONNECTION');
  });
});

describe('mutual TLS (--tls-auth-clients yes)', () => {
  let srv: TlsRedis;
  beforeAll(async () => {
    srv = await startTlsRedis({ authClients: true });
  });
  afterAll(() => srv?.stop());

  it('runs a job end to end with tls: { ca, cert, key }', async () => {
    await runOneJob({
      url: `rediss://127.0.0.1:${srv.port}`,
      tls: { ca: srv.files.ca, ...srv.files.client },
    });
  });

  it('refuses a client without a certificate with a ConnectionError', async () => {
    const queue = new Queue(uniqueName(), {
      connection: { url: `rediss://127.0.0.1:${srv.port}`, tls: { ca: srv.files.ca }, retryStrategy: giveUp },
    });
    open.push(queue);
    const err = await queue.add({ n: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConnectionError);
    expect(await srv.redis.keys(`${queue.keys.tag}*`)).toEqual([]);
  });
});
