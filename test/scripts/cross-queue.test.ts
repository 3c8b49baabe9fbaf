/**
 * The scripts of dependencies across queues, called directly with Redis in an exact state:
 * cross-link.lua (the parent's queue), cross-resolve.lua (the child's queue), and the outbox every
 * script that ends a job fills (includes/settle_dependents.lua). Each must be idempotent, since the
 * recovery pass may run any step again after a crash.
 */
import { describe, expect, it } from 'vitest';
import { Queue } from '../../src/index.js';
import { callScript, scripts } from '../../src/scripts/specs.js';
import { queueKeys } from '../../src/store/keys.js';
import { runScriptAt } from '../helpers/run-script-at.js';
import { closeAfterEach, uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
const NOW = 1_900_000_000_000;

/**
 * A parent queue with job `p` (delayed), a child queue with `c` blocked on it and (unless `local` is
 * false) on its local job `l`.
 */
async function setup(local = true, runAt?: number) {
  const parentName = uniqueName('parents');
  const childName = uniqueName('children');
  const parents = new Queue(parentName, { connection: fx.url });
  const children = new Queue(childName, { connection: fx.url });
  open.push(parents, children);
  await parents.add({}, { id: 'p', delayMs: 60_000 });
  if (local) await children.add({}, { id: 'l', delayMs: 60_000 });
  const parentsOfC = [{ queue: parentName, id: 'p' }, ...(local ? ['l'] : [])];
  await children.add({}, { id: 'c', dependsOn: parentsOfC, ...(runAt ? { runAt } : {}) });
  const pk = queueKeys('surety', parentName);
  const ck = queueKeys('surety', childName);
  const ref = `${parentName}\t\tp`;
  const link = await linkNumber(ck, 'c');
  const resolve = (outcome: 'c' | 'x', as = link) =>
    runScriptAt(fx.redis, ck, scripts.crossResolve, NOW, {
      eventsMaxLen: 100,
      child: 'c',
      parent: ref,
      outcome,
      link: as,
    });
  return { parents, children, parentName, childName, pk, ck, ref, link, resolve };
}

/** A blocked child's link number: the first line (`#n`) of its pending parents of other queues. */
async function linkNumber(ck: ReturnType<typeof queueKeys>, child: string): Promise<string> {
  const pending = await fx.redis.hget(ck.annex, `${child}\x01y`);
  expect(pending).toMatch(/^#\d+\n/);
  return pending!.split('\n')[0]!.slice(1);
}

describe('cross-link.lua', () => {
  it('links once however often it is sent, and links nothing to a finished or missing parent', async () => {
    const { pk, ck, parentName } = await setup();
    const link = `${ck.tag}\tc\t${parentName}\t\t${await linkNumber(ck, 'c')}`;
    // add linked it already; twice more changes nothing.
    expect(await fx.redis.hget(pk.xdependents, 'p')).toBe(link);
    for (let i = 0; i < 2; i++) {
      expect(await callScript(fx.redis, scripts.crossLink, pk, { parent: 'p', link })).toBe('d');
    }
    const other = `${ck.tag}\tc2\t${parentName}\t`;
    await callScript(fx.redis, scripts.crossLink, pk, { parent: 'p', link: other });
    expect(await fx.redis.hget(pk.xdependents, 'p')).toBe(`${link}\n${other}`);
    expect(await callScript(fx.redis, scripts.crossLink, pk, { parent: 'gone', link })).toBe('');
    await fx.redis.hset(pk.jobs, 'done', 'c|||');
    expect(await callScript(fx.redis, scripts.crossLink, pk, { parent: 'done', link })).toBe('c');
    expect(await fx.redis.hexists(pk.xdependents, 'gone')).toBe(0);
    expect(await fx.redis.hexists(pk.xdependents, 'done')).toBe(0);
  });
});

describe('cross-resolve.lua', () => {
  it('a completed parent counts once, however often its notification is delivered', async () => {
    const { ck, resolve, link } = await setup();
    expect(await fx.redis.hget(ck.deps, 'c')).toBe('2|s');
    // A notification for an earlier job of this id (another link number) changes nothing.
    expect(await resolve('c', String(Number(link) + 1))).toEqual(['none', 0]);
    expect(await resolve('x', '')).toEqual(['none', 0]);
    expect(await fx.redis.hget(ck.deps, 'c')).toBe('2|s');
    expect(await resolve('c')).toEqual(['counted', 0]);
    expect(await resolve('c')).toEqual(['none', 0]);
    expect(await resolve('x')).toEqual(['none', 0]);
    expect(await fx.redis.hget(ck.deps, 'c')).toBe('1|s');
    expect(await fx.redis.hget(ck.annex, 'c\x01y')).toBeNull();
    expect((await fx.redis.hget(ck.jobs, 'c'))![0]).toBe('b');
  });

  it('the last parent releases the child to waiting, or to delayed until its runAt', async () => {
    const now = await setup(false);
    expect(await now.resolve('c')).toEqual(['released', 0]);
    expect((await fx.redis.hget(now.ck.jobs, 'c'))![0]).toBe('w');
    expect(await fx.redis.lrange(now.ck.waiting, 0, -1)).toEqual(['c']);
    expect(await fx.redis.hexists(now.ck.deps, 'c')).toBe(0);
    const later = await setup(false, NOW + 5_000);
    expect(await later.resolve('c')).toEqual(['released', 0]);
    expect((await fx.redis.hget(later.ck.jobs, 'c'))![0]).toBe('d');
    expect(await fx.redis.zscore(later.ck.delayed, 'c')).toBe(String(NOW + 5_000));
  });

  it('a dead parent the child ignores counts as finished', async () => {
    const parentName = uniqueName('parents');
    const parents = new Queue(parentName, { connection: fx.url });
    const children = new Queue(uniqueName('children'), { connection: fx.url });
    open.push(parents, children);
    await parents.add({}, { id: 'p', delayMs: 60_000 });
    await children.add(
      {},
      { id: 'c', dependsOn: [{ queue: parentName, id: 'p' }], ignoreDependencyFailure: true },
    );
    const ck = queueKeys('surety', children.name);
    const r = await runScriptAt(fx.redis, ck, scripts.crossResolve, NOW, {
      eventsMaxLen: 0,
      child: 'c',
      parent: `${parentName}\t\tp`,
      outcome: 'x',
      link: await linkNumber(ck, 'c'),
    });
    expect(r).toEqual(['released', 0]);
    expect((await fx.redis.hget(ck.jobs, 'c'))![0]).toBe('w');
  });

  it('a dead parent fails the child and its local children, and queues its own cross children', async () => {
    const { children, ck, childName, resolve } = await setup();
    await children.add({}, { id: 'g', dependsOn: ['c'] });
    // A third queue's job waits for `c`.
    const third = new Queue(uniqueName('third'), { connection: fx.url });
    open.push(third);
    await third.add({}, { id: 't', dependsOn: [{ queue: childName, id: 'c' }] });
    const tk = queueKeys('surety', third.name);
    const tLink = await linkNumber(tk, 't');
    expect(await resolve('x')).toEqual(['failed', 1]);
    expect((await fx.redis.hget(ck.jobs, 'c'))![0]).toBe('x');
    expect((await fx.redis.hget(ck.jobs, 'g'))![0]).toBe('x');
    expect(await fx.redis.hget(ck.annex, 'c')).toContain('is dead');
    const outbox = await fx.redis.zrange(ck.xnotify, 0, -1);
    expect(outbox).toEqual([`x\t${tk.tag}\tt\t${childName}\t\t${tLink}\tc`]);
    // Delivered again: nothing more.
    expect(await resolve('x')).toEqual(['none', 0]);
    expect(await fx.redis.zcard(ck.dead)).toBe(2);
  });
});

describe('the outbox of a parent that ends', () => {
  it('complete queues one notification per child of another queue and says so in its reply', async () => {
    const { pk, ck, parentName, link } = await setup();
    // Lease `p` by hand: active under token t.
    const rec = (await fx.redis.hget(pk.jobs, 'p'))!;
    await fx.redis.hset(pk.jobs, 'p', `a|t|1${rec.slice(rec.indexOf('|', 2))}`);
    await fx.redis.zrem(pk.delayed, 'p');
    await fx.redis.zadd(pk.active, NOW + 30_000, 'p');
    const reply = await runScriptAt(fx.redis, pk, scripts.complete, NOW, { eventsMaxLen: 0 }, [
      { id: 'p', token: 't', result: '"r"' },
    ]);
    expect(reply).toEqual(['', 'XNOTIFY']);
    expect(await fx.redis.zrange(pk.xnotify, 0, -1)).toEqual([
      `c\t${ck.tag}\tc\t${parentName}\t\t${link}\tp`,
    ]);
    expect(await fx.redis.exists(pk.xdependents)).toBe(0);
  });

  it('a completion in a queue with no such children replies as before', async () => {
    const name = uniqueName();
    const q = new Queue(name, { connection: fx.url });
    open.push(q);
    const k = queueKeys('surety', name);
    await q.add({}, { id: 'j' });
    const rec = (await fx.redis.hget(k.jobs, 'j'))!;
    await fx.redis.hset(k.jobs, 'j', `a|t|1${rec.slice(rec.indexOf('|', 2))}`);
    expect(
      await runScriptAt(fx.redis, k, scripts.complete, NOW, { eventsMaxLen: 0 }, [
        { id: 'j', token: 't', result: '' },
      ]),
    ).toEqual([]);
    expect(await fx.redis.exists(k.xnotify)).toBe(0);
  });
});
