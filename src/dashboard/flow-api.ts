/**
 * The dashboard's flow-control endpoints (docs/groups.md), through the Queue API only:
 *
 *   GET  /api/queues/:q/groups?limit=&cursor=     groups by backlog (queue.groups), limit 1 to 500
 *   GET  /api/queues/:q/groups/:group             its limits and its first 50 waiting jobs
 *   GET  /api/queues/:q/limits                    the stored rate limit and the default group limits
 *   POST /api/queues/:q/group-limits?group=&concurrency=&rateMax=&rateDurationMs=&clear=1
 *        changes the defaults (no group) or one group's override: a parameter left out keeps its
 *        stored value, `none` lifts that limit; clear=1 (alone) removes the override (or the defaults)
 *   POST /api/queues/:q/rate-limit?max=&durationMs=   max=none removes it; max is required
 */
import { ValidationError } from '../errors.js';
import type { EffectiveGroupLimits, GroupLimits, RateLimit } from '../queue/flow-control.js';
import type { Queue } from '../queue/queue.js';
import { HttpError, json, method } from './http.js';

export const FLOW_ROUTES = ['groups', 'limits', 'group-limits', 'rate-limit'] as const;

/** A positive integer parameter, `none` (null), or absent (undefined); the library checks ranges. */
function limitParam(params: URLSearchParams, name: string): number | null | undefined {
  const raw = params.get(name);
  if (raw === null || raw === '') return undefined;
  if (raw === 'none') return null;
  if (!/^\d{1,16}$/.test(raw))
    throw new ValidationError(
      `${name} must be a positive integer or none, got ${JSON.stringify(raw.slice(0, 40))}`,
    );
  return Number(raw);
}

/**
 * The limits to store when an operator changes some fields: setGroupLimits replaces the whole record
 * (for the defaults an absent field means no limit), but an operator who sets a concurrency expects
 * the rate limit to stay. So the change is applied over what is stored: the defaults, or for a group
 * its override (its absent fields stay inherited). Read-then-write, not atomic: two operators changing
 * different fields of the same limits at the same instant may lose one change, which is acceptable for
 * a manual action (the CLI's group-limits uses it too).
 */
export function mergeLimits(current: EffectiveGroupLimits, change: GroupLimits, group: boolean): GroupLimits {
  const base: GroupLimits = group
    ? { ...current.override }
    : { concurrency: current.concurrency, rateLimit: current.rateLimit };
  return { ...base, ...change };
}

/** `rateMax`/`rateDurationMs` style pair: absent, `none` (null), or both positive integers. */
function rateParams(
  params: URLSearchParams,
  maxName: string,
  durationName: string,
): RateLimit | null | undefined {
  const max = limitParam(params, maxName);
  const durationMs = limitParam(params, durationName);
  if (max === null) return null;
  if (max === undefined) {
    if (durationMs !== undefined)
      throw new ValidationError(`${durationName} needs ${maxName} (a number of starts, or none)`);
    return undefined;
  }
  if (durationMs == null)
    throw new ValidationError(`${maxName} needs ${durationName}, the window in milliseconds`);
  return { max, durationMs };
}

export async function flowApi(
  req: Request,
  params: URLSearchParams,
  queue: Queue,
  name: string,
  sub: (typeof FLOW_ROUTES)[number],
  id: string | undefined,
): Promise<Response> {
  if (sub === 'groups' && id === undefined) {
    method(req, 'GET');
    const limit = limitParam(params, 'limit') ?? 50;
    const cursor = params.get('cursor');
    if (limit === null || limit > 500) throw new ValidationError('limit must be an integer from 1 to 500');
    return json({ queue: name, ...(await queue.groups({ limit, cursor: cursor || null })) });
  }
  if (sub === 'groups' && id !== undefined) {
    method(req, 'GET');
    const [limits, waiting] = await Promise.all([
      queue.getGroupLimits({ group: id }),
      queue.getJobs('waiting', { group: id, limit: 50 }),
    ]);
    return json({ queue: name, group: id, limits, waiting });
  }
  if (id !== undefined) throw new HttpError(404, 'ERR_NOT_FOUND', `no such endpoint: ${sub}/${id}`);
  if (sub === 'limits') {
    method(req, 'GET');
    const [rateLimit, groupLimits] = await Promise.all([queue.getRateLimit(), queue.getGroupLimits()]);
    return json({ queue: name, rateLimit, groupLimits });
  }
  method(req, 'POST');
  if (sub === 'rate-limit') {
    // max is required: an empty form must not remove the limit by accident.
    const rate = rateParams(params, 'max', 'durationMs');
    if (rate === undefined) throw new ValidationError('max is required: a number of job starts, or none');
    await queue.setRateLimit(rate);
    return json({ queue: name, rateLimit: await queue.getRateLimit() });
  }
  const group = params.get('group') || undefined;
  const scope = group === undefined ? undefined : { group };
  const change: GroupLimits = {};
  const concurrency = limitParam(params, 'concurrency');
  if (concurrency !== undefined) change.concurrency = concurrency;
  const rate = rateParams(params, 'rateMax', 'rateDurationMs');
  if (rate !== undefined) change.rateLimit = rate;
  const clear = params.get('clear') === '1';
  if (clear && Object.keys(change).length > 0)
    throw new ValidationError('clear=1 removes the limits: send it without concurrency or rateMax');
  const limits = clear ? null : mergeLimits(await queue.getGroupLimits(scope), change, scope !== undefined);
  await queue.setGroupLimits(limits, scope);
  return json({ queue: name, group: group ?? null, limits: await queue.getGroupLimits(scope) });
}
