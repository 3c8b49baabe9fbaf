/**
 * Fault injection: a schedule planned up front from the seed, then played against the live run.
 *
 *  kill          kill -9 of a worker process (replaced by a new one)
 *  stop          SIGSTOP of a worker for longer than the lease, then SIGCONT (its late acks must be refused)
 *  clientKillAll CLIENT KILL TYPE normal SKIPME yes: every command connection (workers and producer)
 *  clientKillOne CLIENT KILL ID of one worker's connections (found by connection name)
 *  clientKillSub CLIENT KILL TYPE pubsub: the workers' wake-up subscriptions
 *  redisKill     kill -9 of redis-server, restarted from its AOF on the same port
 *  netReset      partition by resets: every connection through a worker's proxy (one worker's, or all
 *                workers') is destroyed and new ones are refused for 1-4 s
 *  netBlackhole  partition by black hole: connections stay open but no byte moves (both ways, or only
 *                replies, or only commands) for longer than the lease, then every held byte is delivered
 *  oom           Redis reaches maxmemory (noeviction): CONFIG SET maxmemory just above used memory for
 *                2-5 s, then 0 (no limit) again
 *
 * On loopback a command is in flight for microseconds, so a connection cut or a Redis kill almost never
 * catches one. Half of the clientKill* and redisKill faults therefore first hold writes with
 * CLIENT PAUSE WRITE for a few hundred ms: every script sent meanwhile (claims, acks, lease renewals,
 * adds) is in flight when the connection or the server dies, and must be rejected, never left pending.
 */
import type { Redis } from 'ioredis';
import type { RedisServer } from '../test/helpers/redis-server.js';
import type { Network } from './network.js';
import type { WorkerPool, WorkerProc } from './pool.js';
import type { Rng } from './rng.js';
import type { Direction } from './tcp-proxy.js';
import { sleep, within } from './time.js';
import { type Started, startTimedFault, TIMED } from './timed-faults.js';

export type FaultKind =
  | 'kill'
  | 'stop'
  | 'clientKillAll'
  | 'clientKillOne'
  | 'clientKillSub'
  | 'redisKill'
  | 'netReset'
  | 'netBlackhole'
  | 'oom';
export const FAULT_KINDS: readonly FaultKind[] = [
  'kill',
  'stop',
  'clientKillAll',
  'clientKillOne',
  'clientKillSub',
  'redisKill',
  'netReset',
  'netBlackhole',
  'oom',
];

/** Faults that hit one worker process (the others hit every worker, or Redis). */
const PER_PROCESS: readonly FaultKind[] = ['kill', 'stop', 'clientKillOne'];

export interface PlannedFault {
  /** Offset from the start of the chaos phase. */
  atMs: number;
  kind: FaultKind;
  slot: number;
  /** For stop, netReset, netBlackhole and oom: how long the fault lasts. */
  holdMs: number;
  /** For clientKill* and redisKill: hold writes this long first (0 = no). */
  pauseMs: number;
  /** For net*: one worker's proxy (the slot's) or every worker's. */
  scope: 'one' | 'all';
  /** For netBlackhole: which bytes are held. */
  direction: Direction;
}

/**
 * What happened, for the report and for attributing wasted executions to a cause. `loopStall` is not
 * injected: it is a worker's event loop measured blocked (worker-child.ts), the documented limit
 * "a blocked event loop longer than leaseMs means the job may run twice", counted as a cause.
 */
export interface FaultRecord {
  kind: FaultKind | 'loopStall';
  /** Epoch ms when the fault began and ended (stop: SIGCONT; redisKill: server answering again). */
  at: number;
  until: number;
  /** The worker process hit, for per-process faults. */
  pid?: number;
  detail: string;
  /** oom: jobs waiting or active when it began (work that should go on moving). */
  backlog?: number;
}

const EXTRA_WEIGHTS: Record<FaultKind, number> = {
  kill: 30,
  stop: 25,
  clientKillOne: 15,
  clientKillAll: 12,
  clientKillSub: 10,
  redisKill: 8,
  netReset: 14,
  netBlackhole: 12,
  oom: 6,
};

/**
 * Every kind at least once, `redisKills` kills of Redis spread over the phase, and more faults at random
 * gaps of 0.4..1.6 x meanGapMs, all inside [2 s, durationMs - lease - 2.5 s] so that each one has
 * resolved (stopped processes continued, leases expired and recovered) before the phase ends.
 */
export function planFaults(
  rng: Rng,
  o: {
    durationMs: number;
    workers: number;
    leaseMs: number;
    redisKills: number;
    meanGapMs: number;
    kinds: readonly FaultKind[];
  },
): PlannedFault[] {
  if (o.kinds.length === 0) return [];
  const first = 2_000;
  const last = o.durationMs - o.leaseMs - 2_500;
  const times: number[] = [];
  for (let t = first; t <= last; t += Math.round(o.meanGapMs * (0.4 + rng.next() * 1.2))) times.push(t);
  const weights: Partial<Record<FaultKind, number>> = {};
  for (const k of o.kinds) weights[k] = EXTRA_WEIGHTS[k];
  const kinds: FaultKind[] = times.map(() => rng.weighted(weights as Record<FaultKind, number>));
  // Mandatory: each kind once (redisKill planned separately), at distinct random positions.
  const free = times.map((_, i) => i);
  for (const kind of o.kinds.filter((k) => k !== 'redisKill')) {
    if (free.length === 0) break;
    const i = free.splice(rng.int(0, free.length - 1), 1)[0]!;
    kinds[i] = kind;
  }
  const pause = () => (rng.chance(0.5) ? rng.int(150, 400) : 0);
  const hold = (kind: FaultKind) =>
    kind === 'netReset'
      ? rng.int(1_000, 4_000)
      : kind === 'oom'
        ? rng.int(2_000, 5_000)
        : o.leaseMs + rng.int(500, kind === 'netBlackhole' ? 2_500 : 2_000);
  const paused = (kind: FaultKind) => (kind.startsWith('clientKill') || kind === 'redisKill' ? pause() : 0);
  const plan: PlannedFault[] = times.map((atMs, i) => ({
    atMs,
    kind: kinds[i]!,
    slot: rng.int(0, o.workers - 1),
    holdMs: hold(kinds[i]!),
    pauseMs: paused(kinds[i]!),
    scope: rng.chance(0.35) ? 'all' : 'one',
    direction: rng.weighted({ both: 50, toClient: 30, toServer: 20 }),
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
      scope: 'all',
      direction: 'both',
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
  private readonly endTimers = new Set<NodeJS.Timeout>();
  /** Ends of faults still in force (SIGCONT, heal, memory raised), run early by releaseAll(). */
  private readonly pendingEnds = new Set<() => Promise<void>>();
  /** Proxies (slots) black-holed now, and whether Redis is at maxmemory: faults of a kind do not nest. */
  readonly inForce = { heldSlots: new Set<number>(), oom: false };

  constructor(
    private readonly pool: WorkerPool,
    private readonly redis: RedisServer,
    private readonly admin: Redis,
    private readonly network: Network,
    private readonly log: (line: string) => void,
    /** Jobs waiting + active now (the admin API's counts), or null if unknown. */
    private readonly backlog: () => Promise<number | null>,
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
    if (PER_PROCESS.includes(f.kind) && (!w || w.exitedAt !== undefined)) return;
    if (TIMED.includes(f.kind)) return this.injectTimed(f, at);
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
      return await this.injectInto(f, w!, record);
    } finally {
      if (f.pauseMs > 0 && f.kind !== 'redisKill') await this.clientCommand('UNPAUSE').catch(() => {});
    }
  }

  /**
   * stop, netReset, netBlackhole, oom: in force for holdMs, not awaited, so other faults can overlap
   * with them. The record is written at once (until = the planned end) and completed when it ends.
   */
  private async injectTimed(f: PlannedFault, at: number): Promise<void> {
    const started: Started | null =
      f.kind === 'stop'
        ? this.startStop(f)
        : await startTimedFault(f, {
            network: this.network,
            admin: this.admin,
            inForce: this.inForce,
            pidOf: (slot) => this.pool.current(slot)?.pid,
            backlog: this.backlog,
            timeoutMs: FAULT_TIMEOUT_MS,
          });
    if (!started) return;
    const rec: FaultRecord = {
      kind: f.kind,
      at,
      until: at + f.holdMs,
      ...(started.pid === undefined ? {} : { pid: started.pid }),
      ...(started.backlog === undefined ? {} : { backlog: started.backlog }),
      detail: started.detail,
    };
    this.records.push(rec);
    this.log(`fault ${f.kind} begins: ${started.detail}, for ${f.holdMs} ms`);
    const end = async () => {
      try {
        await started.end();
      } catch (err) {
        this.log(`fault ${f.kind} failed to end cleanly: ${(err as Error).message}`);
      }
      rec.until = Date.now();
      rec.detail = `${started.detail}, for ${rec.until - at} ms`;
      this.log(`fault ${f.kind} ends: ${rec.detail}`);
    };
    this.pendingEnds.add(end);
    const timer = setTimeout(() => {
      this.endTimers.delete(timer);
      this.pendingEnds.delete(end);
      void end();
    }, f.holdMs);
    this.endTimers.add(timer);
  }

  private startStop(f: PlannedFault): Started | null {
    const w = this.target(f);
    if (!w || w.stopped || !this.pool.signal(w, 'SIGSTOP')) return null;
    return {
      pid: w.pid,
      detail: `pid ${w.pid}`,
      end: async () => {
        this.pool.signal(w, 'SIGCONT');
      },
    };
  }

  private async injectInto(
    f: PlannedFault,
    w: WorkerProc,
    record: (rec: Omit<FaultRecord, 'kind' | 'at'>) => void,
  ): Promise<void> {
    if (f.kind === 'kill') {
      await within(this.pool.kill(w.slot), FAULT_TIMEOUT_MS, `kill -9 of pid ${w.pid}`);
      return record({ until: Date.now(), pid: w.pid, detail: `pid ${w.pid}` });
    }
    // clientKillOne
    const list = (await this.clientCommand('LIST')) as string;
    const ids = list
      .split('\n')
      .filter((l) => l.includes(` name=chaos-w-${w.pid} `))
      .map((l) => /(?:^|\s)id=(\d+)/.exec(l)?.[1])
      .filter((id): id is string => id !== undefined);
    for (const id of ids) await this.clientCommand('KILL', 'ID', id).catch(() => 0);
    return record({ until: Date.now(), pid: w.pid, detail: `pid ${w.pid}: ${ids.length} connections` });
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

  /**
   * Ends every fault still in force: SIGCONT of stopped processes, heal of every proxy, memory limit
   * lifted (end of the chaos phase, or cleanup; synchronous callers may ignore the promise).
   */
  releaseAll(): Promise<void> {
    for (const t of this.endTimers) clearTimeout(t);
    this.endTimers.clear();
    const ends = [...this.pendingEnds];
    this.pendingEnds.clear();
    this.network.healAll();
    return Promise.allSettled(ends.map((end) => end())).then(() => {});
  }
}
