/**
 * The one place that builds Redis key names. Every key of a queue shares the hash tag
 * `{prefix:queue}` (or `{prefix:queue:partition}`), so all keys a script touches live in one
 * Redis Cluster slot and a queue can be spread over a cluster by partition.
 */
import { checkQueueAddress } from '../validate.js';

export interface QueueKeys {
  /** The `{prefix:queue}` hash tag shared by every key below. */
  readonly tag: string;
  /** HASH job id -> job record (`header\ndata[\nresult]`, see job-record.ts). */
  readonly jobs: string;
  /**
   * HASH, the jobs' annex (its key string is `errors`, named when it held only those): field `id` ->
   * one line per failed attempt (`at|attempt|errorJson`); `id\x01p` -> progress JSON; `id\x01l` -> log
   * lines; `id\x01d` -> parent ids; `id\x01b` -> a large payload (job-record.ts ANNEX_SUFFIX). Fields
   * exist only when there is something.
   */
  readonly annex: string;
  /** LIST of waiting job ids with priority 0, FIFO (RPUSH to add, LPOP to claim). */
  readonly waiting: string;
  /**
   * ZSET of waiting job ids with a non-zero priority; score = priority * 2^32 + 2^31 +/- n, n from
   * `seq` (see includes/enqueue.lua).
   */
  readonly prio: string;
  /**
   * STRING order counter of `prio`: FIFO inside a priority. Kept below 2^31 (back to 1 when `prio` is
   * empty, `prio` renumbered when it would pass 2^31 - 1), so scores stay exact and in their band.
   */
  readonly seq: string;
  /** STRING counter of lease ids, the first part of fencing tokens (`<lease id>.<claim ms>`); never reset. */
  readonly tokens: string;
  /** STRING counter for generated job ids. */
  readonly ids: string;
  /** ZSET of delayed job ids; score = due time (epoch ms, Redis clock). */
  readonly delayed: string;
  /**
   * ZSET of active job ids; score = lease deadline (epoch ms, Redis clock). Also holds one sentinel
   * member scored +inf that keeps it in skiplist encoding (see includes/active_sentinel.lua).
   */
  readonly active: string;
  /** ZSET of completed job ids; score = finish time (epoch ms). Trimmed by retention. */
  readonly completed: string;
  /** ZSET of dead job ids; score = finish time (epoch ms). Trimmed by retention. */
  readonly dead: string;
  /** HASH schedule key -> spec JSON (cron or everyMs, tz, data, job options, catchUp). */
  readonly schedules: string;
  /** HASH schedule key -> `version|id of the pending occurrence job`. */
  readonly schedulePending: string;
  /**
   * HASH of queue-wide settings and flags: `paused`, `concurrency` (global limit), `starved`, `rate`
   * (queue-wide rate limit `max|windowMs`), `glimits` (default group limits, as in `groupLimits`).
   */
  readonly meta: string;
  /** STRING job starts in the current rate-limit window; expires with the window. */
  readonly limiter: string;
  /**
   * HASH claimer (a worker's fetcher and claim slot) -> `nonce|expiry|first token|ids`: its last claim
   * that leased jobs, so a claim whose reply was lost can be retried without leasing jobs to nobody
   * (includes/record_claim.lua, replay_claim.lua); field `<fetcher id>.t`: the jobs handed off with
   * the fetcher's last registration, `nonce|expiry||<token> <id>\n...` (includes/record_handoff.lua).
   */
  readonly claims: string;
  /** ZSET of worker ids; score = heartbeat expiry (epoch ms). */
  readonly workers: string;
  /** HASH worker id -> JSON worker description (host, pid, active job ids...). */
  readonly workerInfo: string;
  /** HASH blocked job id -> `remaining parents|i or s` (i: run even if a parent dies). */
  readonly deps: string;
  /** HASH parent job id -> ids of jobs blocked on it, newline-separated. */
  readonly dependents: string;
  /** HASH per-minute counters for queue.metrics(): `<minute>:c|f|x` (completed, failed attempts, dead) and `last`. */
  readonly stats: string;
  /** STREAM of lifecycle events: entries { event, ids (newline-separated), data? }, capped. */
  readonly events: string;
  /** Sharded pub/sub channel: `w` (a job became claimable) or `d` (an earlier delayed job exists). */
  readonly wakeChannel: string;
  /** Sharded pub/sub channel: `c\nid\nid...` (completed) or `x\nid...` (dead), for waitFor. */
  readonly doneChannel: string;
  /**
   * ZSET, the group rotation: groups that have waiting jobs and room under their limits; score = turn
   * number (from `groupTurn`), so the group served longest ago comes first (includes/group_*.lua).
   */
  readonly groupReady: string;
  /**
   * ZSET of groups that may not start a job before a time: rate window full, or holding the place of
   * a job that retries (concurrency 1); score = epoch ms at which the group is looked at again.
   */
  readonly groupParked: string;
  /**
   * HASH group -> `until|id`: why a parked group is held past its rate window, so a change that ends
   * the hold early can wake it: behind job `id`, a retry or snooze under concurrency 1, until its due
   * time; or (id '') a processor's RateLimitError until `until` (includes/group_leave.lua).
   */
  readonly groupHeld: string;
  /** HASH group -> its jobs in `active` (running or prefetched), across all workers. */
  readonly groupActive: string;
  /** ZSET group -> its waiting jobs; a group is a member while it has waiting or active jobs. */
  readonly groupBacklog: string;
  /** HASH group -> its limits override `concurrency|rateMax|rateWindowMs` ('' inherits, '-' none). */
  readonly groupLimits: string;
  /** STRING counter of rotation turns (scores of `groupReady`). */
  readonly groupTurn: string;
  /** STRING count of waiting jobs that belong to a group (they are not in `waiting`/`prio`). */
  readonly groupWaiting: string;
  /** STRING job starts in the current window of the queue-wide rate limit (queue.setRateLimit). */
  readonly queueLimiter: string;
  /**
   * ZSET of jobs with an expiry (add option `expireAt` / `ttlMs`) that have not started; score =
   * expireAt (epoch ms). Swept by expire.lua; a job's start mark drops it, and the sweep
   * drops entries whose job started, finished or was removed meanwhile.
   */
  readonly expiring: string;
  /**
   * ZSET `<fetcher id>|<claim nonce>|<unit>` -> deadline (epoch ms): idle workers' fetchers registered
   * for handoffs, one member per job the fetcher may be handed (claim.lua registers, add-one.lua takes
   * a member, leases a new job to its fetcher and sends it on the fetcher's channel).
   */
  readonly idle: string;
  /**
   * HASH parent job id -> its children in other queues (dependsOn `{ queue, id }`), one line each:
   * `child tag \t child id \t parent queue \t parent partition` (cross-link.lua). Emptied when the
   * parent ends, by a notification per line in `xnotify` (includes/settle_dependents.lua).
   */
  readonly xdependents: string;
  /**
   * ZSET, the outbox of notifications for children in other queues: member `outcome \t child tag \t
   * child id \t parent queue \t parent partition \t parent id` (outcome `c` or `x`), score = when its
   * parent ended. Delivered by src/queue/cross-queue.ts (cross-resolve.lua in the child's queue), then
   * removed.
   */
  readonly xnotify: string;
  /**
   * ZSET of links still to make in parents' queues for this queue's blocked jobs: member `child id \t
   * parent tag \t parent queue \t parent partition \t parent id`, score = when the child was added
   * (add.lua). Removed once linked (cross-link.lua); the recovery pass links what a crash left here.
   */
  readonly xlinks: string;
  /** STRING: counter of link numbers of blocked jobs with parents in other queues (add.lua; see cross-resolve.lua). */
  readonly xlinkseq: string;
  /**
   * HASH id -> fingerprint: copies of BullMQ jobs from another server or Cluster slot, held (written,
   * in no list or set) until their BullMQ original is taken out (import-copy.lua writes,
   * import-release.lua releases, import-undo.lua deletes); empty between runs of the import.
   */
  readonly imported: string;
  /**
   * HASH child id -> its parent (job.addChildren): `parent tag \t parent id \t parent queue \t parent
   * createdAt \t child queue` while the child is unfinished; with a sixth field, its outcome (`c` or `x`), once it ended: a tombstone that
   * keeps add.lua from creating a child of that id again for that parent (a replayed addChildren),
   * deleted an hour after (`wended`, purge-waiters.lua). Written by add.lua with the child.
   */
  readonly waiters: string;
  /** ZSET child id -> when it ended, for the tombstones of `waiters` (purge-waiters.lua). */
  readonly wended: string;
  /**
   * ZSET, the outbox of children's ends for parents in other hash tags: member `parent tag \t parent
   * id \t parent createdAt \t child queue \t child id \t outcome \t result json`, score = when the child ended. Delivered by
   * src/queue/children.ts (child-ended.lua in the parent's queue), then removed.
   */
  readonly wnotify: string;
  /**
   * HASH outbox mark `<outbox row id>:<job id>` -> when written: the jobs a Postgres outbox relay
   * added (or found), until its commit deleted their rows (add.lua writes and forgets them): a row
   * added again after its relay died before committing is not created again, even if its job has run
   * and been deleted meanwhile. Marks no relay forgot go after 7 days.
   */
  readonly outboxed: string;
}

/**
 * The keys of one group of a queue. Lua derives the same names from the queue's `jobs` key
 * (includes/group_keys.lua; test/behaviour/groups.test.ts checks the two agree), because a script serving groups
 * cannot list every group's keys in KEYS; they carry the queue's hash tag, so they share its slot.
 */
export interface GroupKeys {
  /** LIST of the group's waiting job ids with priority 0, FIFO. */
  readonly waiting: string;
  /** ZSET of the group's waiting job ids with a non-zero priority, scored like the queue's `prio`. */
  readonly prio: string;
  /** STRING order counter of the group's `prio` (see includes/enqueue.lua). */
  readonly seq: string;
  /** STRING job starts in the group's current rate-limit window; expires with the window. */
  readonly rate: string;
}

export function groupKeys(k: QueueKeys, group: string): GroupKeys {
  const base = `${k.tag}:g:${group}`;
  return Object.freeze({ waiting: `${base}:w`, prio: `${base}:p`, seq: `${base}:s`, rate: `${base}:r` });
}

/**
 * STRING `{tag}:dd:<key>`: the id of the job holding dedupe key `key` (queue.add's `dedupe` option);
 * expires with the dedupe window when it has one. Lua builds it the same way (add.lua, release_dedupe).
 */
export function dedupeKey(k: QueueKeys, key: string): string {
  return `${k.tag}:dd:${key}`;
}

/**
 * STRING `{tag}:dn:<key>`: the id of the pending successor of dedupe key `key` (`keepLastIfActive`):
 * a job blocked behind the key's running job, which an add with the key rewrites. Deleted when that
 * job ends (the successor takes `dd:<key>`) or the successor leaves; a name found stale is deleted
 * where it is read. Lua builds it the same way (includes/dedupe_successor.lua, release_dedupe, add.lua).
 */
export function dedupeNextKey(k: QueueKeys, key: string): string {
  return `${k.tag}:dn:${key}`;
}

/**
 * HASH `{tag}:b:<id>`: batch `id` of queue.addBatch: total, pending, completed, dead, deadIds (first
 * 100, newline-separated), createdAt, finishedAt, callbackId, and the callback's spec (cbId, cbPriority,
 * cbDelayMs, cbRunAt, cbTail, cbData; sfx: the id suffix, ev: the events cap). Expires 7 days after it
 * finishes. Lua builds it the same way (add.lua, includes/batch_settle.lua).
 */
export function batchKey(k: QueueKeys, id: string): string {
  return `${k.tag}:b:${id}`;
}

/**
 * Keys of queue `queue` under `prefix` (of one partition when `partition` is given). The mapping
 * (prefix, queue, partition) -> tag is one-to-one: queue names have no ':' (checkQueueName), and the
 * one pair that could still read two ways, an all-digit name under a prefix with ':', is refused
 * here (checkQueueAddress), so no two queues ever share a key.
 */
export function queueKeys(prefix: string, queue: string, partition?: number): QueueKeys {
  checkQueueAddress(prefix, queue);
  return tagKeys(partition === undefined ? `{${prefix}:${queue}}` : `{${prefix}:${queue}:${partition}}`);
}

/**
 * The keys of the queue (or partition) whose hash tag is `tag`, as queueKeys names them: for a tag read
 * back from Redis (a child's queue in a notification of the `xnotify` outbox).
 */
export function tagKeys(tag: string): QueueKeys {
  return Object.freeze({
    tag,
    jobs: `${tag}:jobs`,
    annex: `${tag}:errors`,
    waiting: `${tag}:waiting`,
    prio: `${tag}:prio`,
    seq: `${tag}:seq`,
    tokens: `${tag}:tokens`,
    ids: `${tag}:ids`,
    delayed: `${tag}:delayed`,
    active: `${tag}:active`,
    completed: `${tag}:completed`,
    dead: `${tag}:dead`,
    schedules: `${tag}:schedules`,
    schedulePending: `${tag}:schedpending`,
    meta: `${tag}:meta`,
    limiter: `${tag}:limiter`,
    claims: `${tag}:claims`,
    workers: `${tag}:workers`,
    workerInfo: `${tag}:workerinfo`,
    deps: `${tag}:deps`,
    dependents: `${tag}:dependents`,
    stats: `${tag}:stats`,
    events: `${tag}:events`,
    wakeChannel: `${tag}:wake`,
    doneChannel: `${tag}:done`,
    groupReady: `${tag}:gready`,
    groupParked: `${tag}:gparked`,
    groupHeld: `${tag}:gheld`,
    groupActive: `${tag}:gactive`,
    groupBacklog: `${tag}:gbacklog`,
    groupLimits: `${tag}:glimits`,
    groupTurn: `${tag}:gturn`,
    groupWaiting: `${tag}:gwaiting`,
    queueLimiter: `${tag}:qlimiter`,
    expiring: `${tag}:expiring`,
    idle: `${tag}:idle`,
    xdependents: `${tag}:xdependents`,
    xnotify: `${tag}:xnotify`,
    xlinks: `${tag}:xlinks`,
    xlinkseq: `${tag}:xlinkseq`,
    imported: `${tag}:imported`,
    waiters: `${tag}:waiters`,
    wended: `${tag}:wended`,
    wnotify: `${tag}:wnotify`,
    outboxed: `${tag}:outboxed`,
  });
}

/**
 * The queue (and partition, when the tag is a partition's) of a hash tag of `prefix`, the inverse of
 * queueKeys: for a tag read back from Redis (a child's queue in an `xdependents` line). Null for a tag
 * of another prefix.
 */
export function tagQueue(prefix: string, tag: string): { queue: string; partition?: number } | null {
  const head = `{${prefix}:`;
  if (!tag.startsWith(head) || !tag.endsWith('}')) return null;
  // Queue names have no ':' (checkQueueName): what follows the queue's name is its partition.
  const [queue = '', partition] = tag.slice(head.length, -1).split(':');
  if (queue === '') return null;
  return partition === undefined ? { queue } : { queue, partition: Number(partition) };
}

/**
 * Sharded pub/sub channel of one worker fetcher: jobs handed off to it by add-one.lua, as
 * `<nonce>|<now>|<length of id>|<id><record>` (add-one.lua names it from the hash tag the same way).
 */
export function handoffChannel(k: QueueKeys, fetcher: string): string {
  return `${k.tag}:hand:${fetcher}`;
}

/**
 * The names of the keys a queue (or one partition) may hold in Redis: every field of `k` but its
 * hash tag and its pub/sub channels, which are not keys. Group keys are left out: a group's keys
 * exist only while the queue's own `jobs` hash holds its jobs.
 */
export function storedKeys(k: QueueKeys): string[] {
  return Object.entries(k)
    .filter(([field]) => field !== 'tag' && !field.endsWith('Channel'))
    .map(([, key]) => key as string);
}
