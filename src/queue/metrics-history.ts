/**
 * queue.metrics() and its retention: completed jobs, failed attempts and dead jobs per minute, kept in
 * each partition's stats hash by the scripts (includes/count_stats.lua), for `keep` minutes (default
 * 60, set by queue.setMetricsRetention, at most 7 days: at most 3 fields a minute, so a partition's
 * hash holds at most ~30 000 small fields). Reads go in chunks of HMGET_CHUNK fields.
 */

import { ValidationError } from '../errors.js';
import { settling } from '../redis/in-flight.js';
import { serverNow } from '../redis/server-clock.js';
import type { QueueMetrics } from '../types.js';
import { checkCallOptions, checkInt } from '../validate.js';
import type { QueueContext } from './context.js';

const MINUTE = 60_000;
/** Default retention of the per-minute counters: one hour. */
export const DEFAULT_METRICS_RETENTION_MS = 3_600_000;
/** Longest retention (and window): 7 days of minutes. */
export const MAX_METRICS_RETENTION_MS = 7 * 24 * 3_600_000;
/** Most buckets one metrics() call answers. */
export const MAX_METRICS_BUCKETS = 1_440;
/** Fields per HMGET. */
const HMGET_CHUNK = 3_000;

/**
 * Completed, failed and dead per bucket (default one minute) over the last `windowMs`, on Redis's
 * clock, oldest first, the last bucket ending with the current minute.
 */
export async function readMetrics(
  ctx: QueueContext,
  opts: { windowMs?: number; bucketMs?: number },
): Promise<QueueMetrics> {
  checkCallOptions('metrics options', opts, ['windowMs', 'bucketMs']);
  const windowMs = checkInt('windowMs', opts.windowMs ?? 3_600_000, MINUTE, MAX_METRICS_RETENTION_MS);
  const bucketMs = checkInt('bucketMs', opts.bucketMs ?? MINUTE, MINUTE, MAX_METRICS_RETENTION_MS);
  if (bucketMs % MINUTE !== 0)
    throw new ValidationError(
      `bucketMs must be a whole number of minutes (a multiple of 60000), got ${bucketMs}`,
    );
  const n = Math.ceil(windowMs / bucketMs);
  if (n > MAX_METRICS_BUCKETS)
    throw new ValidationError(
      `windowMs / bucketMs must be at most ${MAX_METRICS_BUCKETS} buckets, got ${windowMs} / ${bucketMs} = ${n}: use a wider bucketMs`,
    );
  const layout = await ctx.open();
  const client = settling(ctx.client);
  const perBucket = bucketMs / MINUTE;
  const nowMinute = Math.floor((await serverNow(client)) / MINUTE);
  const first = nowMinute - n * perBucket + 1;
  const fields: string[] = [];
  for (let m = first; m <= nowMinute; m++) fields.push(`${m}:c`, `${m}:f`, `${m}:x`);
  const values = new Array<number>(fields.length).fill(0);
  let keep = DEFAULT_METRICS_RETENTION_MS / MINUTE;
  for (const [p, k] of layout.parts.entries()) {
    for (let i = 0; i < fields.length; i += HMGET_CHUNK) {
      const got = await client.hmget(k.stats, ...fields.slice(i, i + HMGET_CHUNK));
      got.forEach((v, j) => {
        values[i + j]! += Number(v ?? 0);
      });
    }
    if (p === 0) keep = Number((await client.hget(k.stats, 'keep')) ?? keep);
  }
  const out: QueueMetrics = {
    bucketMs,
    buckets: [],
    completed: 0,
    failed: 0,
    dead: 0,
    retentionMs: keep * MINUTE,
  };
  for (let b = 0; b < n; b++) {
    const bucket = { at: (first + b * perBucket) * MINUTE, completed: 0, failed: 0, dead: 0 };
    for (let m = b * perBucket; m < (b + 1) * perBucket; m++) {
      bucket.completed += values[m * 3]!;
      bucket.failed += values[m * 3 + 1]!;
      bucket.dead += values[m * 3 + 2]!;
    }
    out.buckets.push(bucket);
    out.completed += bucket.completed;
    out.failed += bucket.failed;
    out.dead += bucket.dead;
  }
  return out;
}

/**
 * Keeps the per-minute counters for `retentionMs` (whole minutes, 1 minute to 7 days) in every
 * partition, obeyed by every process at its next write. Lowering it deletes the older counters now
 * (HSCAN, in pages), so memory follows at once.
 */
export async function setMetricsRetention(ctx: QueueContext, retentionMs: number): Promise<void> {
  checkInt('retentionMs', retentionMs, MINUTE, MAX_METRICS_RETENTION_MS);
  if (retentionMs % MINUTE !== 0)
    throw new ValidationError(
      `retentionMs must be a whole number of minutes (a multiple of 60000), got ${retentionMs}`,
    );
  const keep = retentionMs / MINUTE;
  const layout = await ctx.open();
  const client = settling(ctx.client);
  const oldest = Math.floor((await serverNow(client)) / MINUTE) - keep;
  for (const k of layout.parts) {
    await client.hset(k.stats, 'keep', keep);
    let cursor = '0';
    do {
      const [next, flat] = await client.hscan(k.stats, cursor, 'COUNT', 1_000);
      cursor = next;
      const stale: string[] = [];
      for (let i = 0; i < flat.length; i += 2) {
        const minute = Number.parseInt(flat[i] as string, 10);
        if ((flat[i] as string).includes(':') && minute < oldest) stale.push(flat[i] as string);
      }
      if (stale.length > 0) await client.hdel(k.stats, ...stale);
    } while (cursor !== '0');
  }
}
