/**
 * The faults that hold for a while and then end: a network partition of one worker or of all of them
 * (resets or a black hole, through the per-slot proxies of network.ts) and Redis at maxmemory.
 * Each start function applies the fault and returns how to end it; faults.ts times the end.
 */
import type { Redis } from 'ioredis';
import type { FaultKind, PlannedFault } from './fault-plan.js';
import type { Network } from './network.js';
import { within } from './time.js';

/** Fault kinds in force for a planned time (stop is handled by faults.ts itself: it needs the pool). */
export const TIMED: readonly FaultKind[] = ['stop', 'netReset', 'netBlackhole', 'oom'];

export interface Started {
  /** The worker process hit (faults of one slot), for attributing wasted executions. */
  pid?: number;
  /** Every worker's proxy was hit (slots already held by another black hole count as hit). */
  everyWorker?: true;
  detail: string;
  /** oom: jobs waiting or active when it began. */
  backlog?: number;
  end: () => Promise<void>;
}

export interface TimedContext {
  network: Network;
  admin: Redis;
  /** Shared with faults.ts: what is in force now, so two faults of a kind never undo each other. */
  inForce: { heldSlots: Set<number>; oom: boolean };
  pidOf: (slot: number) => number | undefined;
  backlog: () => Promise<number | null>;
  timeoutMs: number;
}

/** Redis may grow this far past the memory it used when the fault began before it refuses writes. */
export const OOM_HEADROOM_BYTES = 64 * 1024;

export async function startTimedFault(f: PlannedFault, ctx: TimedContext): Promise<Started | null> {
  if (f.kind === 'netReset') return startReset(f, ctx);
  if (f.kind === 'netBlackhole') return startBlackhole(f, ctx);
  if (f.kind === 'oom') return startOom(ctx);
  throw new Error(`not a timed fault: ${f.kind}`);
}

function slotsOf(f: PlannedFault, ctx: TimedContext): number[] {
  return f.scope === 'all' ? Array.from({ length: ctx.network.size }, (_, i) => i) : [f.slot];
}

function describe(f: PlannedFault, slots: readonly number[], ctx: TimedContext): string {
  if (f.scope === 'all') return `all ${slots.length} workers`;
  return `worker slot ${slots[0]} (pid ${ctx.pidOf(slots[0]!) ?? 'none'})`;
}

/** Every connection through the proxies destroyed (RST), new ones refused until the fault ends. */
function startReset(f: PlannedFault, ctx: TimedContext): Started {
  const slots = slotsOf(f, ctx);
  for (const s of slots) ctx.network.proxy(s).reset(f.holdMs);
  return {
    ...(f.scope === 'one' ? pidField(ctx.pidOf(f.slot)) : { everyWorker: true as const }),
    detail: `resets of ${describe(f, slots, ctx)}`,
    end: async () => {}, // the refusal ends by itself after holdMs
  };
}

/** No byte moves (in f.direction) through the proxies until the fault ends; then all are delivered. */
function startBlackhole(f: PlannedFault, ctx: TimedContext): Started | null {
  const slots = slotsOf(f, ctx).filter((s) => !ctx.inForce.heldSlots.has(s));
  if (slots.length === 0) return null;
  for (const s of slots) {
    ctx.inForce.heldSlots.add(s);
    ctx.network.proxy(s).blackhole(f.direction);
  }
  const dir =
    f.direction === 'both' ? 'both ways' : f.direction === 'toClient' ? 'replies only' : 'commands only';
  return {
    ...(f.scope === 'one' ? pidField(ctx.pidOf(f.slot)) : { everyWorker: true as const }),
    detail: `black hole (${dir}) of ${f.scope === 'all' ? `${slots.length} workers` : describe(f, slots, ctx)}`,
    end: async () => {
      for (const s of slots) {
        ctx.network.proxy(s).heal();
        ctx.inForce.heldSlots.delete(s);
      }
    },
  };
}

/** maxmemory just above what Redis uses now (policy noeviction): writes refused until it is lifted. */
async function startOom(ctx: TimedContext): Promise<Started | null> {
  if (ctx.inForce.oom) return null;
  const call = (...args: string[]) =>
    within(ctx.admin.call(...(args as [string, ...string[]])), ctx.timeoutMs, args.join(' '));
  const info = (await call('INFO', 'memory')) as string;
  const used = Number(/used_memory:(\d+)/.exec(info)?.[1]);
  if (!Number.isFinite(used) || used <= 0) throw new Error('INFO memory: no used_memory');
  const backlog = await ctx.backlog();
  const limit = used + OOM_HEADROOM_BYTES;
  await call('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
  await call('CONFIG', 'SET', 'maxmemory', String(limit));
  ctx.inForce.oom = true;
  return {
    ...(backlog === null ? {} : { backlog }),
    detail: `maxmemory ${limit} (used ${used} + ${OOM_HEADROOM_BYTES / 1024} KiB, ${backlog ?? '?'} jobs waiting or active)`,
    end: async () => {
      // A Redis restart meanwhile already dropped the limit; setting 0 again is harmless. Retried: a
      // limit left in force would stall the drain and read as stuck jobs.
      for (let attempt = 1; ; attempt++) {
        try {
          await call('CONFIG', 'SET', 'maxmemory', '0');
          break;
        } catch (err) {
          if (attempt >= 3) throw err;
        }
      }
      ctx.inForce.oom = false;
    },
  };
}

function pidField(pid: number | undefined): { pid?: number } {
  return pid === undefined ? {} : { pid };
}
