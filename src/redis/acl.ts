/**
 * The Redis ACL rules Surety needs, in one place: docs/acl.md quotes them verbatim (a test checks),
 * and the test suite runs as a user created from them (`npm run test:acl`).
 *
 * Lua scripts run under the caller's ACL, so the commands the scripts call are listed too. Every key
 * is `{<prefix>:<queue>}:<name>` (or `{<prefix>:<queue>:<partition>}:<name>`, see keys.ts) and every
 * sharded pub/sub channel has the same hash tag, so one key pattern and one channel pattern cover all.
 */
import { DEFAULT_PREFIX } from '../defaults.js';
import { checkPrefix } from '../validate.js';

/**
 * Every command a Queue, Worker or QueueEvents sends, with what it is for. "scripts" means called
 * inside the Lua scripts (src/scripts/), which run under the caller's ACL; a test checks that every
 * command the scripts call is listed here.
 */
const WORKER_COMMANDS = {
  fcall:
    'every state change is one Lua script, a function of the Surety library (loaded once per version, see below), run by FCALL',
  evalsha: 'the same scripts, run by EVALSHA while the library is not loaded (or on Redis < 7)',
  eval: 'the EVALSHA fallback when the server has not cached the script yet',
  info: 'connect-time check of the Redis version; the ioredis ready check (and role check with Sentinel)',
  ping: "the CLI's connection check",
  time: "Redis's clock: clean, metrics, workers; scripts (now)",
  hget: 'getJob, global concurrency, schedules, parent results; scripts (job records, meta)',
  hmget: 'getJob, getJobs, metrics, workers, schedules; scripts (job records, annex)',
  hgetall: 'schedules, repair of schedules, batch()',
  hkeys: "getJobs('blocked')",
  hlen: 'counts (blocked)',
  hexists: 'isPaused; scripts (add: dependencies, batch callbacks; schedules: pending entries; addJobLog)',
  hset: 'scripts (job records, meta: pause, global concurrency; heartbeats, metrics)',
  hdel: 'scripts (removal, retention, heartbeats, meta); setMetricsRetention (counters past the retention)',
  hscan:
    "setMetricsRetention (finds the counters past the new retention, in pages); scripts: add (the outbox relay's marks past their 7 days)",
  hsetnx: 'scripts: add (a job record is created once)',
  hrandfield: "scripts: claim (a few random fields of `claims`, to prune stopped workers' records)",
  hincrby: 'scripts: per-minute metrics counters, batch counts',
  llen: 'counts (waiting), getCountsPerPriority',
  lrange: "getJobs('waiting')",
  lindex: 'stats() (the job at the front of each waiting line)',
  lpop: 'scripts: claim (priority-0 waiting list)',
  rpush: 'scripts: enqueue (priority-0 waiting list)',
  lpush: 'scripts: recovered jobs go back to the front of the waiting list',
  lrem: 'scripts: remove, cancel (a waiting job)',
  zcard: 'counts; scripts (retention, enqueue)',
  zcount:
    "getJobs('waiting') (how many prioritised jobs come before the list), explain, getCountsPerPriority; scripts: retention",
  zscore: "explain (a waiting job's place, a running job's lease)",
  lpos: "explain (a waiting job's place in the list)",
  zrangebyscore:
    'getJobs, workers, getCountsPerPriority (groups); scripts (claim, recover, clean, heartbeats)',
  zrange:
    'scripts: claim by priority, delayed wake-ups, the group rotation, retention (the oldest finished jobs)',
  zrevrange: 'groups() (groups by backlog), stats()',
  zrevrangebyscore: "getJobs(state, { order: 'desc' }), search()",
  zincrby: 'scripts: the waiting count of each group',
  zadd: 'scripts: delayed, active (leases), completed and dead sets, priorities, heartbeats',
  zrem: 'scripts: every transition out of a sorted set',
  zpopmin: 'scripts: drain (prioritised waiting jobs, a batch at a time), retention (one finished job)',
  exists:
    'scripts: claim (any prioritised job?), clean and retention (any annex?), partitions, addBatch (batch id taken?)',
  get: 'counts (waiting grouped jobs); scripts: rate limiter windows, the prio order counter (reset), lease ids of older queues, dedupe keys',
  incr: 'scripts: generated job ids, FIFO order within a priority',
  incrby: 'scripts: blocks of job ids (addBulk), lease ids (fencing tokens), rate limiter',
  decr: 'scripts: the count of waiting grouped jobs',
  decrby: 'scripts: the count of waiting grouped jobs',
  set: 'scripts: dedupe keys (add)',
  del: 'scripts: dedupe keys freed, the rate window reset by setRateLimit, idle groups forgotten',
  unlink: "scripts: obliterate (every key of the queue, large ones freed off Redis's main thread)",
  scan: "scripts: obliterate (finds the queue's group, dedupe and batch keys); SCAN is not key-restricted, it lists every key name",
  pexpire: 'scripts: rate limiter window, batch retention',
  pttl: 'scripts: rate limiter window',
  xread: 'queue.events(), QueueEvents (a blocking read on a connection of its own)',
  xadd: 'scripts: the lifecycle events stream (capped)',
  ssubscribe: "workers' wake-ups, waitFor (sharded pub/sub)",
  sunsubscribe: 'a closing worker leaves its handoff channel (so adds stop handing it jobs)',
  spublish: 'scripts: wake-ups, cancellations and completion notices (sharded pub/sub)',
  wait: 'add() with `durability: { waitReplicas }` (waits for replicas to confirm)',
} as const;

/**
 * Read-only commands for dashboards and monitoring: counts, getJob(s), metrics, workers, schedules,
 * discovery. No command that writes, so a script run by this user can read what the user could read
 * anyway, and nothing else.
 */
const MONITOR_COMMANDS = {
  fcall:
    'the partition-count check a Queue makes on first use (partitions.lua, a function of the library); for this user it can only read',
  evalsha:
    'the partition-count check a Queue makes on first use (partitions.lua); for this user it can only read',
  eval: 'the EVALSHA fallback when the server has not cached the script yet',
  exists: 'scripts: the partition-count check',
  info: 'connect-time check of the Redis version; ioredis ready check',
  ping: "the CLI's connection check",
  time: "Redis's clock (metrics, workers)",
  scan: 'queue discovery (surety stats, the dashboard); SCAN is not key-restricted, it lists every key name',
  hget: 'getJob, global concurrency, group limits, the stored rate limit',
  get: 'counts (waiting grouped jobs)',
  zrevrange: 'groups() (groups by backlog), stats()',
  zrevrangebyscore: "getJobs(state, { order: 'desc' }), search()",
  zrange: 'stats() (the most and least urgent prioritised jobs)',
  lindex: 'stats() (the job at the front of each waiting line)',
  pttl: 'explain (when a rate window reopens)',
  hmget: 'getJob, getJobs, metrics, workers, schedules',
  hgetall: 'schedules',
  hkeys: "getJobs('blocked')",
  hlen: 'counts (blocked)',
  hexists: 'isPaused',
  llen: 'counts (waiting), getCountsPerPriority',
  lrange: "getJobs('waiting')",
  zcard: 'counts',
  zcount:
    "getJobs('waiting') (how many prioritised jobs come before the list), explain, getCountsPerPriority",
  zscore: "explain (a waiting job's place, a running job's lease)",
  lpos: "explain (a waiting job's place in the list)",
  zrangebyscore: 'getJobs, workers, getCountsPerPriority (groups)',
  xread: 'queue.events(), QueueEvents',
} as const;

export type AclRole = 'worker' | 'monitor';

/** What each command of a role is for (the table in docs/acl.md). */
export function aclCommands(role: AclRole): Readonly<Record<string, string>> {
  return role === 'worker' ? WORKER_COMMANDS : MONITOR_COMMANDS;
}

/**
 * The ACL rules (what follows `ACL SETUSER <name> on ><password>`) for a Surety user under `prefix`.
 * `worker`: producers, workers, QueueEvents and admin calls (retry, remove, pause...). `monitor`: the
 * read-only calls a dashboard or a metrics exporter makes: no command that writes is granted.
 */
export function aclRules(role: AclRole, prefix = DEFAULT_PREFIX): string {
  checkPrefix(prefix);
  // A prefix is letters, digits and . _ : - (checkPrefix): nothing to escape in a glob.
  const pattern = `{${prefix}:*`;
  const commands = Object.keys(aclCommands(role)).map((c) => `+${c}`);
  // The monitor's keys are `~` rather than `%R~` because EVALSHA declares its keys read-write: with no
  // command that writes in its list, the user cannot write anyway (a test checks the flags).
  const access = role === 'worker' ? `~${pattern} &${pattern}` : `~${pattern}`;
  return `resetkeys resetchannels ${access} -@all ${commands.join(' ')}`;
}
