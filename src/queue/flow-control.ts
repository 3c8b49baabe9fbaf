/**
 * Flow control stored in Redis, which every worker obeys at once: the queue-wide rate limit
 * (setRateLimit) and the limits of groups (setGroupLimits, getGroupLimits), plus the list of live
 * groups (groups). Writes go through scripts (set-rate-limit.lua, set-group-limits.lua); the claim
 * enforces them (claim.lua, includes/group_claim.lua). See docs/groups.md.
 */

import { ValidationError } from '../errors.js';
import { settling } from '../redis/in-flight.js';
import { callScript, type RedisClient, scripts } from '../scripts/specs.js';
import type { QueueKeys } from '../store/keys.js';
import { MAX_TIMER_MS } from '../timers.js';
import { checkCallOptions, checkInt, checkKnownKeys, checkLabel, checkObject, show } from '../validate.js';
import type { QueueContext } from './context.js';

/** At most `max` job starts per `durationMs`. */
export interface RateLimit {
  max: number;
  durationMs: number;
}

/** Limits of a group. `null` (or, for the default, absent): no limit. */
export interface GroupLimits {
  /** Jobs of the group active at once, across all workers. 1 = strict FIFO within the group. */
  concurrency?: number | null;
  /** Job starts of the group per window, across all workers. */
  rateLimit?: RateLimit | null;
}

/** getGroupLimits' answer: the limits in force, and for one group the override it has, if any. */
export interface EffectiveGroupLimits {
  concurrency: number | null;
  rateLimit: RateLimit | null;
  /** For one group: the fields it overrides (absent: inherited from the default), or null. */
  override?: GroupLimits | null;
}

export interface GroupInfo {
  group: string;
  /** Jobs of the group waiting to be claimed (not delayed or blocked ones). */
  waiting: number;
  /** Jobs of the group held by workers (running or prefetched). */
  active: number;
  limits: EffectiveGroupLimits;
  /** The group may not start a job before this time (rate window full, or a retry holding its place). */
  parkedUntil?: number;
  /** The partition that holds the group (partitioned queues). */
  partition?: number;
}

export interface GroupPage {
  groups: GroupInfo[];
  /** Pass back to get the next page; null at the end. */
  cursor: string | null;
}

export const MAX_GROUP_CONCURRENCY = 1_000_000;
export const MAX_RATE = 1_000_000_000;

function checkRate(name: string, value: unknown): RateLimit {
  const r = checkObject(name, value);
  checkKnownKeys(name, r, ['max', 'durationMs']);
  return {
    max: checkInt(`${name}.max`, r.max, 1, MAX_RATE),
    durationMs: checkInt(`${name}.durationMs`, r.durationMs, 1, MAX_TIMER_MS),
  };
}

/**
 * Encodes limits as stored (`concurrency|rateMax|rateWindowMs`). For an override an absent field
 * inherits ('') and null means none ('-'); for the default both mean none ('').
 */
function encodeLimits(limits: unknown, override: boolean): string {
  const l = checkObject('group limits', limits);
  checkKnownKeys('group limits', l, ['concurrency', 'rateLimit']);
  const none = override ? '-' : '';
  const c =
    l.concurrency === undefined
      ? ''
      : l.concurrency === null
        ? none
        : String(checkInt('concurrency', l.concurrency, 1, MAX_GROUP_CONCURRENCY));
  let rate = '|';
  if (l.rateLimit === null) rate = `${none}|${none}`;
  else if (l.rateLimit !== undefined) {
    const r = checkRate('rateLimit', l.rateLimit);
    rate = `${r.max}|${r.durationMs}`;
  }
  return `${c}|${rate}`;
}

function decodeLimits(s: string | null): { c: string; m: string; w: string } {
  const [c = '', m = '', w = ''] = (s ?? '||').split('|');
  return { c, m, w };
}

function groupOption(opts: unknown, name: string): string | undefined {
  if (opts === undefined) return undefined;
  checkCallOptions(name, opts, ['group']);
  const o = opts as { group?: unknown };
  return o.group === undefined ? undefined : checkLabel('group', o.group);
}

/** The partitions a group option concerns: the group's own, or all of them for the default. */
async function partsFor(ctx: QueueContext, group: string | undefined): Promise<QueueKeys[]> {
  const layout = await ctx.open();
  if (group === undefined || !layout.partitioned)
    return group === undefined ? [...layout.parts] : [layout.parts[0]!];
  return [layout.parts[layout.route('', group, [])]!];
}

export async function setGroupLimits(
  ctx: QueueContext,
  limits: GroupLimits | null,
  opts?: { group?: string },
): Promise<void> {
  const group = groupOption(opts, 'setGroupLimits options');
  const encoded = limits === null ? '' : encodeLimits(limits, group !== undefined);
  for (const k of await partsFor(ctx, group)) await writeGroupLimits(ctx.client, k, group ?? '', encoded);
}

/**
 * set-group-limits.lua on one partition: the first call writes, and with the default limits each call
 * re-examines the next 1000 groups until all were (a million groups are a thousand short calls).
 */
export async function writeGroupLimits(
  client: RedisClient,
  k: QueueKeys,
  group: string,
  limits: string,
): Promise<void> {
  let from: string | number = '';
  do {
    from = await callScript(client, scripts.setGroupLimits, k, {
      group,
      limits,
      wakeFrom: from,
      wakeChannel: k.wakeChannel,
      now: '',
    });
  } while (from !== 0);
}

function effective(defaults: string | null, own: string | null): EffectiveGroupLimits {
  const d = decodeLimits(defaults);
  const o = own === null ? null : decodeLimits(own);
  const pick = (ov: string | undefined, dv: string) => (ov === undefined || ov === '' ? dv : ov);
  const c = pick(o?.c, d.c);
  const m = o && o.m !== '' ? o.m : d.m;
  const w = o && o.m !== '' ? o.w : d.w;
  const out: EffectiveGroupLimits = {
    concurrency: c === '' || c === '-' ? null : Number(c),
    rateLimit: m === '' || m === '-' ? null : { max: Number(m), durationMs: Number(w) },
  };
  if (o !== null) {
    const override: GroupLimits = {};
    if (o.c !== '') override.concurrency = o.c === '-' ? null : Number(o.c);
    if (o.m !== '') override.rateLimit = o.m === '-' ? null : { max: Number(o.m), durationMs: Number(o.w) };
    out.override = override;
  }
  return out;
}

export async function getGroupLimits(
  ctx: QueueContext,
  opts?: { group?: string },
): Promise<EffectiveGroupLimits> {
  const group = groupOption(opts, 'getGroupLimits options');
  const [k] = await partsFor(ctx, group);
  const client = settling(ctx.client);
  const defaults = await client.hget(k!.meta, 'glimits');
  if (group === undefined) return effective(defaults, null);
  const out = effective(defaults, await client.hget(k!.groupLimits, group));
  if (out.override === undefined) out.override = null;
  return out;
}

/** The limits in force for `group` in partition `k`. */
export async function effectiveLimits(
  client: RedisClient,
  k: QueueKeys,
  group: string,
): Promise<EffectiveGroupLimits> {
  const [defaults, own] = await Promise.all([
    client.hget(k.meta, 'glimits'),
    client.hget(k.groupLimits, group),
  ]);
  return effective(defaults, own);
}

/**
 * Live groups (with waiting or active jobs), most waiting jobs first within a partition, a page at a
 * time. The cursor is `partition:rank`; groups whose backlog changes between pages may be seen twice
 * or skipped, as with any ranked listing that moves.
 */
export async function listGroups(
  ctx: QueueContext,
  opts?: { limit?: number; cursor?: string | null },
): Promise<GroupPage> {
  checkCallOptions('groups options', opts, ['limit', 'cursor']);
  const o = (opts ?? {}) as { limit?: unknown; cursor?: unknown };
  const limit = o.limit === undefined ? 100 : checkInt('limit', o.limit, 1, 10_000);
  let part = 0;
  let rank = 0;
  if (o.cursor !== undefined && o.cursor !== null) {
    const m = typeof o.cursor === 'string' ? /^(\d+):(\d+)$/.exec(o.cursor) : null;
    if (!m)
      throw new ValidationError(
        `cursor must be a cursor from an earlier groups() page, got ${show(o.cursor)}`,
      );
    part = Number(m[1]);
    rank = Number(m[2]);
  }
  const layout = await ctx.open();
  const client = settling(ctx.client);
  const groups: GroupInfo[] = [];
  while (part < layout.parts.length && groups.length < limit) {
    const k = layout.parts[part]!;
    const want = limit - groups.length;
    const page = await client.zrevrange(k.groupBacklog, rank, rank + want - 1, 'WITHSCORES');
    groups.push(...(await describeGroups(client, k, page, layout.partitioned ? part : undefined)));
    if (page.length / 2 < want) {
      part += 1;
      rank = 0;
    } else rank += want;
  }
  const more = part < layout.parts.length;
  return { groups, cursor: more ? `${part}:${rank}` : null };
}

async function describeGroups(
  client: RedisClient,
  k: QueueKeys,
  flat: string[],
  partition: number | undefined,
): Promise<GroupInfo[]> {
  if (flat.length === 0) return [];
  const names = flat.filter((_, i) => i % 2 === 0);
  const pipe = client.pipeline();
  pipe.hget(k.meta, 'glimits');
  pipe.hmget(k.groupActive, ...names);
  pipe.hmget(k.groupLimits, ...names);
  for (const g of names) pipe.zscore(k.groupParked, g);
  const replies = (await pipe.exec()) ?? [];
  const value = (i: number) => {
    const [err, v] = replies[i] ?? [new Error('no reply'), null];
    if (err) throw err;
    return v;
  };
  const defaults = value(0) as string | null;
  const active = value(1) as (string | null)[];
  const own = value(2) as (string | null)[];
  return names.map((group, i) => {
    const info: GroupInfo = {
      group,
      waiting: Math.max(0, Number(flat[i * 2 + 1])),
      active: Number(active[i] ?? 0),
      limits: effective(defaults, own[i] ?? null),
    };
    if (info.limits.override === undefined) info.limits.override = null;
    const parked = value(3 + i) as string | null;
    if (parked !== null) info.parkedUntil = Number(parked);
    if (partition !== undefined) info.partition = partition;
    return info;
  });
}

/** The stored queue-wide rate limit: per partition, max / partitions (rounded up). */
export async function setRateLimit(ctx: QueueContext, limit: RateLimit | null): Promise<void> {
  const checked = limit === null ? null : checkRate('rateLimit', limit);
  const layout = await ctx.open();
  const rate = checked === null ? '' : `${Math.ceil(checked.max / layout.count)}|${checked.durationMs}`;
  await Promise.all(
    layout.parts.map((k) =>
      callScript(ctx.client, scripts.setRateLimit, k, { rate, wakeChannel: k.wakeChannel }),
    ),
  );
}

export async function getRateLimit(ctx: QueueContext): Promise<RateLimit | null> {
  const layout = await ctx.open();
  const v = await settling(ctx.client).hget(layout.parts[0]!.meta, 'rate');
  if (v === null) return null;
  const [max = '0', durationMs = '0'] = v.split('|');
  return { max: Number(max) * layout.count, durationMs: Number(durationMs) };
}
