/**
 * The fault plan: which faults a chaos run injects, and when, planned up front from the seed (faults.ts
 * plays it against the live run).
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
 */
import type { Rng } from './rng.js';
import type { Direction } from './tcp-proxy.js';

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
export const PER_PROCESS: readonly FaultKind[] = ['kill', 'stop', 'clientKillOne'];

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
  /** netReset, netBlackhole: every worker was cut off Redis while it held. */
  everyWorker?: true;
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

/** The share of the phase, from its start, in which every kind's mandatory fault is placed. */
export const MANDATORY_SPAN = 0.75;

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
  // Mandatory: each kind once (redisKill planned separately), at distinct random positions in the first
  // MANDATORY_SPAN of the phase. Faults play one after another, so one that overruns (a Redis restart
  // that took 10 s on a loaded machine) delays the rest; a kind planned only near the end could then
  // fall past the phase's end and fail the coverage verdict without any fault of Surety's.
  // (With gaps of at most 1.6 x meanGapMs, the earliest positions always fit: see test/unit/fault-plan.test.ts.)
  const mandatory = o.kinds.filter((k) => k !== 'redisKill');
  const positions = times.map((_, i) => i);
  const early = positions.filter((i) => times[i]! <= first + (last - first) * MANDATORY_SPAN);
  const free = early.length >= mandatory.length ? early : positions.slice(0, mandatory.length);
  for (const kind of mandatory) {
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
