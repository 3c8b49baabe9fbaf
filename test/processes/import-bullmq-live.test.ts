/**
 * importFromBullMQ against a live BullMQ queue, with real processes: a BullMQ producer keeps adding
 * jobs and a BullMQ Worker keeps running them while an importer process moves them into a Surety queue
 * that a Surety Worker runs, and the importer is killed (kill -9) at random moments and restarted.
 * Every attempt of either processor is logged (test/fixtures/import-live-child.ts), and the verdicts
 * read that log and both systems' final state:
 * - one end: every job an add() resolved for ended once, in one system: completed in BullMQ xor
 *   completed or dead in Surety, or failed in BullMQ, and failed or dead only with its attempts spent;
 * - no double: no job completed in both systems, no attempt (job id and attempt number) started in both
 *   (a job that failed an attempt in BullMQ and then moved runs its next attempt in Surety: legitimate);
 *   across servers too (copy mode: the copy is held where no worker sees it until BullMQ's original
 *   is taken out);
 * - none lost: no added job is in neither system; no job appears that was never added;
 * - copy mode: no held copy is left in the Surety queue's `imported` hash.
 * The importer is killed once it moves jobs, at a random moment; in copy mode every other kill comes
 * as soon as a copy is noted (between the copy and the take, or just after the take). Spare importer
 * processes wait loaded, so a restart is at once.
 * Schedulers: a dozen BullMQ schedulers (every 200 ms, and other periods) run in a BullMQ Worker while
 * one importer run moves them: no tick runs in both systems; every occurrence BullMQ created (its
 * `added` events) runs, in BullMQ or moved here; the schedule here starts at the tick after the last
 * occurrence that ran before it; BullMQ creates none after the move; ticks keep coming in Surety.
 * Random choices (the workload, the kill moments, the phase of the scheduler move) come from one seed,
 * printed; IMPORT_LIVE_SEED=<n> replays them (the interleavings of the processes still vary).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { Queue as BullQueue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../chaos/rng.js';
import { Queue } from '../../src/index.js';
import type { ImportReport } from '../../src/migrate/index.js';
import { queueKeys } from '../../src/store/keys.js';
import type { LiveConfig } from '../fixtures/import-live-child.js';
import { RedisServer } from '../helpers/redis-server.js';
import { uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

const CHILD = new URL('../fixtures/import-live-child.ts', import.meta.url).pathname;
const SEED = process.env.IMPORT_LIVE_SEED ? Number(process.env.IMPORT_LIVE_SEED) : randomInt(2 ** 31);
const JOBS = 400;
/** Importer kills per live scenario (at least; more while the producer still adds). */
const KILLS = 6;

console.log(`import-bullmq-live: seed ${SEED} (replay with IMPORT_LIVE_SEED=${SEED})`);

/** A seeded stream (chaos/rng.ts): a run can be replayed from its seed. */
function random(seed: number): () => number {
  const rng = new Rng(seed);
  return () => rng.next();
}

interface ChildMessage {
  ready?: boolean;
  done?: number;
  run?: number;
  report?: ImportReport;
  error?: string;
}

interface Child {
  role: string;
  process: ChildProcess;
  messages: ChildMessage[];
  exited: Promise<void>;
  stderr: () => string;
}

const fx = useRedis();
/** The BullMQ queue's own server, for copy mode. */
let other: RedisServer;
beforeAll(async () => {
  other = await new RedisServer().start();
});
afterAll(async () => {
  await other?.stop();
});

const children: Child[] = [];
afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.process.exitCode === null && c.process.signalCode === null) c.process.kill('SIGKILL');
    await c.exited;
  }
});

function start(role: string, cfg: LiveConfig): Child {
  const child = fork(CHILD, [role, JSON.stringify(cfg)], { execArgv: ['--import', 'tsx'], stdio: 'pipe' });
  const messages: ChildMessage[] = [];
  let err = '';
  child.stdout?.resume();
  child.stderr?.on('data', (d: Buffer) => {
    err = (err + d.toString()).slice(-4_000);
  });
  child.on('message', (m: ChildMessage) => messages.push(m));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const c = { role, process: child, messages, exited, stderr: () => err };
  children.push(c);
  return c;
}

async function ready(c: Child): Promise<void> {
  await waitUntil(
    () => {
      const failed = c.messages.find((m) => m.error);
      if (failed) throw new Error(`${c.role} failed: ${failed.error}\n${c.stderr()}`);
      return c.messages.some((m) => m.ready);
    },
    `${c.role} ready`,
    15_000,
  );
}

/** Asks a worker child to close, and waits until it has. */
async function closeWorker(c: Child): Promise<void> {
  c.process.send({ close: true });
  let closed = false;
  void c.exited.then(() => {
    closed = true;
  });
  await waitUntil(() => closed, `${c.role} closed`, 15_000);
}

function reportsOf(c: Child): ImportReport[] {
  return c.messages.flatMap((m) => (m.report ? [m.report] : []));
}

function failIfErrored(c: Child): void {
  const failed = c.messages.find((m) => m.error);
  if (failed) throw new Error(`${c.role} reported an error: ${failed.error}\n${c.stderr()}`);
}

/** What the log says: the ids added, and each attempt's start and end by system. */
interface Log {
  added: string[];
  /** `<system>|<id>|<attempt>` of every attempt started. */
  starts: Set<string>;
  /** id -> systems whose processor returned for it. */
  ok: Map<string, string[]>;
}

async function readLog(key: string): Promise<Log> {
  const lines = await fx.redis.lrange(key, 0, -1);
  const log: Log = { added: [], starts: new Set(), ok: new Map() };
  for (const line of lines) {
    const [what, a, b, c] = line.split('|');
    if (what === 'add') log.added.push(a!);
    else if (what === 'start') log.starts.add(`${a}|${b}|${c}`);
    else if (what === 'ok') log.ok.set(b!, [...(log.ok.get(b!) ?? []), a!]);
  }
  return log;
}

/** The BullMQ queue's states as counted by the importer's own keys. */
async function bullOutstanding(client: Redis, q: string): Promise<number> {
  const [wait, paused, prioritized, delayed, active] = await Promise.all([
    client.llen(`bull:${q}:wait`),
    client.llen(`bull:${q}:paused`),
    client.zcard(`bull:${q}:prioritized`),
    client.zcard(`bull:${q}:delayed`),
    client.llen(`bull:${q}:active`),
  ]);
  return wait + paused + prioritized + delayed + active;
}

/**
 * Copy mode: waits until a held copy is noted in `imported` by polling back to back, or the importer
 * finished a run, or 3 s passed.
 */
async function openCopy(imported: string, imp: Child): Promise<void> {
  const deadline = Date.now() + 3_000;
  while (Date.now() < deadline && !imp.messages.some((m) => m.report)) {
    failIfErrored(imp);
    if ((await fx.redis.hlen(imported)) > 0) return;
  }
}

function sum(reports: ImportReport[]): ImportReport['moved'] {
  const total = { waiting: 0, paused: 0, prioritized: 0, delayed: 0, failed: 0, total: 0 };
  for (const r of reports)
    for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += r.moved[k];
  return total;
}

/**
 * The live workload with kills, on one server (atomic) or with BullMQ on its own server (copy).
 * Returns the verdicts' findings; the caller asserts them.
 */
async function liveImport(mode: 'atomic' | 'copy', seed: number) {
  const rnd = random(seed);
  const bull = uniqueName('bull');
  const surety = uniqueName('imported');
  const bullUrl = mode === 'copy' ? other.url : fx.server.url;
  const bullRedis = mode === 'copy' ? new Redis(other.url) : fx.redis;
  const cfg: LiveConfig = {
    bullUrl,
    suretyUrl: fx.server.url,
    logUrl: fx.server.url,
    logKey: `harness:${bull}:log`,
    bull,
    surety,
    copy: mode === 'copy',
    seed,
    jobs: JOBS,
  };
  const queue = new Queue(surety, { connection: fx.server.url });
  const keys = queueKeys('surety', surety);
  try {
    const bullSide = start('bullmq', { ...cfg, concurrency: 2 });
    const suretyWorker = start('surety-worker', { ...cfg, concurrency: 4 });
    // Importers are started ahead (spares, loaded and waiting), so a restart after a kill is at once.
    const spares = [start('importer', cfg), start('importer', cfg)];
    const tStart = Date.now();
    await Promise.all([bullSide, suretyWorker, ...spares].map(ready));
    const phases = [`ready ${Date.now() - tStart}`];
    bullSide.process.send({ go: true });
    // The importer refuses a BullMQ queue that does not exist yet: wait for the first add.
    await waitUntil(async () => (await fx.redis.llen(cfg.logKey)) > 0, 'the first add', 10_000);

    const importers: Child[] = [];
    const killedAt: string[] = [];
    const t0 = Date.now();
    const produced = () => bullSide.messages.find((m) => m.done !== undefined)?.done;
    while (killedAt.length < KILLS || produced() === undefined) {
      failIfErrored(bullSide);
      const imp = spares.shift()!;
      spares.push(start('importer', cfg));
      importers.push(imp);
      await ready(imp);
      const jobsBefore = await fx.redis.hlen(keys.jobs);
      imp.process.send({ go: true });
      // Copy mode: every other kill as soon as a copy is noted (before or just after its take);
      // else at a random moment once it moves jobs (or, with nothing to move, soon after it started).
      const atCopy = mode === 'copy' && killedAt.length % 2 === 1;
      if (atCopy) await openCopy(keys.imported, imp);
      else {
        await waitUntil(
          async () => {
            failIfErrored(imp);
            return (await fx.redis.hlen(keys.jobs)) > jobsBefore || imp.messages.some((m) => m.report);
          },
          'the importer moving jobs',
          15_000,
        );
        await new Promise((r) => setTimeout(r, Math.floor(rnd() * 60)));
      }
      failIfErrored(imp);
      imp.process.kill('SIGKILL');
      await imp.exited;
      killedAt.push(`${Date.now() - t0}${atCopy ? 'c' : ''}`);
      if (Date.now() - t0 > 30_000) throw new Error('the producer did not finish within 30 s');
    }
    failIfErrored(bullSide);
    const added = produced()!;
    phases.push(`live ${Date.now() - t0}`);

    // The producer has stopped: one more run, to completion.
    const last = spares.shift()!;
    for (const s of spares) s.process.kill('SIGKILL');
    await ready(last);
    last.process.send({ go: true, once: true });
    await last.exited;
    failIfErrored(last);
    phases.push(`last run ${Date.now() - t0}`);
    const lastReport = reportsOf(last).at(-1);
    if (!lastReport) throw new Error(`the last importer run reported nothing\n${last.stderr()}`);

    // BullMQ finishes what it kept (active jobs, retries it queued after the last run), then stops.
    await waitUntil(async () => (await bullOutstanding(bullRedis, bull)) === 0, 'BullMQ idle', 15_000);
    await closeWorker(bullSide);
    await waitUntil(
      async () => {
        const c = await queue.counts();
        return c.waiting + c.delayed + c.active + c.blocked === 0;
      },
      'Surety drained',
      15_000,
    );
    await closeWorker(suretyWorker);
    phases.push(`drained ${Date.now() - t0}`);
    failIfErrored(bullSide);
    failIfErrored(suretyWorker);

    // The final state of both systems.
    const log = await readLog(cfg.logKey);
    const bCompleted = new Set(await bullRedis.zrange(`bull:${bull}:completed`, 0, -1));
    const bFailedIds = await bullRedis.zrange(`bull:${bull}:failed`, 0, -1);
    const bFailed = new Map<string, { made: number; allowed: number }>();
    for (const id of bFailedIds) {
      const [atm, opts] = await bullRedis.hmget(`bull:${bull}:${id}`, 'atm', 'opts');
      const allowed = Number((JSON.parse(opts ?? '{}') as { attempts?: number }).attempts ?? 1);
      bFailed.set(id, { made: Number(atm ?? 0), allowed });
    }
    const sCompleted = new Set((await queue.getJobs('completed', { limit: 10_000 })).map((j) => j.id));
    const sDead = new Map(
      (await queue.getJobs('dead', { limit: 10_000 })).map((j) => [
        j.id,
        { made: j.attempts, allowed: j.maxAttempts },
      ]),
    );
    const importedNotes = await fx.redis.hlen(keys.imported);

    const reports = [...importers.flatMap(reportsOf), lastReport];
    const addedSet = new Set(log.added);

    // (a) one end each, in one system, failed or dead only with its attempts spent.
    const endedTwice: string[] = [];
    const lost: string[] = [];
    const endedEarly: string[] = [];
    for (const id of addedSet) {
      const ends = [
        bCompleted.has(id) && 'bullmq completed',
        bFailed.has(id) && 'bullmq failed',
        sCompleted.has(id) && 'surety completed',
        sDead.has(id) && 'surety dead',
      ].filter((e): e is string => e !== false);
      if (ends.length === 0) lost.push(id);
      if (ends.length > 1) endedTwice.push(`${id}: ${ends.join(', ')}`);
      for (const [what, failed] of [
        ['failed in BullMQ', bFailed.get(id)],
        ['dead in Surety', sDead.get(id)],
      ] as const) {
        if (failed && failed.made < failed.allowed) {
          endedEarly.push(`${id}: ${what} after ${failed.made} of ${failed.allowed} attempts`);
        }
      }
    }
    // (b) doubles: completed in both, or the same attempt started in both.
    const doubles = new Map<string, string>();
    for (const [id, systems] of log.ok) {
      if (systems.length > 1)
        doubles.set(id, `processor returned ${systems.length} times (${systems.join(',')})`);
    }
    for (const id of bCompleted) if (sCompleted.has(id)) doubles.set(id, 'completed in both');
    for (const s of log.starts) {
      const [system, id, n] = s.split('|');
      if (system === 'b' && log.starts.has(`s|${id}|${n}`)) doubles.set(id!, `attempt ${n} started in both`);
    }
    // (c) strays: jobs either system ended that no add() resolved for.
    const strays = [...bCompleted, ...bFailed.keys(), ...sCompleted, ...sDead.keys()].filter(
      (id) => !addedSet.has(id),
    );
    const moved = sum(reports);
    console.log(
      `import-bullmq-live ${mode} (seed ${seed}): ${addedSet.size} added; importer killed ${killedAt.length}x at ${killedAt.join(',')} ms, ` +
        `${reports.length} run(s) reported; moved ${sCompleted.size + sDead.size} (all runs), ${JSON.stringify(moved)} (runs that reported); ` +
        `ended: BullMQ completed ${bCompleted.size}, failed ${bFailed.size}; Surety completed ${sCompleted.size}, dead ${sDead.size}; ` +
        `doubles ${doubles.size}, lost ${lost.length}; ` +
        `last run: passes ${lastReport.passes}, kept ${JSON.stringify(lastReport.kept.byReason)}; ms: ${phases.join(', ')}`,
    );
    return {
      added,
      addedIds: log.added.length,
      distinctAdded: addedSet.size,
      endedTwice,
      lost,
      endedEarly,
      doubles: [...doubles].map(([id, why]) => `${id}: ${why}`),
      strays,
      importedNotes,
      moved,
      endedHere: sCompleted.size + sDead.size,
      kills: killedAt.length,
      lastMode: lastReport.mode,
    };
  } finally {
    await queue.close();
    if (bullRedis !== fx.redis) bullRedis.disconnect();
  }
}

describe('importFromBullMQ on a live BullMQ queue, the importer killed at random', () => {
  it('one server (atomic): every job ends once, in one system; none runs in both; none is lost', async () => {
    const r = await liveImport('atomic', SEED);
    expect(r.lastMode).toBe('atomic');
    expect(r.addedIds).toBe(r.added);
    expect(r.distinctAdded).toBe(r.added);
    expect(r.kills).toBeGreaterThanOrEqual(KILLS);
    // Killed runs never report: the jobs that ended here say that the import moved some.
    expect(r.endedHere).toBeGreaterThan(0);
    expect(r.lost, 'lost: in neither system').toEqual([]);
    expect(r.endedTwice, 'ended in both systems').toEqual([]);
    expect(r.doubles, 'ran in both systems').toEqual([]);
    expect(r.endedEarly, 'failed or dead with attempts left').toEqual([]);
    expect(r.strays, 'ended but never added').toEqual([]);
  }, 90_000);

  it('BullMQ on another server (copy): the same, and no held copy left behind', async () => {
    const r = await liveImport('copy', SEED + 1);
    expect(r.lastMode).toBe('copy');
    expect(r.addedIds).toBe(r.added);
    expect(r.distinctAdded).toBe(r.added);
    expect(r.kills).toBeGreaterThanOrEqual(KILLS);
    // Killed runs never report: the jobs that ended here say that the import moved some.
    expect(r.endedHere).toBeGreaterThan(0);
    expect(r.lost, 'lost: in neither system').toEqual([]);
    expect(r.endedTwice, 'ended in both systems').toEqual([]);
    expect(r.doubles, 'ran in both systems').toEqual([]);
    expect(r.endedEarly, 'failed or dead with attempts left').toEqual([]);
    expect(r.strays, 'ended but never added').toEqual([]);
    expect(r.importedNotes, '{prefix:queue}:imported entries left').toBe(0);
  }, 90_000);
});

/**
 * The periods of the schedulers moved in one run: 200 ms, and others so that some tick falls due while
 * the run moves its scheduler (between reading it in BullMQ and dropping it there).
 */
const PERIODS = [200, 110, 130, 150, 170, 190, 210, 230, 250, 270, 290, 310];

describe('importFromBullMQ moves live job schedulers', () => {
  it('no tick runs in both systems nor in neither, and ticks keep coming in Surety', async () => {
    const bull = uniqueName('bull');
    const surety = uniqueName('imported');
    const cfg: LiveConfig = {
      bullUrl: fx.server.url,
      suretyUrl: fx.server.url,
      logUrl: fx.server.url,
      logKey: `harness:${bull}:log`,
      bull,
      surety,
    };
    const bq = new BullQueue(bull, { connection: { host: '127.0.0.1', port: fx.server.port } });
    try {
      const bullSide = start('bullmq', { ...cfg, concurrency: 4 });
      const suretyWorker = start('surety-worker', { ...cfg, concurrency: 4 });
      const imp = start('importer', cfg);
      await Promise.all([bullSide, suretyWorker, imp].map(ready));
      const keysOf = PERIODS.map((every, i) => (i === 0 ? 'tick' : `tick-${every}`));
      for (const [i, key] of keysOf.entries()) {
        await bq.upsertJobScheduler(key, { every: PERIODS[i]! }, { name: key, data: { ms: 5 } });
      }
      // A tick is the due time in its job id: BullMQ's occurrences are `repeat:<key>:<tick>` (run
      // there, or moved here as jobs), a schedule's here `schedule:<key>:<tick>`.
      const ticks = async () => {
        const log = await readLog(cfg.logKey);
        const out = new Map(
          keysOf.map((k) => [k, { b: [] as number[], moved: [] as number[], s: [] as number[] }]),
        );
        for (const started of log.starts) {
          const [system, id] = started.split('|') as ['b' | 's', string];
          const m = /^(repeat|schedule):(.+):(\d+)$/.exec(id);
          const t = m && out.get(m[2]!);
          if (!t) continue;
          (system === 'b' ? t.b : m[1] === 'repeat' ? t.moved : t.s).push(Number(m[3]));
        }
        return out;
      };
      const each = async (test: (t: { b: number[]; s: number[] }) => boolean) =>
        [...(await ticks()).values()].every(test);
      await waitUntil(() => each((t) => t.b.length >= 3), '3 BullMQ ticks of each scheduler', 10_000);
      // The run starts at a random phase of the ticks.
      await new Promise((r) => setTimeout(r, Math.floor(random(SEED + 2)() * 300)));
      imp.process.send({ go: true, once: true });
      await imp.exited;
      failIfErrored(imp);
      const movedAt = Date.now();
      const report = reportsOf(imp).at(-1);
      expect(report?.schedulers.sort()).toEqual([...keysOf].sort());

      await waitUntil(() => each((t) => t.s.length >= 3), '3 Surety ticks of each schedule', 10_000);
      await closeWorker(bullSide);
      await closeWorker(suretyWorker);
      failIfErrored(bullSide);
      failIfErrored(suretyWorker);

      // Every occurrence BullMQ created (its `added` events) must run once, in one system.
      const created = new Map<string, number[]>(keysOf.map((k) => [k, []]));
      for (const [, fields] of await fx.redis.xrange(`bull:${bull}:events`, '-', '+')) {
        const f = Object.fromEntries(fields.flatMap((v, i) => (i % 2 === 0 ? [[v, fields[i + 1]!]] : [])));
        const m = f.event === 'added' ? /^repeat:(.+):(\d+)$/.exec(f.jobId ?? '') : null;
        if (m) created.get(m[1]!)?.push(Number(m[2]));
      }
      const t = await ticks();
      const both: string[] = [];
      const neither: string[] = [];
      const handOver: string[] = [];
      const lateBull: string[] = [];
      const summary: string[] = [];
      for (const [i, key] of keysOf.entries()) {
        const every = PERIODS[i]!;
        const { b, moved, s } = t.get(key)!;
        const runs = new Map<number, number>();
        for (const tick of [...b, ...moved, ...s]) runs.set(tick, (runs.get(tick) ?? 0) + 1);
        for (const [tick, n] of runs) if (n > 1) both.push(`${key}:${tick}`);
        for (const tick of created.get(key)!) if (!runs.has(tick)) neither.push(`${key}:${tick}`);
        // The hand-over: the first tick of the schedule here follows the last BullMQ occurrence that
        // ran before it, in either system. (Later, a tick started more than a period late collapses
        // the ones it missed: each system's own rule.)
        const first = Math.min(...s);
        const before = Math.max(...[...b, ...moved].filter((tick) => tick < first));
        if (first !== before + every) handOver.push(`${key}: ${before} then ${first}`);
        const last = Math.max(...created.get(key)!);
        if (last > movedAt + every) lateBull.push(`${key}:${last}`);
        summary.push(`${key} ${b.length}+${moved.length}+${s.length}`);
      }
      console.log(
        `import-bullmq-live schedulers (seed ${SEED + 2}, moved at ${movedAt}): ticks run by BullMQ + moved occurrences + schedules here: ${summary.join(', ')}; in both ${both.length}, in neither ${neither.length}, hand-overs with a gap ${handOver.length}`,
      );
      expect(both, 'ticks that ran in both systems').toEqual([]);
      expect(neither, 'BullMQ occurrences that ran in neither system').toEqual([]);
      expect(handOver, 'a tick in neither system at the hand-over').toEqual([]);
      expect(lateBull, 'BullMQ occurrences created after the move').toEqual([]);
      expect(await bq.getJobSchedulers()).toEqual([]);
    } finally {
      await bq.close();
    }
  }, 45_000);
});
