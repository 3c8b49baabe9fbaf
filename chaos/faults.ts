/**
 * Fault injection: a schedule planned up front from the seed, then played against the live run.
 *
 *  kill          kill -9 of a worker process (replaced by a new one)
 *  stop          SIGSTOP of a worker for longer than the lease, then SIGCONT (its late acks must be refused)
 *  clientKillAll CLIENT KILL TYPE normal SKIPME yes: every command connection (workers and producer)
 *  clientKillOne CLIENT KILL ID of one worker's connections (found by connection name)
 *  clientKillSub CLIENT KILL TYPE pubsub: the workers' wake-up subscriptions
 *  redisKill     kill -9 of redis-server, restarted from its AOF on the same port
 */
import type { Redis } from 'ioredis';
import type { RedisServer } from '../test/helpers/redis-server.js';
import type { WorkerPool } from './pool.js';
import type { Rng } from './rng.js';

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
 * gaps of `minGapMs..maxGapMs`, all inside [2 s, durationMs - lastMarginMs].
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
  const plan: PlannedFault[] = times.map((atMs, i) => ({
    atMs,
    kind: kinds[i]!,
    slot: rng.int(0, o.workers - 1),
    holdMs: o.leaseMs + rng.int(500, 2_000),
  }));
  const kept = plan.filter((f) => f.kind !== 'redisKill' || rng.chance(0.5));
  for (let k = 1; k <= o.redisKills; k++) {
    const atMs = Math.round(first + ((last - first) * (k - 0.5 + (rng.next() - 0.5) * 0.4)) / o.redisKills);
    kept.push({ atMs, kind: 'redisKill', slot: 0, holdMs: 0 });
  }
  return kept.sort((a, b) => a.atMs - b.atMs);
}

export class FaultRunner {
  readonly records: FaultRecord[] = [];
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
        await new Promise((r) => setTimeout(r, Math.min(100, t0 + f.atMs - Date.now())));
      }
      if (shouldStop()) return;
      try {
        await this.inject(f);
      } catch (err) {
        this.log(`fault ${f.kind} failed to apply: ${(err as Error).message}`);
      }
    }
  }

  private async inject(f: PlannedFault): Promise<void> {
    const at = Date.now();
    const record = (rec: Omit<FaultRecord, 'kind' | 'at'>) => {
      this.records.push({ kind: f.kind, at, ...rec });
      this.log(`fault ${f.kind} ${rec.detail}`);
    };
    if (f.kind === 'redisKill') {
      await this.redis.restart();
      return record({ until: Date.now(), detail: `redis down for ${Date.now() - at} ms` });
    }
    if (f.kind === 'clientKillAll' || f.kind === 'clientKillSub') {
      const type = f.kind === 'clientKillAll' ? 'normal' : 'pubsub';
      const n = await this.admin.client('KILL', 'TYPE', type, 'SKIPME', 'yes');
      return record({ until: Date.now(), detail: `${n} ${type} connections` });
    }
    const w = this.pool.current(f.slot);
    if (!w || w.exitedAt !== undefined) return;
    if (f.kind === 'kill') {
      await this.pool.kill(f.slot);
      return record({ until: Date.now(), pid: w.pid, detail: `pid ${w.pid}` });
    }
    if (f.kind === 'clientKillOne') {
      const list = (await this.admin.client('LIST')) as string;
      const ids = list
        .split('\n')
        .filter((l) => l.includes(` name=chaos-w-${w.pid} `))
        .map((l) => /(?:^|\s)id=(\d+)/.exec(l)?.[1])
        .filter((id): id is string => id !== undefined);
      for (const id of ids) await this.admin.client('KILL', 'ID', id).catch(() => 0);
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

  /** SIGCONT every process still stopped (end of the chaos phase, or cleanup). */
  releaseAll(): void {
    for (const t of this.contTimers) clearTimeout(t);
    this.contTimers.clear();
    for (const cont of this.pendingConts) cont();
    this.pendingConts.clear();
  }
}
