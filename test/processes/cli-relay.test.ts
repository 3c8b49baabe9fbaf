/**
 * `surety relay`, run as users run it (bin/surety.js) in child processes, against this file's private
 * PostgreSQL and Redis: a daemon that moves committed outbox rows into Redis, one line per batch, and
 * stops cleanly on SIGTERM; one-line failures when it cannot start.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { Queue } from '../../src/index.js';
import { createOutbox } from '../../src/postgres/index.js';
import { LAUNCHER } from '../helpers/cli-build.js';
import { committed, uniqueTable, usePostgres } from '../helpers/outbox.js';
import { freePort } from '../helpers/redis-server.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const db = usePostgres();
const open = closeAfterEach();

function start(args: string[]) {
  const env: NodeJS.ProcessEnv = { ...process.env, REDIS_URL: fx.url, NO_COLOR: '1' };
  delete env.DEBUG;
  const proc = spawn(process.execPath, [LAUNCHER, ...args], { env });
  const out = { stdout: '', stderr: '' };
  proc.stdout.on('data', (d) => {
    out.stdout += d;
  });
  proc.stderr.on('data', (d) => {
    out.stderr += d;
  });
  const exited = new Promise<{ code: number | null } & typeof out>((resolve) =>
    proc.on('close', (code) => resolve({ code, ...out })),
  );
  return { proc, out, exited };
}

function events(stdout: string): Record<string, unknown>[] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('surety relay', () => {
  it('moves committed jobs into Redis, prints a line per batch, and exits 0 on SIGTERM', async () => {
    const table = uniqueTable();
    const name = uniqueName('cli');
    const q = new Queue(name, { connection: fx.url });
    open.push(q);
    const outbox = createOutbox({ pool: db.pool, table });
    const r = start([
      'relay',
      '--postgres',
      db.server.url,
      '--table',
      table,
      '--batch',
      '10',
      '--migrate',
      '--json',
    ]);
    await waitUntil(() => events(r.out.stdout).some((e) => e.event === 'ready'), 'the relay ready', 20_000);
    const ids = await committed(db.pool, (client) =>
      outbox.addBulk(
        client,
        name,
        Array.from({ length: 25 }, (_, i) => ({ data: { i } })),
      ),
    );
    await waitUntil(async () => (await q.counts()).waiting === 25, 'the jobs in Redis');
    await waitUntil(
      () =>
        events(r.out.stdout)
          .filter((e) => e.event === 'progress')
          .reduce((n, e) => n + (e.relayed as number), 0) === 25,
      'a progress line per batch',
    );
    r.proc.kill('SIGTERM');
    const run = await r.exited;
    expect(run.code).toBe(0);
    const lines = events(run.stdout);
    expect(lines[0]).toMatchObject({ event: 'ready', table, batch: 10, pending: 0 });
    // 25 rows in batches of 10.
    expect(lines.filter((e) => e.event === 'progress').map((e) => e.relayed)).toEqual([10, 10, 5]);
    expect(lines.slice(-2)).toMatchObject([
      { event: 'closing', signal: 'SIGTERM' },
      { event: 'closed', relayed: 25, failed: 0 },
    ]);
    expect(await outbox.counts()).toEqual({ pending: 0, failed: 0 });
    for (const { id } of ids) expect(await q.getJob(id)).not.toBeNull();
  });

  it('says in one line why it cannot start: no table, no Postgres, a bad URL', async () => {
    const port = await freePort();
    const [noTable, noServer, badUrl] = await Promise.all([
      start(['relay', '--postgres', db.server.url, '--table', uniqueTable()]).exited,
      start(['relay', '--postgres', `postgres://postgres:secret@127.0.0.1:${port}/postgres`]).exited,
      start(['relay', '--postgres', 'mysql://127.0.0.1/db']).exited,
    ]);
    expect(noTable).toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/^surety: ERR_POSTGRES_SCHEMA: outbox table \w+ does not exist/),
    });
    expect(noServer).toMatchObject({
      code: 1,
      stderr: expect.stringMatching(
        /^surety: cannot connect to Postgres at postgres:\/\/postgres:\*\*\*@127\.0\.0\.1/,
      ),
    });
    expect(noServer.stderr).not.toContain('secret');
    expect(badUrl).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^surety: --postgres must be a postgres:\/\//),
    });
    for (const r of [noTable, noServer, badUrl]) expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});
