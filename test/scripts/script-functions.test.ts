/**
 * The scripts as a Redis Functions library (library.ts, functions.ts): loaded by the
 * first call that finds it missing, called with FCALL, loaded again after FUNCTION FLUSH, and replaced
 * by EVALSHA for a user that may not run functions. Every script of the library compiles and makes
 * its helpers (the first call of each runs them).
 */
import { execFileSync } from 'node:child_process';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { Queue, Worker } from '../../src/index.js';
import { scriptLibrary } from '../../src/scripts/functions.js';
import { scripts } from '../../src/scripts/specs.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();

async function calls(redis: Redis): Promise<Record<string, number>> {
  const info = await redis.info('commandstats');
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_(\w+):calls=(\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

async function libraries(redis: Redis): Promise<string[]> {
  const list = (await redis.call('FUNCTION', 'LIST')) as unknown[][];
  return list.map((entry) => String(entry[1]));
}

async function roundTrip(connection: string | Redis, name = uniqueName('fn')): Promise<void> {
  const q = new Queue<{ n: number }>(name, { connection });
  const done: number[] = [];
  const w = new Worker<{ n: number }>(name, (job) => void done.push(job.data.n), { connection });
  try {
    await w.start();
    await q.add({ n: 1 });
    await q.add({ n: 2 }, { id: 'two', delayMs: 1 });
    await q.addBulk([{ data: { n: 3 }, opts: { priority: 5 } }]);
    await waitUntil(() => done.length === 3, 'three jobs done');
    expect(done.sort()).toEqual([1, 2, 3]);
  } finally {
    // Closed here, so that no call of theirs counts in the next round trip's command stats.
    await w.close();
    await q.close();
  }
}

describe('scripts as a Redis Functions library', () => {
  it('holds every script, named with a hash of its code, and compiles on Redis', async () => {
    const lib = scriptLibrary();
    expect(lib.name).toMatch(/^surety_[0-9a-f]{12}$/);
    for (const spec of Object.values(scripts)) {
      expect(lib.functions.get(spec.name)).toBe(`${lib.name}_${spec.name.replace(/-/g, '_')}`);
    }
    await fx.redis.call('FUNCTION', 'FLUSH');
    await fx.redis.call('FUNCTION', 'LOAD', lib.code);
    const list = (await fx.redis.call('FUNCTION', 'LIST', 'LIBRARYNAME', lib.name)) as unknown[][];
    const functions = list[0]![5] as unknown[][];
    expect(functions.length).toBe(lib.functions.size);
  });

  it('is loaded by the first call that misses it, then every script runs by FCALL', async () => {
    await fx.redis.call('FUNCTION', 'FLUSH');
    await fx.redis.config('RESETSTAT');
    await roundTrip(fx.url);
    expect(await libraries(fx.redis)).toContain(scriptLibrary().name);
    const stats = await calls(fx.redis);
    expect(stats.fcall).toBeGreaterThan(0);
    expect(stats.evalsha ?? 0).toBe(0);
    expect(stats.eval ?? 0).toBe(0);
  });

  it('is loaded again after FUNCTION FLUSH, by a client that had used it', async () => {
    const name = uniqueName('flush');
    const q = new Queue<{ n: number }>(name, { connection: fx.url });
    open.push(q);
    await q.add({ n: 1 });
    await fx.redis.call('FUNCTION', 'FLUSH');
    const added = await q.add({ n: 2 });
    expect(added.isNew).toBe(true);
    expect(await libraries(fx.redis)).toContain(scriptLibrary().name);
    expect((await q.counts()).waiting).toBe(2);
  });

  it('a user without FCALL or FUNCTION LOAD runs the same scripts by EVALSHA', async () => {
    await fx.redis.call('FUNCTION', 'FLUSH');
    await fx.redis.acl('SETUSER', 'nofunctions', 'on', '>pw', '~*', '&*', '+@all', '-fcall', '-function');
    await fx.redis.config('RESETSTAT');
    try {
      await roundTrip(`redis://nofunctions:pw@127.0.0.1:${fx.server.port}`);
      const stats = await calls(fx.redis);
      expect(stats.evalsha).toBeGreaterThan(0);
      expect(await libraries(fx.redis)).toEqual([]);
    } finally {
      await fx.redis.acl('DELUSER', 'nofunctions');
    }
  });

  it('a user that may call functions but not load them uses the library an operator loaded', async () => {
    const lib = scriptLibrary();
    await fx.redis.call('FUNCTION', 'FLUSH');
    await fx.redis.acl('SETUSER', 'caller', 'on', '>pw', '~*', '&*', '+@all', '-function');
    try {
      // Not loaded yet: the user cannot load it, so its calls go by EVALSHA (and still work).
      await roundTrip(`redis://caller:pw@127.0.0.1:${fx.server.port}`);
      expect(await libraries(fx.redis)).toEqual([]);
      // Loaded by an operator (`surety scripts load`): a new client of that user calls it.
      const cli = (args: string[]) =>
        execFileSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], { encoding: 'utf8' });
      expect(cli(['scripts', 'load', '--redis', fx.server.url])).toContain(`${lib.name} loaded`);
      expect(cli(['scripts', 'load', '--redis', fx.server.url])).toContain(`${lib.name} already loaded`);
      // Another version's library: prune deletes it and keeps this one.
      const other = lib.code.replaceAll(lib.name, 'surety_000000000000');
      await fx.redis.call('FUNCTION', 'LOAD', other);
      expect(cli(['scripts', 'prune', '--redis', fx.server.url])).toContain('deleted surety_000000000000');
      expect(await libraries(fx.redis)).toEqual([lib.name]);
      await fx.redis.config('RESETSTAT');
      await roundTrip(`redis://caller:pw@127.0.0.1:${fx.server.port}`);
      const stats = await calls(fx.redis);
      expect(stats.fcall).toBeGreaterThan(0);
      expect(stats.evalsha ?? 0).toBe(0);
    } finally {
      await fx.redis.acl('DELUSER', 'caller');
    }
  });
});
