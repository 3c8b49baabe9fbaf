/**
 * ACL users: the rules of docs/acl.md (src/redis/acl.ts) are enough for producers, workers, events and
 * dashboards, keep a user inside its prefix, and a missing permission fails fast with Redis's NOPERM
 * instead of a hang. `npm run test:acl` runs the core suite as the worker user as well.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createDashboard } from '../../src/dashboard/index.js';
import { ConnectionError, discoverQueues, type Logger, Queue, Worker } from '../../src/index.js';
import { aclCommands, aclRules } from '../../src/redis/acl.js';
import { queueKeys } from '../../src/store/keys.js';
import {
  aclDenials,
  closeAfterEach,
  createAclUser,
  nextEvent,
  uniqueName,
  useRedis,
  waitUntil,
} from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
const doc = readFileSync(new URL('../../docs/acl.md', import.meta.url), 'utf8');

/** A logger that keeps what it is given (and keeps the test output quiet). */
function recorder(): Logger & { lines: string[] } {
  const lines: string[] = [];
  const keep = (...args: unknown[]) => {
    lines.push(args.map(String).join(' '));
  };
  return { lines, warn: keep, error: keep, info: keep, debug: keep } as Logger & { lines: string[] };
}

function without(rules: string, ...drop: string[]): string {
  return rules
    .split(' ')
    .filter((r) => !drop.includes(r))
    .join(' ');
}

/** A raw client logged in as the user of `url`, closed after the test. */
function rawClient(url: string): Redis {
  const c = new Redis(url, { maxRetriesPerRequest: 0 });
  open.push({ close: async () => c.disconnect() });
  return c;
}

function luaCommands(): Set<string> {
  const dirs = ['src/scripts', 'src/scripts/includes'];
  const found = new Set<string>();
  for (const dir of dirs) {
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.lua'))) {
      const source = readFileSync(join(dir, file), 'utf8');
      // The command is the first argument; every quoted word in it counts, which covers
      // `redis.call(front and 'LPUSH' or 'RPUSH', ...)`.
      for (const call of source.matchAll(/redis\.p?call\(([^,]*),/g)) {
        for (const word of (call[1] as string).matchAll(/'([A-Za-z]+)'/g))
          found.add((word[1] as string).toLowerCase());
      }
    }
  }
  return found;
}

describe('the documented rules', () => {
  it('docs/acl.md quotes the worker and monitor rules verbatim and explains every command', () => {
    for (const role of ['worker', 'monitor'] as const) {
      expect(doc).toContain(aclRules(role));
      for (const command of Object.keys(aclCommands(role))) {
        expect(doc, `docs/acl.md table row for ${command}`).toMatch(
          new RegExp(`^\\| \`${command.toUpperCase()}\` \\|`, 'm'),
        );
      }
    }
  });

  it('grant every command the Lua scripts call (scripts run under the caller ACL)', () => {
    const granted = new Set(Object.keys(aclCommands('worker')));
    const called = luaCommands();
    expect(called.size).toBeGreaterThan(10);
    expect([...called].filter((c) => !granted.has(c))).toEqual([]);
  });

  it('the monitor rule grants no command that writes (COMMAND INFO flags)', async () => {
    const rules = aclRules('monitor');
    expect(rules).toContain('~{surety:*');
    expect(rules).not.toContain('&');
    const info = (await fx.redis.call('COMMAND', 'INFO', ...Object.keys(aclCommands('monitor')))) as [
      string,
      number,
      string[],
    ][];
    const writers = info.filter(([, , flags]) => flags.includes('write')).map(([name]) => name);
    expect(info).toHaveLength(Object.keys(aclCommands('monitor')).length);
    expect(writers).toEqual([]);
    // The same check finds the writers of the worker rule, so it can fail.
    const workerInfo = (await fx.redis.call('COMMAND', 'INFO', 'hset', 'zadd')) as [
      string,
      number,
      string[],
    ][];
    expect(workerInfo.every(([, , flags]) => flags.includes('write'))).toBe(true);
  });
});

describe('a worker user with the documented rules', () => {
  it('adds, processes, waits for and streams jobs; the only refusals are CONFIG GET (one warning) and FUNCTION LOAD (EVALSHA instead)', async () => {
    const url = await createAclUser(fx.redis, fx.server.url, aclRules('worker'), 'acl-worker');
    const logger = recorder();
    const name = uniqueName();
    const queue = new Queue<{ n: number }, number>(name, { connection: url, logger });
    const worker = new Worker<{ n: number }, number>(name, async (job) => job.data.n + 1, {
      connection: url,
      logger,
    });
    open.push(worker, queue);
    const events = queue.events({ from: '0' });
    const { id } = await queue.add({ n: 1 });
    expect(await queue.waitFor(id, { timeoutMs: 10_000 })).toBe(2);
    const seen: string[] = [];
    for await (const e of events) {
      seen.push(e.event);
      if (e.event === 'completed') break;
    }
    expect(seen).toContain('added');
    expect(await queue.counts()).toMatchObject({ completed: 1, waiting: 0, active: 0 });
    expect(await queue.workers()).toHaveLength(1);
    expect(logger.lines.some((l) => l.includes('cannot read maxmemory-policy'))).toBe(true);
    const denials = await aclDenials(fx.redis, 'acl-worker');
    // FUNCTION LOAD: no operator loaded the script library (docs/acl.md), so the scripts ran by EVALSHA.
    expect(denials.map((d) => d.object).sort()).toEqual(['config|get', 'function|load']);
  });

  // An upgrade must not need new ACL rules to keep adding: the rules of the release before handoffs
  // are today's without SUNSUBSCRIBE (a first draft of the handoff called ZPOPMAX inside add, which
  // those rules refuse: every plain add would have failed after the upgrade).
  it('with the previous release rules (no SUNSUBSCRIBE): a plain add is handed off and runs, close returns, the only new refusal is SUNSUBSCRIBE', async () => {
    const url = await createAclUser(
      fx.redis,
      fx.server.url,
      without(aclRules('worker'), '+sunsubscribe'),
      'acl-prev',
    );
    const name = uniqueName();
    const queue = new Queue<{ n: number }, number>(name, { connection: url, logger: recorder() });
    const worker = new Worker<{ n: number }, number>(name, async (job) => job.data.n + 1, {
      connection: url,
      logger: recorder(),
    });
    open.push(queue);
    const idle = queueKeys('surety', name).idle;
    await waitUntil(async () => (await fx.redis.zcard(idle)) === 1, 'the worker registered for a handoff');
    const added = await queue.add({ n: 1 });
    expect(added.state).toBe('active');
    expect(await queue.waitFor(added.id, { timeoutMs: 10_000 })).toBe(2);
    await worker.close();
    const denials = await aclDenials(fx.redis, 'acl-prev');
    expect([...new Set(denials.map((d) => d.object))].sort()).toEqual([
      'config|get',
      'function|load',
      'sunsubscribe',
    ]);
  });

  it('cannot read or write keys, or use channels, outside its prefix', async () => {
    const url = await createAclUser(fx.redis, fx.server.url, aclRules('worker'), 'acl-fenced');
    await fx.redis.set('{other:q}:jobs', 'secret');
    const raw = rawClient(url);
    await expect(raw.get('{other:q}:jobs')).rejects.toThrow(/NOPERM/);
    await expect(raw.set('plain-key', 'x')).rejects.toThrow(/NOPERM/);
    // The pattern is `{surety:*`: a prefix that merely starts with "surety" is outside it.
    await expect(raw.hget('{surety2:q}:jobs', '1')).rejects.toThrow(/NOPERM/);
    await expect(raw.spublish('{other:q}:wake', 'w')).rejects.toThrow(/NOPERM/);
    await expect(raw.flushall()).rejects.toThrow(/NOPERM/);

    const logger = recorder();
    const outside = new Queue('q', { connection: url, prefix: 'other', logger });
    open.push(outside);
    await expect(outside.add({ n: 1 })).rejects.toThrow(/NOPERM.*keys/);
    await expect(outside.getJob('1')).rejects.toThrow(/NOPERM/);
    expect(await fx.redis.get('{other:q}:jobs')).toBe('secret');
  });
});

describe('a user lacking a needed permission', () => {
  it('without FCALL/EVALSHA/EVAL: add fails at once with NOPERM naming the command', async () => {
    const url = await createAclUser(
      fx.redis,
      fx.server.url,
      without(aclRules('worker'), '+fcall', '+evalsha', '+eval'),
    );
    const queue = new Queue(uniqueName(), { connection: url, logger: recorder() });
    open.push(queue);
    const started = Date.now();
    await expect(queue.add({ n: 1 })).rejects.toThrow(/NOPERM.*'evalsha'/);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('without a command the scripts call (SPUBLISH): add fails, and the writes made before it stay', async () => {
    const url = await createAclUser(fx.redis, fx.server.url, without(aclRules('worker'), '+spublish'));
    const queue = new Queue(uniqueName(), { connection: url, logger: recorder() });
    open.push(queue);
    await expect(queue.add({ n: 1 })).rejects.toThrow(/can't run this command or subcommand/);
    // Redis does not roll back a script that fails midway: the job was enqueued, the wake-up was not
    // sent. This is why docs/acl.md must list every command the scripts call.
    expect(await fx.redis.llen(queue.keys.waiting)).toBe(1);
  });

  it('without INFO: every call fails at once with NOPERM naming INFO (the version check needs it)', async () => {
    const url = await createAclUser(fx.redis, fx.server.url, without(aclRules('worker'), '+info'));
    const queue = new Queue(uniqueName(), { connection: url, logger: recorder() });
    open.push(queue);
    await expect(queue.add({ n: 1 })).rejects.toThrow(/NOPERM.*'info'/);
    await expect(queue.counts()).rejects.toThrow(/NOPERM.*'info'/);
  });

  it('without the channel pattern: a worker reports ConnectionError events (NOPERM) and closes, no hang', async () => {
    const url = await createAclUser(fx.redis, fx.server.url, without(aclRules('worker'), '&{surety:*'));
    const worker = new Worker(uniqueName(), async () => 1, { connection: url, logger: recorder() });
    open.push(worker);
    const [err] = await nextEvent<[Error]>(worker, 'error', 5_000);
    expect(err).toBeInstanceOf(ConnectionError);
    expect(err.message).toMatch(/NOPERM.*channel/);
    const closing = Date.now();
    await worker.close({ timeoutMs: 1_000 });
    expect(Date.now() - closing).toBeLessThan(5_000);
  });
});

describe('a monitor (read-only) user with the documented rules', () => {
  it('reads counts, jobs, metrics, workers and schedules, serves the dashboard, and cannot change anything', async () => {
    const name = uniqueName();
    const admin = new Queue(name, { connection: fx.server.url });
    open.push(admin);
    const { id } = await admin.add({ n: 7 });
    await admin.schedule('tick', { everyMs: 60_000 }, { data: { n: 0 } });

    const url = await createAclUser(fx.redis, fx.server.url, aclRules('monitor'), 'acl-monitor');
    const queue = new Queue(name, { connection: url, logger: recorder() });
    open.push(queue);
    expect(await queue.counts()).toMatchObject({ waiting: 1, delayed: 1 });
    expect(await queue.getJob(id)).toMatchObject({ state: 'waiting', data: { n: 7 } });
    expect(await queue.getJobs('waiting')).toHaveLength(1);
    expect(await queue.getJobs('delayed', { order: 'desc' })).toHaveLength(1);
    expect((await queue.search({ field: 'n', value: 7 })).jobs.map((j) => j.id)).toEqual([id]);
    expect((await queue.stats()).oldestWaiting?.id).toBe(id);
    expect((await queue.metrics()).completed).toBe(0);
    expect(await queue.workers()).toEqual([]);
    expect(await queue.schedules()).toHaveLength(1);
    expect(await queue.isPaused()).toBe(false);
    expect((await queue.explain(id)).reasons.map((r) => r.code)).toEqual(['QUEUED', 'NO_WORKERS']);
    expect(await discoverQueues(queue.client)).toContain(name);

    // Scripts stop at their first write (HSETNX, HSET...), which the command list does not grant.
    await expect(queue.add({ n: 1 })).rejects.toThrow(/can't run this command/);
    await expect(queue.pause()).rejects.toThrow(/can't run this command/);
    await expect(queue.setGlobalConcurrency(3)).rejects.toThrow(/can't run this command/);
    expect(await admin.counts()).toMatchObject({ waiting: 1, delayed: 1 });
    const raw = rawClient(url);
    await expect(raw.call('HSET', queue.keys.meta, 'paused', '1')).rejects.toThrow(/NOPERM/);
    expect(await admin.isPaused()).toBe(false);

    const dashboard = createDashboard({ connection: url, readOnly: true });
    open.push(dashboard);
    const res = await dashboard.fetch(new Request('http://127.0.0.1/api/queues'));
    expect(res.status).toBe(200);
    expect(JSON.stringify(await res.json())).toContain(name);
    // The Redis panel: CONFIG is not granted, so appendfsync is unknown and said so.
    const redis = await (await dashboard.fetch(new Request('http://127.0.0.1/api/redis'))).json();
    expect(redis.warnings.map((w: { code: string }) => w.code)).toContain('CONFIG_UNREADABLE');
    const metrics = await dashboard.fetch(new Request('http://127.0.0.1/metrics'));
    expect(await metrics.text()).toContain(`surety_jobs{queue="${name}",state="waiting"} 1`);
  });
});
