/**
 * Seeded randomness, so that a run is reproducible from its seed as far as timing allows.
 *
 *  - `Rng` is a stream (mulberry32): the producer draws job kinds from one, the fault planner another.
 *  - `hash01` is stateless: a worker process decides an attempt's duration and planned outcome from
 *    (seed, job sequence number, attempt), and the verdict recomputes the same decision.
 */

export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  }

  /** Integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }

  /** One key of `weights`, with probability proportional to its weight. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K {
    const entries = Object.entries(weights) as [K, number][];
    let total = 0;
    for (const [, w] of entries) total += w;
    let r = this.next() * total;
    for (const [k, w] of entries) {
      r -= w;
      if (r < 0) return k;
    }
    return entries[entries.length - 1]![0];
  }

  /** An independent stream derived from this seed (e.g. faults vs. jobs). */
  fork(salt: number): Rng {
    return new Rng(hash32(this.state, salt));
  }
}

/** A 32-bit hash of a few integers (murmur3 finaliser over a running mix). */
export function hash32(...parts: number[]): number {
  let h = 0x9e3779b9;
  for (const p of parts) {
    h = Math.imul(h ^ (p >>> 0), 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
  }
  return h >>> 0;
}

/** A deterministic number in [0, 1) for these integers. */
export function hash01(...parts: number[]): number {
  return hash32(...parts) / 4_294_967_296;
}

/** A seed from the clock, for runs started without --seed. */
export function freshSeed(): number {
  return hash32(Date.now(), process.pid) % 1_000_000;
}
