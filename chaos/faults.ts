/**
 * Fault injection: a schedule planned up front from the seed, then played against the live run.
 *
 *  kill          kill -9 of a worker process (replaced by a new one)
 *  stop          SIGSTOP of a worker for longer than the lease, then SIGCONT (its late acks must be refused)
 *  clientKillAll CLIENT KILL TYPE normal SKIPME yes: every command connection (workers and producer)
 *  clientKillOne CLIENT KILL ID of one worker's connections (found by connection name)
 *  clientKillSub CLIENT KILL TYPE pubsub: the workers' wake-up subscriptions
 *  redisKill     kill -9 of redis-server, restarted from its AOF on the same port
 *
 * On loopback a command is in flight for microseconds, so a connection cut or a Redis kill almost never
 * catches one. Half of the clientKill* and redisKill faults therefore first hold writes with
 * CLIENT PAUSE WRITE for a few hundred ms: every script sent meanwhile (claims, acks, lease renewals,
 * adds) is in flight when the connection or the server dies, and must be rejected, never left pending.
 */
import type { Redis } from 'ioredis';
import type { RedisServer } from '../test/helpers/redis-server.js';
import type { WorkerPool, WorkerProc } from './pool.js';
import type { Rng } from './rng.js';
import { sleep, within } from './time.js';

export type FaultKind = 'kill' | 'stop' | 'clientKillAll' | 'clientKillOne' | 'clientKillSub' | 'redisKill';
export const FAULT_KINDS: readonly FaultKind[] = [
  'kill',
  'stop',
  'clientKillAll',
  'clientKillOne',
  'clientKillSub',
  'redisKill',
];

export interface PlannedFault {
  /** Offset from the start of the chaos phase. */
  atMs: number;
  kind: FaultKind;
  slot: number;
  /** For stop: how long the process stays stopped. */
  holdMs: number;
  /** For clientKill* and redisKill: hold writes this long first (0 = no). */
  pauseMs: number;
}

/** What happened, for the report and for attributing wasted executions to a cause. */
export interface FaultRecord {
  kind: FaultKind;
  /** Epoch ms when the fault began and ended (stop: SIGCONT; redisKill: server answering again). */
  at: number;
  until: number;
  /** The worker process hit, for per-process faults. */
  pid?: number;
  detail: string;
}

const EXTRA_WEIGHTS: Record<FaultKind, number> = {
  kill: 30,
  stop: 25,
  clientKillOne: 15,
  clientKillAll: 12,
  clientKillSub: 10,
  redisKill: 8,
};

/**
 * Every kind at least once, `redisKills` kills of Redis spread over the phase, and more faults at random
 * gaps of 0.4..1.6 x meanGapMs, all inside [2 s, durationMs - lease - 2.5 s] so that each one has
 * resolved (stopped processes continued, leases expired and recovered) before the phase ends.
 */
export function planFaults(
  rng: Rng,
  o: { durationMs: number; workers: number; leaseMs: number; redisKills: number; meanGapMs: number },
): PlannedFault[] {
  const first = 2_000;
  const last = o.durationMs - o.leaseMs - 2_500;
  const times: number[] = [];
  for (let t = first; t <= last; t += Math.round(o.meanGapMs * (0.4 + rng.next() * 1.2))) times.push(t);
  const kinds: FaultKind[] = times.map(() => rng.weighted(EXTRA_WEIGHTS));
  // Mandatory: each kind once (redisKill planned separately), at distinct random positions.
  const free = times.map((_, i) => i);
  for (const kind of FAULT_KINDS.filter((k) => k !== 'redisKill')) {
    if (free.length === 0) break;
    const i = free.splice(rng.int(0, free.length - 1), 1)[0]!;
    kinds[i] = kind;
  }
  const pause = () => (rng.chance(0.5) ? rng.int(150, 400) : 0);
  const plan: PlannedFault[] = times.map((atMs, i) => ({
    atMs,
    kind: kinds[i]!,
    slot: rng.int(0, o.workers - 1),
    holdMs: o.leaseMs + rng.int(500, 2_000),
    pauseMs: kinds[i] === 'kill' || kinds[i] === 'stop' ? 0 : pause(),
  }));
  const kept = plan.filter((f) => f.kind !== 'redisKill' || rng.chance(0.5));
  for (let k = 1; k <= o.redisKills; k++) {
    const atMs = Math.round(first + ((last - first) * (k - 0.5 + (rng.next() - 0.5) * 0.4)) / o.redisKills);
    // The first planned Redis kill always catches commands in flight, the second never.
    kept.push({
      atMs,
      kind: 'redisKill',
      slot: 0,
      holdMs: 0,
      pauseMs: k === 1 ? 300 : k === 2 ? 0 : pause(),
    });
  }
  return kept.sort((a, b) => a.atMs - b.atMs);
}

/** An admin command or a restart that takes longer than this fails the fault (the run goes on). */
const FAULT_TIMEOUT_MS = 15_000;

export class FaultRunner {
  readonly records: FaultRecord[] = [];
  /** The fault being applied, if any (named when the run hangs). */
  current = '';
  private readonly contTimers = new Set<NodeJS.Timeout>();
  private readonly pendingConts = new Set<() => void>();

  constructor(
    private readonly pool: WorkerPool,
    private readonly redis: RedisServer,
    private readonly admin: Redis,
    private readonly log: (line: string) => void,
  ) {}

  /** Plays the plan relative to `t0`; stops early when `shouldStop()` turns true. */
  async run(plan: readonly PlannedFault[], t0: number, shouldStop: () => boolean): Promise<void> {
    for (const f of plan) {
      while (Date.now() < t0 + f.atMs) {
        if (shouldStop()) return;
        await sleep(Math.min(100, t0 + f.atMs - Date.now()));
      }
      if (shouldStop()) return;
      this.current = `${f.kind} planned at +${f.atMs} ms`;
      try {
        await this.inject(f);
      } catch (err) {
        this.log(`fault ${f.kind} failed to apply: ${(err as Error).message}`);
      }
      this.current = '';
    }
  }

  private async inject(f: PlannedFault): Promise<void> {
    const at = Date.now();
    const w = this.target(f);
    const perProcess = f.kind === 'kill' || f.kind === 'stop' || f.kind === 'clientKillOne';
    if (perProcess && (!w || w.exitedAt !== undefined)) return;
    const paused = f.pauseMs > 0 ? ` (writes held ${f.pauseMs} ms first)` : '';
    const record = (rec: Omit<FaultRecord, 'kind' | 'at'>) => {
      this.records.push({ kind: f.kind, at, ...rec, detail: rec.detail + paused });
      this.log(`fault ${f.kind} ${rec.detail}${paused}`);
    };
    if (f.pauseMs > 0) {
      // The pause expires by itself a second later should the harness die right here.
      await this.clientCommand('PAUSE', String(f.pauseMs + 1_000), 'WRITE');
      await sleep(f.pauseMs);
    }
    try {
      if (f.kind === 'redisKill') {
        await within(this.redis.restart(), FAULT_TIMEOUT_MS, 'redis-server restart');
        return record({ until: Date.now(), detail: `redis down for ${Date.now() - at - f.pauseMs} ms` });
      }
      if (f.kind === 'clientKillAll' || f.kind === 'clientKillSub') {
        const type = f.kind === 'clientKillAll' ? 'normal' : 'pubsub';
        const n = await this.clientCommand('KILL', 'TYPE', type, 'SKIPME', 'yes');
        return record({ until: Date.now(), detail: `${n} ${type} connections` });
      }
      return await this.injectInto(f, w!, at, record);
    } finally {
      if (f.pauseMs > 0 && f.kind !== 'redisKill') await this.clientCommand('UNPAUSE').catch(() => {});
    }
  }

  private async injectInto(
    f: PlannedFault,
    w: WorkerProc,
    at: number,
    record: (rec: Omit<FaultRecord, 'kind' | 'at'>) => void,
  ): Promise<void> {
    if (f.kind === 'kill') {
      await within(this.pool.kill(w.slot), FAULT_TIMEOUT_MS, `kill -9 of pid ${w.pid}`);
      return record({ until: Date.now(), pid: w.pid, detail: `pid ${w.pid}` });
    }
    if (f.kind === 'clientKillOne') {
      const list = (await this.clientCommand('LIST')) as string;
      const ids = list
        .split('\n')
        .filter((l) => l.includes(` name=chaos-w-${w.pid} `))
        .map((l) => /(?:^|\s)id=(\d+)/.exec(l)?.[1])
        .filter((id): id is string => id !== undefined);
      for (const id of ids) await this.clientCommand('KILL', 'ID', id).catch(() => 0);
      return record({ until: Date.now(), pid: w.pid, detail: `pid ${w.pid}: ${ids.length} connections` });
    }
    // stop: not awaited, so other faults can overlap with the stopped process.
    if (w.stopped || !this.pool.signal(w, 'SIGSTOP')) return;
    const rec: FaultRecord = { kind: 'stop', at, until: at + f.holdMs, pid: w.pid, detail: '' };
    this.records.push(rec);
    const cont = () => {
      this.pool.signal(w, 'SIGCONT');
      rec.until = Date.now();
      rec.detail = `pid ${w.pid} for ${rec.until - at} ms`;
      this.log(`fault stop ${rec.detail}`);
    };
    this.pendingConts.add(cont);
    const timer = setTimeout(() => {
      this.contTimers.delete(timer);
      this.pendingConts.delete(cont);
      cont();
    }, f.holdMs);
    this.contTimers.add(timer);
  }

  /** The process in the planned slot; for stop, the next slot's if that one is already stopped. */
  private target(f: PlannedFault): WorkerProc | null {
    for (let i = 0; i < this.pool.size; i++) {
      const w = this.pool.current((f.slot + i) % this.pool.size);
      if (w && w.exitedAt === undefined && (f.kind !== 'stop' || !w.stopped)) return w;
    }
    return null;
  }

  /** CLIENT <args> on the admin connection, bounded in time. */
  private clientCommand(...args: string[]): Promise<unknown> {
    return within(this.admin.call('CLIENT', ...args), FAULT_TIMEOUT_MS, `CLIENT ${args.join(' ')}`);
  }

  /** SIGCONT every process still stopped (end of the chaos phase, or cleanup). */
  releaseAll(): void {
    for (const t of this.contTimers) clearTimeout(t);
    this.contTimers.clear();
    for (const cont of this.pendingConts) cont();
    this.pendingConts.clear();
  }
}
