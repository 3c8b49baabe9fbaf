/**
 * What kind a jobs wait for and the signals planned for each (chaos/signaller.ts sends them): drawn by
 * the producer when it adds the job, and kept with its add record for the verdict.
 */
import type { SignalWait } from './behaviour.js';
import type { Rng } from './rng.js';

/**
 * Why a send was made: planned early, late or as a duplicate; `ended`: one to every signal job after
 * the drain (each has ended: it must answer delivered: false).
 */
export type SendWhy = 'early' | 'late' | 'dup' | 'ended';

/** A send of the plan, `afterMs` after the add was answered. */
export interface PlannedSend {
  name: string;
  why: Exclude<SendWhy, 'ended'>;
  afterMs: number;
}

/** Waits and sends of one kind a job, drawn when it is added (`horizonMs`: time left in the chaos phase). */
export function planSignals(rng: Rng, horizonMs: number): { waits: SignalWait[]; sends: PlannedSend[] } {
  const span = Math.max(150, Math.min(4_000, horizonMs));
  const waits: SignalWait[] = [{ n: 'go' }];
  if (rng.chance(0.4)) waits.push({ n: rng.chance(0.5) ? 'go' : 'ok' });
  for (const w of waits) if (rng.chance(0.4)) w.t = rng.int(100, Math.min(3_000, span));
  const sends: PlannedSend[] = [];
  for (const w of waits) {
    const endless = waits.some((x) => x.n === w.n && x.t === undefined);
    const mode = rng.weighted({ early: endless ? 35 : 25, late: endless ? 65 : 45, never: endless ? 0 : 30 });
    if (mode === 'never') continue;
    const afterMs = mode === 'early' ? 0 : rng.int(50, span);
    sends.push({ name: w.n, why: mode, afterMs });
    if (rng.chance(0.2)) sends.push({ name: w.n, why: 'dup', afterMs: afterMs + rng.int(0, 300) });
  }
  return { waits, sends: sends.sort((x, y) => x.afterMs - y.afterMs) };
}

/** Names of `waits` that a wait without timeout waits for: each needs a send per wait of its name. */
export function endlessNames(waits: readonly SignalWait[]): Set<string> {
  return new Set(waits.filter((w) => w.t === undefined).map((w) => w.n));
}
