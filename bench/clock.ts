/**
 * Clocks shared by the harness and its worker children.
 *
 * `monoMs` reads CLOCK_MONOTONIC (process.hrtime), which on Linux is one clock for every process on the
 * machine: a timestamp taken in the parent and one taken in a worker child can be subtracted directly.
 * `wallMs` is epoch ms with sub-ms resolution, for comparing with due times given as epoch ms.
 */
export function monoMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

export function wallMs(): number {
  return performance.timeOrigin + performance.now();
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Sleeps until `monoMs()` reaches `target` (setTimeout granularity: about 1 ms). */
export async function sleepUntil(target: number): Promise<void> {
  const ms = target - monoMs();
  if (ms > 0) await sleep(ms);
}

/** Rejects with `what` after `ms`, unless `promise` settles first. Every wait of the harness goes through this. */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
