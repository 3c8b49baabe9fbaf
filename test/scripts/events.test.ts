/**
 * The event stream entries the scripts append (docs/events.md), read back exactly with XRANGE: the
 * claim that takes the last waiting job appends `drained` once per emptying (never a claim that takes
 * nothing), a completion batch carries one result line per job, pause and resume append only on a
 * change, clean appends one `cleaned` per call, and drain keeps delayed jobs when asked.
 *
 * Claims and completions run the scripts on an injected clock with events on; jobs are added through
 * the public API.
 */
import { describe, expect, it } from 'vitest';
import { Queue } from '../../src/index.js';
import { type ArgValue, type ScriptSpec, scripts } from '../../src/scripts/specs.js';
import { decodeClaimed } from '../../src/store/job-record.js';
import { runScriptAt } from '../helpers/run-script-at.js';
import { closeAfterEach, uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
const EVENTS = { eventsMaxLen: 1_000 };

function queue(): Queue {
  const q = new Queue(uniqueName('events'), { connection: fx.url });
  open.push(q);
  return q;
}

function run<A extends string, R extends string, T>(
  q: Queue,
  spec: ScriptSpec<A, R, T>,
  extra: Record<string, ArgValue>,
  rows: Record<R, ArgValue>[] = [],
) {
  return runScriptAt(fx.redis, q.keys, spec, Date.now(), { ...EVENTS, ...extra }, rows);
}

async function claim(q: Queue, count: number): Promise<{ id: string; token: string }[]> {
  const reply = (await run(q, scripts.claim, { count })) as unknown[];
  const out: { id: string; token: string }[] = [];
  for (let i = 6; i < reply.length; i += 2)
    out.push({ id: String(reply[i]), token: decodeClaimed(String(reply[i + 1])).token });
  return out;
}

/** Every entry of the queue's stream, as field maps, oldest first. */
async function entries(q: Queue): Promise<Record<string, string>[]> {
  const raw = (await fx.redis.xrange(q.keys.events, '-', '+')) as [string, string[]][];
  return raw.map(([, fields]) => {
    const f: Record<string, string> = {};
    for (let i = 0; i < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!;
    return f;
  });
}

async function named(q: Queue, event: string): Promise<Record<string, string>[]> {
  return (await entries(q)).filter((e) => e.event === event);
}

describe('drained (claim.lua)', () => {
  it('is appended by the claim that takes the last waiting job, once, and never by a claim that takes nothing', async () => {
    const q = queue();
    await q.addBulk([{ data: 1 }, { data: 2, opts: { priority: 3 } }, { data: 3 }]);
    expect(await claim(q, 2)).toHaveLength(2);
    expect(await named(q, 'drained')).toEqual([]); // the prioritised job still waits
    expect(await claim(q, 2)).toHaveLength(1);
    expect(await named(q, 'drained')).toEqual([{ event: 'drained' }]);
    for (let i = 0; i < 3; i++) expect(await claim(q, 5)).toEqual([]);
    expect(await named(q, 'drained')).toHaveLength(1);
    // The entry comes after the `active` entry of the claim that emptied the queue.
    expect((await entries(q)).slice(-2).map((e) => e.event)).toEqual(['active', 'drained']);
  });

  it('waits for grouped jobs too: the queue is drained when no group has a job waiting', async () => {
    const q = queue();
    const [plain, grouped] = await q.addBulk([{ data: 1 }, { data: 2, opts: { group: 'g' } }]);
    // Ungrouped jobs get one group's share: the first claim of one job takes the ungrouped one.
    expect((await claim(q, 1)).map((h) => h.id)).toEqual([plain!.id]);
    expect(await named(q, 'drained')).toEqual([]);
    expect((await claim(q, 1)).map((h) => h.id)).toEqual([grouped!.id]);
    expect(await named(q, 'drained')).toHaveLength(1);
  });

  it('is not appended with events off, and a delayed job left behind does not hold it back', async () => {
    const q = queue();
    await q.addBulk([{ data: 1 }, { data: 2, opts: { delayMs: 3_600_000 } }]);
    await runScriptAt(fx.redis, q.keys, scripts.claim, Date.now(), { count: 5, eventsMaxLen: 0 });
    expect(await named(q, 'drained')).toEqual([]);
    await q.add({ n: 3 }, { priority: 1 });
    expect(await claim(q, 5)).toHaveLength(1);
    expect(await named(q, 'drained')).toHaveLength(1);
    expect(await q.counts()).toMatchObject({ waiting: 0, delayed: 1 });
  });
});

describe('completed results (complete.lua)', () => {
  it('one batch carries one result line per job, in the order of its ids; undefined is an empty line', async () => {
    const q = queue();
    await q.addBulk([{ data: 1 }, { data: 2 }, { data: 3 }]);
    const held = await claim(q, 3);
    const results = ['', '{"sent":true,"text":"a\\nb"}', ''];
    await run(
      q,
      scripts.complete,
      {},
      held.map((h, i) => ({ ...h, result: results[i]! })),
    );
    const [entry] = await named(q, 'completed');
    expect(entry!.ids!.split('\n')).toEqual(held.map((h) => h.id));
    expect(entry!.results!.split('\n')).toEqual(results);
    // Read back per job: the parsed value, nothing for undefined.
    const got: { jobId: string; result?: unknown }[] = [];
    const ac = new AbortController();
    for await (const e of q.events({ from: '0', signal: ac.signal })) {
      if (e.event !== 'completed') continue;
      got.push('result' in e ? { jobId: e.jobId, result: e.result } : { jobId: e.jobId });
      if (got.length === 3) break;
    }
    expect(got).toEqual([
      { jobId: held[0]!.id },
      { jobId: held[1]!.id, result: { sent: true, text: 'a\nb' } },
      { jobId: held[2]!.id },
    ]);
  });

  it('a batch whose jobs all returned undefined has no results field', async () => {
    const q = queue();
    await q.addBulk([{ data: 1 }, { data: 2 }]);
    const held = await claim(q, 2);
    await run(
      q,
      scripts.complete,
      {},
      held.map((h) => ({ ...h, result: '' })),
    );
    const [entry] = await named(q, 'completed');
    expect(entry).toEqual({ event: 'completed', ids: held.map((h) => h.id).join('\n') });
  });
});

describe('paused and resumed (set-paused.lua)', () => {
  it('are appended only when the call changes something; a RateLimitError hold counts as paused', async () => {
    const q = queue();
    const set = (paused: string) => run(q, scripts.setPaused, { paused });
    await set('1');
    await set('1');
    await set('0');
    await set('0');
    await fx.redis.hset(q.keys.meta, 'limited', String(Date.now() + 60_000));
    await set('0');
    expect((await entries(q)).map((e) => e.event)).toEqual(['paused', 'resumed', 'resumed']);
  });
});

describe('cleaned (clean.lua)', () => {
  it('one entry per call that deleted jobs, with its count and state', async () => {
    const q = queue();
    await q.addBulk([{ data: 1 }, { data: 2 }, { data: 3 }]);
    const held = await claim(q, 3);
    await run(
      q,
      scripts.complete,
      {},
      held.map((h) => ({ ...h, result: '' })),
    );
    const clean = (limit: number) =>
      runScriptAt(fx.redis, { ...q.keys, finished: q.keys.completed } as never, scripts.clean, Date.now(), {
        cutoff: Date.now() + 1_000,
        limit,
        state: 'completed',
        ...EVENTS,
      });
    expect(await clean(2)).toEqual([2, 1]);
    expect(await clean(2)).toEqual([1, 0]);
    expect(await clean(2)).toEqual([0, 0]);
    expect(await named(q, 'cleaned')).toEqual([
      { event: 'cleaned', count: '2', state: 'completed' },
      { event: 'cleaned', count: '1', state: 'completed' },
    ]);
  });
});

describe('drain.lua with delayed jobs kept', () => {
  it('deletes waiting jobs only, and counts only the drained states as left', async () => {
    const q = queue();
    await q.addBulk([
      { data: 1 },
      { data: 2, opts: { priority: 2 } },
      { data: 3, opts: { delayMs: 3_600_000 } },
      { data: 4, opts: { delayMs: 3_600_000 } },
    ]);
    const drain = (delayed: string, limit: number) =>
      run(q, scripts.drain, { limit, blocked: '', delayed }) as Promise<[number, number]>;
    expect(await drain('', 1)).toEqual([1, 1]);
    expect(await drain('', 5)).toEqual([1, 0]);
    expect(await q.counts()).toMatchObject({ waiting: 0, delayed: 2 });
    expect(await drain('1', 5)).toEqual([2, 0]);
    expect(await q.counts()).toMatchObject({ waiting: 0, delayed: 0 });
  });
});
