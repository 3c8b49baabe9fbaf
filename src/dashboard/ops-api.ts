/**
 * The dashboard's operator endpoints (issue 16), through the Queue API only:
 *
 *   GET  /api/queues/:q/search?state=&q=&field=&value=&id=&limit=&scan=
 *        id: that job (exact id, any state); else queue.search over the `scan` newest jobs of `state`
 *   GET  /api/queues/:q/stats                    queue.stats(): oldest waiting job's age, per-minute rates
 *   POST /api/queues/:q/bulk/:action?id=a&id=b   retry|remove|promote|cancel, at most MAX_BULK_IDS ids,
 *        one result per id: { id, ok } or { id, ok: false, code, message }
 *   POST /api/queues/:q/metrics-retention?retentionMs=   queue.setMetricsRetention
 *   GET  /api/redis                              serverInfo(): version, memory, clients, persistence, warnings
 */
import { SuretyError, ValidationError } from '../errors.js';
import type { Queue } from '../queue/queue.js';
import { isJobState, JOB_STATES } from '../states.js';
import { json, method } from './http.js';

export const OPS_ROUTES = ['search', 'stats', 'bulk', 'metrics-retention'] as const;
/** Most ids one bulk call changes (they travel in the URL, which is at most 8 192 characters). */
export const MAX_BULK_IDS = 100;
const BULK_ACTIONS = ['retry', 'remove', 'promote', 'cancel'] as const;

function num(params: URLSearchParams, name: string): number | undefined {
  const raw = params.get(name);
  if (raw === null || raw === '') return undefined;
  if (!/^\d{1,16}$/.test(raw))
    throw new ValidationError(
      `${name} must be a non-negative integer, got ${JSON.stringify(raw.slice(0, 40))}`,
    );
  return Number(raw);
}

/** A search value: JSON when it parses (42, true, "x"), else the raw string. */
function valueParam(raw: string | null): unknown {
  if (raw === null) return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

export async function opsApi(
  req: Request,
  params: URLSearchParams,
  queue: Queue,
  name: string,
  route: (typeof OPS_ROUTES)[number],
  arg: string | undefined,
): Promise<Response> {
  if (route === 'stats') {
    method(req, 'GET');
    return json({ queue: name, ...(await queue.stats()) });
  }
  if (route === 'search') {
    method(req, 'GET');
    const id = params.get('id');
    if (id !== null && id !== '') {
      const job = await queue.getJob(id);
      return json({ queue: name, by: 'id', jobs: job ? [job] : [], scanned: job ? 1 : 0, more: false });
    }
    const state = params.get('state') ?? 'waiting';
    if (!isJobState(state))
      throw new ValidationError(
        `state must be one of ${JOB_STATES.join(', ')}, got ${JSON.stringify(state)}`,
      );
    const text = params.get('q') || undefined;
    const field = params.get('field') || undefined;
    const limit = num(params, 'limit');
    const scan = num(params, 'scan');
    const found = await queue.search({
      state,
      ...(text === undefined ? {} : { text }),
      ...(field === undefined ? {} : { field, value: valueParam(params.get('value')) }),
      ...(limit === undefined ? {} : { limit }),
      ...(scan === undefined ? {} : { scan }),
    });
    return json({ queue: name, by: 'data', state, scan: scan ?? 1_000, ...found });
  }
  if (route === 'metrics-retention') {
    method(req, 'POST');
    const retentionMs = num(params, 'retentionMs');
    if (retentionMs === undefined) throw new ValidationError('retentionMs is required');
    await queue.setMetricsRetention(retentionMs);
    return json({ ok: true, queue: name, retentionMs });
  }
  method(req, 'POST');
  const action = arg as (typeof BULK_ACTIONS)[number];
  if (!(BULK_ACTIONS as readonly string[]).includes(action))
    throw new ValidationError(
      `bulk action must be one of ${BULK_ACTIONS.join(', ')}, got ${JSON.stringify(arg)}`,
    );
  const ids = params.getAll('id');
  if (ids.length === 0 || ids.length > MAX_BULK_IDS)
    throw new ValidationError(`bulk ${action} takes 1 to ${MAX_BULK_IDS} id parameters, got ${ids.length}`);
  // Each id is its own atomic change: one refusal (a job that moved on) never stops the others.
  const results = await Promise.all(
    ids.map(async (id) => {
      try {
        await queue[action](id);
        return { id, ok: true };
      } catch (err) {
        if (!(err instanceof SuretyError)) throw err;
        return { id, ok: false, code: err.code, message: err.message };
      }
    }),
  );
  return json({ queue: name, action, results });
}
