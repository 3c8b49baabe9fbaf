/**
 * Fault injection: plays the plan (fault-plan.ts) against the live run.
 *
 * On loopback a command is in flight for microseconds, so a connection cut or a Redis kill almost never
 * catches one. Half of the clientKill* and redisKill faults therefore first hold writes with
 * CLIENT PAUSE WRITE for a few hundred ms: every script sent meanwhile (claims, acks, lease renewals,
 * adds) is in flight when the connection or the server dies, and must be rejected, never left pending.
 */
import type { Redis } from 'ioredis';
import type { RedisServer } from '../test/helpers/redis-server.js';
import { type FaultRecord, PER_PROCESS, type PlannedFault } from './fault-plan.js';
import type { Network } from './network.js';
import type { WorkerPool, WorkerProc } from './pool.js';
import { sleep, within } from './time.js';
import { type Started, startTimedFault, TIMED } from './timed-faults.js';

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
      ...(started.everyWorker ? { everyWorker: true as const } : {}),
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
