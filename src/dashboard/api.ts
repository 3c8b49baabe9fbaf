/**
 * The dashboard's JSON API, a thin layer over the Queue admin API:
 *
 *   GET  /api/queues                              name, counts, paused, workers of every queue
 *   GET  /api/queues/:q                           the same for one queue; 404 ERR_QUEUE_NOT_FOUND for a name
 *        nothing has used (a misspelt URL), naming the closest known queue
 *   GET  /api/queues/:q/jobs?state=&offset=&limit=&order=   offset <= 10 000, limit 1 to 500 (default 50);
 *        order=desc: newest first; active jobs carry the `worker` running them
 *   GET  /api/queues/:q/jobs/:id
 *   GET  /api/queues/:q/jobs/:id/explain           why it is not running (queue.explain)
 *   GET  /api/queues/:q/jobs/:id/flow?maxNodes=    the dependency graph around it, across queues
 *        (queue.flow; maxNodes 1 to 10 000, default 500)
 *   GET  /api/queues/:q/batches/:id                a batch's progress (queue.batch); 404 ERR_BATCH_NOT_FOUND
 *   GET  /api/queues/:q/workers | /schedules
 *   POST /api/queues/:q/jobs/:id/retry|remove|promote|cancel
 *   GET  /api/queues/:q/metrics?windowMs=          completed/failed/dead per minute (queue.metrics)
 *   POST /api/queues/:q/pause|resume|retry-dead    retry-dead retries 10 000 at most per call
 *   POST /api/queues/:q/clean?state=completed|dead&olderThanMs=   removes old finished jobs (10 000 max)
 *   POST /api/queues/:q/drain?blocked=1          deletes every waiting and delayed (and blocked) job (queue.drain)
 *   groups, limits, group-limits, rate-limit: see flow-api.ts
 *   search, stats, bulk, metrics-retention, /api/redis: see ops-api.ts
 *
 * Errors are `{ error: { code, message } }`: 404 ERR_JOB_NOT_FOUND, 409 ERR_INVALID_STATE, 400 for
 * validation (ERR_INVALID_OPTION...), 405 for a known path with the wrong method.
 */
import { MAX_FLOW_NODES } from '../defaults.js';
import { ValidationError } from '../errors.js';
import { closestName } from '../queue/discover.js';
import type { Queue } from '../queue/queue.js';
import { isJobState, JOB_STATES } from '../states.js';
import type { JobState } from '../types.js';
import { FLOW_ROUTES, flowApi } from './flow-api.js';
import { HttpError, json, method } from './http.js';
import { OPS_ROUTES, opsApi } from './ops-api.js';
import type { QueueRegistry } from './queues.js';

const JOB_ACTIONS = ['retry', 'remove', 'promote', 'cancel'] as const;
const QUEUE_ACTIONS = ['pause', 'resume', 'retry-dead'] as const;

function notFound(path: string): HttpError {
  return new HttpError(404, 'ERR_NOT_FOUND', `no such endpoint: ${path}`);
}

/** Deepest offset the job list serves: a partitioned queue's page reads offset + limit ids per partition. */
export const MAX_OFFSET = 10_000;
/** Most jobs on one page. */
export const MAX_LIMIT = 500;

/** An integer query parameter within [min, max], or undefined when absent: else a ValidationError (400). */
function intParam(params: URLSearchParams, name: string, min: number, max: number): number | undefined {
  const raw = params.get(name);
  if (raw === null || raw === '') return undefined;
  const n = /^\d{1,16}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(n >= min && n <= max)) {
    const shown = raw.length > 40 ? `${raw.slice(0, 40)}...` : raw;
    throw new ValidationError(
      `${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(shown)}`,
    );
  }
  return n;
}

function stateParam(params: URLSearchParams): JobState {
  const raw = params.get('state') ?? 'waiting';
  if (!isJobState(raw))
    throw new ValidationError(`state must be one of ${JOB_STATES.join(', ')}, got ${JSON.stringify(raw)}`);
  return raw;
}

function segments(path: string): string[] {
  try {
    return path.split('/').filter(Boolean).map(decodeURIComponent);
  } catch {
    throw new ValidationError(`malformed path: ${path}`);
  }
}

/** Answers `path` (already stripped of the base path, starting with /api/). POSTs are authorised by the caller. */
export async function handleApi(req: Request, path: string, queues: QueueRegistry): Promise<Response> {
  const [api, root, name, sub, id, action, ...rest] = segments(path);
  if (api === 'api' && root === 'redis' && name === undefined) {
    method(req, 'GET');
    return json(await queues.redisInfo());
  }
  if (api !== 'api' || root !== 'queues' || rest.length > 0) throw notFound(path);
  if (name === undefined) {
    method(req, 'GET');
    return json({ queues: await queues.overviews() });
  }
  return queues.use(name, (queue) => queueApi(req, path, queues, queue, name, [sub, id, action]));
}

/** 404 for a queue name nothing has used, with the closest known name. */
async function unknownQueue(queues: QueueRegistry, name: string): Promise<HttpError> {
  const near = closestName(name, await queues.names());
  return new HttpError(
    404,
    'ERR_QUEUE_NOT_FOUND',
    `no queue named ${JSON.stringify(name)}${near ? `; did you mean ${JSON.stringify(near)}?` : ''}`,
  );
}

/** The endpoints of one queue, `/api/queues/:q/...`. */
async function queueApi(
  req: Request,
  path: string,
  queues: QueueRegistry,
  queue: Queue,
  name: string,
  [sub, id, action]: (string | undefined)[],
): Promise<Response> {
  if (sub === undefined) {
    method(req, 'GET');
    // Checked before the overview, which writes (metrics retention): a misspelt URL must not become
    // an empty live queue.
    if (!(await queue.exists())) throw await unknownQueue(queues, name);
    return json(await queues.overview(name));
  }
  const params = new URL(req.url).searchParams;
  if (sub === 'jobs' && id === undefined) {
    method(req, 'GET');
    const state = stateParam(params);
    // Bounded: a page costs O(limit) in Redis for one partition, O(offset + limit) per partition else.
    const offset = intParam(params, 'offset', 0, MAX_OFFSET) ?? 0;
    const limit = intParam(params, 'limit', 1, MAX_LIMIT) ?? 50;
    const order = params.get('order') ?? 'asc';
    if (order !== 'asc' && order !== 'desc')
      throw new ValidationError(`order must be asc or desc, got ${JSON.stringify(order.slice(0, 40))}`);
    const jobs = await queue.getJobs(state, { offset, limit, order });
    const counts = await queue.counts();
    const page = { queue: name, state, order, offset, limit, total: counts[state], jobs };
    if (state !== 'active') return json(page);
    // Which worker runs each active job: from the workers' heartbeats (queue.workers()).
    const by = new Map<string, { id: string; host: string; pid: number }>();
    for (const w of await queue.workers())
      for (const id of w.activeJobIds) by.set(id, { id: w.id, host: w.host, pid: w.pid });
    return json({ ...page, jobs: jobs.map((j) => ({ ...j, worker: by.get(j.id) ?? null })) });
  }
  if (sub === 'jobs' && id !== undefined && action === undefined) {
    method(req, 'GET');
    const job = await queue.getJob(id);
    if (!job) throw new HttpError(404, 'ERR_JOB_NOT_FOUND', `job ${JSON.stringify(id)} does not exist`);
    return json(job);
  }
  if (sub === 'jobs' && id !== undefined && action === 'explain') {
    // A read (allowed in read-only mode): queue.explain throws JobNotFoundError for an unknown id (404).
    method(req, 'GET');
    return json({ queue: name, ...(await queue.explain(id)) });
  }
  if (sub === 'jobs' && id !== undefined && action === 'flow') {
    // A read too: queue.flow throws JobNotFoundError for an unknown id (404).
    method(req, 'GET');
    const maxNodes = intParam(params, 'maxNodes', 1, MAX_FLOW_NODES);
    return json(await queue.flow(id, maxNodes === undefined ? {} : { maxNodes }));
  }
  if (sub === 'jobs' && id !== undefined && (JOB_ACTIONS as readonly string[]).includes(action!)) {
    method(req, 'POST');
    const op = action as (typeof JOB_ACTIONS)[number];
    await queue[op](id);
    return json({ ok: true, queue: name, id, action: op });
  }
  if (sub === 'batches' && id !== undefined && action === undefined) {
    method(req, 'GET');
    const batch = await queue.batch(id);
    if (!batch) throw new HttpError(404, 'ERR_BATCH_NOT_FOUND', `batch ${JSON.stringify(id)} does not exist`);
    return json({ queue: name, ...batch });
  }
  if ((OPS_ROUTES as readonly string[]).includes(sub))
    return opsApi(req, params, queue, name, sub as (typeof OPS_ROUTES)[number], id);
  if ((FLOW_ROUTES as readonly string[]).includes(sub)) {
    return flowApi(req, params, queue, name, sub as (typeof FLOW_ROUTES)[number], id);
  }
  if (id !== undefined) throw notFound(path);
  if (sub === 'workers') {
    method(req, 'GET');
    return json({ queue: name, workers: await queue.workers() });
  }
  if (sub === 'schedules') {
    method(req, 'GET');
    return json({ queue: name, schedules: await queue.schedules() });
  }
  if (sub === 'metrics') {
    method(req, 'GET');
    // queue.metrics validates the window (60 000 to 3 600 000 ms): a bad one answers 400.
    const windowMs = intParam(params, 'windowMs', 0, Number.MAX_SAFE_INTEGER);
    const bucketMs = intParam(params, 'bucketMs', 0, Number.MAX_SAFE_INTEGER);
    return json({
      queue: name,
      ...(await queue.metrics({
        ...(windowMs === undefined ? {} : { windowMs }),
        ...(bucketMs === undefined ? {} : { bucketMs }),
      })),
    });
  }
  if (sub === 'clean') {
    method(req, 'POST');
    const state = params.get('state');
    if (state !== 'completed' && state !== 'dead')
      throw new ValidationError(`state must be completed or dead, got ${JSON.stringify(state)}`);
    const olderThanMs = intParam(params, 'olderThanMs', 0, Number.MAX_SAFE_INTEGER) ?? 0;
    return json({ queue: name, state, olderThanMs, ...(await queues.clean(name, state, olderThanMs)) });
  }
  if (sub === 'drain') {
    method(req, 'POST');
    const blocked = params.get('blocked') === '1';
    return json({ queue: name, blocked, removed: await queue.drain({ blocked }) });
  }
  if ((QUEUE_ACTIONS as readonly string[]).includes(sub)) {
    method(req, 'POST');
    if (sub === 'retry-dead') return json({ queue: name, ...(await queues.retryDead(name)) });
    await (sub === 'pause' ? queue.pause() : queue.resume());
    return json({ ok: true, queue: name, paused: sub === 'pause' });
  }
  throw notFound(path);
}

/** True when `path` names an action that changes something (refused in read-only mode). */
export function isMutation(req: Request): boolean {
  return req.method !== 'GET' && req.method !== 'HEAD';
}
