/**
 * queue.explain(id): why a job is where it is, and what it waits for, in words and data, so an
 * operator can answer "why isn't this job running?" without reading keys. Read-only: a snapshot of the
 * job's partition at one moment (reads are not atomic with each other, so under load a reason can be
 * a few milliseconds stale).
 */
import { JobNotFoundError } from '../errors.js';
import { settling } from '../redis/in-flight.js';
import { serverNow } from '../redis/server-clock.js';
import type { RedisClient } from '../scripts/specs.js';
import { groupKeys, type QueueKeys } from '../store/keys.js';
import type { JobInfo, JobState, WorkerDescription } from '../types.js';
import { effectiveLimits } from './flow-control.js';
import type { Layout } from './partitions.js';
import { listWorkers, locate, readJob } from './reads.js';

/** One reason; `code` is stable, `message` is for people, the other fields are data. */
export interface ExplainReason {
  code:
    | 'PAUSED'
    | 'DELAYED'
    | 'WAITING_FOR_SIGNAL'
    | 'WAITING_FOR_CHILDREN'
    | 'BLOCKED'
    | 'QUEUED'
    | 'CONCURRENCY_LIMIT'
    | 'RATE_LIMITED'
    | 'GROUP_CONCURRENCY_LIMIT'
    | 'GROUP_RATE_LIMITED'
    | 'GROUP_HELD'
    | 'NO_WORKERS'
    | 'RUNNING'
    | 'PREFETCHED'
    | 'COMPLETED'
    | 'DEAD'
    | 'EXPIRES'
    | 'EXPIRED';
  message: string;
  /** Epoch ms (Redis clock) at which this reason ends, when it is known. */
  until?: number;
  /** QUEUED: jobs a worker claims before this one. */
  ahead?: number;
  /** BLOCKED: the parents that have not completed yet. */
  parents?: string[];
  /** WAITING_FOR_CHILDREN: the children (job.addChildren) still open, the first 100. */
  children?: { queue: string; id: string }[];
  /** WAITING_FOR_SIGNAL: the signal's name (`until`: its wait's deadline, absent when it has none). */
  signal?: string;
  /** GROUP_*: the job's group. */
  group?: string;
  /** CONCURRENCY_LIMIT, GROUP_CONCURRENCY_LIMIT: the limit and the jobs active now (RATE_LIMITED,
   * GROUP_RATE_LIMITED: the starts allowed per window and those made in this one). */
  limit?: number;
  active?: number;
  /** RUNNING, PREFETCHED: the worker whose heartbeat lists the job, if one does. */
  worker?: string;
  attempt?: number;
}

export interface Explanation {
  id: string;
  state: JobState;
  reasons: ExplainReason[];
}

/** Past this many list entries, QUEUED's `ahead` is a lower bound (LPOS scans the waiting list). */
const LPOS_SCAN = 100_000;

export async function explainJob(rawClient: RedisClient, layout: Layout, id: string): Promise<Explanation> {
  const client = settling(rawClient);
  const job = await readJob(rawClient, layout, id);
  if (!job) throw new JobNotFoundError(id);
  const found = layout.partitioned ? await locate(rawClient, layout, id) : 0;
  const k = layout.parts[Math.max(found, 0)]!;
  const reasons: ExplainReason[] = [];
  const at = (ms: number) => new Date(ms).toISOString();
  switch (job.state) {
    case 'completed':
      reasons.push({
        code: 'COMPLETED',
        message: `completed at ${at(job.finishedAt ?? 0)}`,
        until: job.finishedAt,
      });
      break;
    case 'dead': {
      const last = job.errors[job.errors.length - 1];
      if (last?.code === 'ERR_EXPIRED' && job.expireAt !== undefined) {
        reasons.push({
          code: 'EXPIRED',
          message: `dead since ${at(job.finishedAt ?? 0)}: not started by its expiry ${at(job.expireAt)}, so it never ran`,
          until: job.expireAt,
        });
        break;
      }
      reasons.push({
        code: 'DEAD',
        message: `dead since ${at(job.finishedAt ?? 0)}${last ? `: ${last.message}` : ''}; retry(id) runs it again`,
        attempt: job.attempts,
      });
      break;
    }
    case 'active':
      reasons.push(await running(rawClient, k, layout, job));
      break;
    case 'blocked':
      reasons.push(await blocked(client, k, job));
      break;
    case 'delayed':
      if (job.waitingForSignal) {
        const { name, deadline } = job.waitingForSignal;
        reasons.push({
          code: 'WAITING_FOR_SIGNAL',
          message: `parked until signal ${JSON.stringify(name)} comes (queue.signal)${deadline === undefined ? '' : `, or its wait times out at ${at(deadline)}`}`,
          signal: name,
          ...(deadline === undefined ? {} : { until: deadline }),
        });
        break;
      }
      reasons.push({
        code: 'DELAYED',
        message: `${job.attempts > 0 ? `retry after attempt ${job.attempts}` : 'delayed'}: due at ${at(job.runAt)}`,
        until: job.runAt,
      });
      reasons.push(...(await queueWide(rawClient, k, layout)));
      break;
    case 'waiting':
      if (job.group === undefined) reasons.push(await queued(client, k, job));
      else reasons.push(...(await groupReasons(client, k, job, job.group)));
      reasons.push(...(await queueWide(rawClient, k, layout)));
      break;
  }
  // Not started yet (waiting, delayed, blocked, prefetched): it must start before its expiry.
  if (
    job.expireAt !== undefined &&
    job.startedAt === undefined &&
    job.attempts === 0 &&
    job.state !== 'dead'
  ) {
    reasons.push({
      code: 'EXPIRES',
      message: `expires at ${at(job.expireAt)}: it ends dead (ExpiredError) unless a worker starts it before`,
      until: job.expireAt,
    });
  }
  return { id, state: job.state, reasons };
}

/** What holds every job of the partition back: pause, the global concurrency limit, no workers. */
async function queueWide(raw: RedisClient, k: QueueKeys, layout: Layout): Promise<ExplainReason[]> {
  const client = settling(raw);
  const out: ExplainReason[] = [];
  const [[paused, limitText, rate, pausedUntil], activeCount, workers, used, ttl, now] = await Promise.all([
    client.hmget(k.meta, 'paused', 'concurrency', 'rate', 'limited'),
    client.zcard(k.active),
    listWorkers(raw, layout),
    client.get(k.queueLimiter),
    client.pttl(k.queueLimiter),
    serverNow(raw),
  ]);
  if (paused) out.push({ code: 'PAUSED', message: 'the queue is paused: no worker claims until resume()' });
  // `active` holds a sentinel member besides the jobs (see includes/active_sentinel.lua).
  const active = Math.max(activeCount - 1, 0);
  const limit = limitText === null || limitText === undefined ? null : Number(limitText);
  if (limit !== null && active >= limit) {
    out.push({
      code: 'CONCURRENCY_LIMIT',
      message: `the queue's global concurrency limit (${limit}) is reached: ${active} job(s) active`,
      limit,
      active,
    });
  }
  // The stored rate limit (setRateLimit). A worker's own `limiter` option is not stored, so a window
  // it filled is not reported.
  if (rate) {
    const [max = 0, windowMs = 0] = rate.split('|').map(Number);
    if (Number(used ?? 0) >= max && ttl > 0) {
      out.push({
        code: 'RATE_LIMITED',
        message: `the queue's rate limit (${max} starts per ${windowMs} ms${layout.partitioned ? ' in this partition' : ''}) is reached until ${new Date(now + ttl).toISOString()}`,
        until: now + ttl,
        limit: max,
        active: Number(used),
      });
    }
  }
  // A processor threw RateLimitError (fail.lua): no claims until then.
  if (pausedUntil && Number(pausedUntil) > now) {
    out.push({
      code: 'RATE_LIMITED',
      message: `a processor threw RateLimitError: no worker claims${layout.partitioned ? ' in this partition' : ''} until ${new Date(Number(pausedUntil)).toISOString()}`,
      until: Number(pausedUntil),
    });
  }
  if (workers.length === 0) out.push({ code: 'NO_WORKERS', message: 'no worker of this queue is alive' });
  return out;
}

/** A waiting job's place in claim order: priorities < 0, then the list (priority 0), then > 0. */
async function queued(
  client: RedisClient,
  k: QueueKeys,
  job: JobInfo<unknown, unknown>,
): Promise<ExplainReason> {
  let ahead: number;
  let exact = true;
  if (job.priority === 0) {
    const [urgent, pos] = await Promise.all([
      client.zcount(k.prio, '-inf', '(0'),
      client.lpos(k.waiting, job.id, 'MAXLEN', LPOS_SCAN),
    ]);
    exact = pos !== null;
    ahead = urgent + (pos ?? LPOS_SCAN);
  } else {
    const score = await client.zscore(k.prio, job.id);
    const before = score === null ? 0 : await client.zcount(k.prio, '-inf', `(${score}`);
    ahead = before + (job.priority > 0 ? await client.llen(k.waiting) : 0);
  }
  return {
    code: 'QUEUED',
    message: `waiting: ${exact ? '' : 'at least '}${ahead} job(s) are claimed before it (priority ${job.priority})`,
    ahead,
  };
}

/** A grouped waiting job: its place in its group, and what holds the group back. */
async function groupReasons(
  client: RedisClient,
  k: QueueKeys,
  job: JobInfo<unknown, unknown>,
  group: string,
): Promise<ExplainReason[]> {
  const g = groupKeys(k, group);
  const [place, limits, activeText, used, ttl, parked, now] = await Promise.all([
    queued(client, { ...k, waiting: g.waiting, prio: g.prio }, job),
    effectiveLimits(client, k, group),
    client.hget(k.groupActive, group),
    client.get(g.rate),
    client.pttl(g.rate),
    client.zscore(k.groupParked, group),
    serverNow(client),
  ]);
  const out: ExplainReason[] = [
    { ...place, group, message: `${place.message.replace('waiting: ', `waiting in group ${group}: `)}` },
  ];
  const active = Number(activeText ?? 0);
  if (limits.concurrency !== null && active >= limits.concurrency) {
    out.push({
      code: 'GROUP_CONCURRENCY_LIMIT',
      message: `group ${group} has ${active} of ${limits.concurrency} job(s) active: its next job starts when one finishes`,
      group,
      limit: limits.concurrency,
      active,
    });
  }
  const rateFull = limits.rateLimit !== null && Number(used ?? 0) >= limits.rateLimit.max && ttl > 0;
  if (rateFull && limits.rateLimit) {
    out.push({
      code: 'GROUP_RATE_LIMITED',
      message: `group ${group} used its ${limits.rateLimit.max} starts per ${limits.rateLimit.durationMs} ms; the window reopens at ${new Date(now + ttl).toISOString()}`,
      group,
      until: now + ttl,
      limit: limits.rateLimit.max,
      active: Number(used),
    });
  } else if (parked !== null && Number(parked) > now) {
    out.push({
      code: 'GROUP_HELD',
      message: `group ${group} is held until ${new Date(Number(parked)).toISOString()}: its order behind a retry or snooze (concurrency 1), or a processor's RateLimitError`,
      group,
      until: Number(parked),
    });
  }
  return out;
}

async function blocked(
  client: RedisClient,
  k: QueueKeys,
  job: JobInfo<unknown, unknown>,
): Promise<ExplainReason> {
  const [records, link] = await Promise.all([
    job.dependsOn.length === 0 ? [] : client.hmget(k.jobs, ...job.dependsOn),
    client.hget(k.deps, job.id),
  ]);
  if (link?.endsWith('|w')) {
    // Parked by job.waitForChildren (wait-children.lua): `open|w`.
    const open = (job.children ?? []).filter((c) => c.ended === undefined);
    return {
      code: 'WAITING_FOR_CHILDREN',
      message: `parked until its ${link.slice(0, -2)} open child job(s) end (job.waitForChildren)`,
      children: open.slice(0, 100).map(({ queue, id }) => ({ queue, id })),
    };
  }
  // A parent that completed starts its record with 'c'; the others (or those gone) still hold it back.
  const parents = job.dependsOn.filter((_, i) => records[i]?.[0] !== 'c');
  // `|i`: it runs whatever its parents' end (ignoreDependencyFailure, or a dedupe keepLastIfActive
  // successor behind its key's running job).
  const end = link?.endsWith('|i') ? 'to finish (complete or end dead)' : 'to complete';
  return {
    code: 'BLOCKED',
    message: `waits for parent job(s) ${parents.join(', ')} ${end}`,
    parents,
  };
}

async function running(
  raw: RedisClient,
  k: QueueKeys,
  layout: Layout,
  job: JobInfo<unknown, unknown>,
): Promise<ExplainReason> {
  const [leaseUntil, workers] = await Promise.all([
    settling(raw).zscore(k.active, job.id),
    listWorkers(raw, layout),
  ]);
  const owner: WorkerDescription | undefined = workers.find((w) => w.activeJobIds.includes(job.id));
  const until = leaseUntil === null ? undefined : Number(leaseUntil);
  const by = owner ? ` by worker ${owner.id}` : '';
  if (job.startedAt === undefined) {
    return {
      code: 'PREFETCHED',
      message: `claimed${by} ahead of a free slot (prefetch); it starts when one frees, no attempt counted yet`,
      until,
      ...(owner ? { worker: owner.id } : {}),
    };
  }
  return {
    code: 'RUNNING',
    message: `attempt ${job.attempts} running${by}, lease until ${until === undefined ? '?' : new Date(until).toISOString()}`,
    until,
    attempt: job.attempts,
    ...(owner ? { worker: owner.id } : {}),
  };
}
