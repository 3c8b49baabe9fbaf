/**
 * The Redis ACL rules Surety needs, in one place: docs/acl.md quotes them verbatim (a test checks),
 * and the test suite runs as a user created from them (`npm run test:acl`).
 *
 * Lua scripts run under the caller's ACL, so the commands the scripts call are listed too. Every key
 * is `{<prefix>:<queue>}:<name>` (or `{<prefix>:<queue>:<partition>}:<name>`, see keys.ts) and every
 * sharded pub/sub channel has the same hash tag, so one key pattern and one channel pattern cover all.
 */
import { DEFAULT_PREFIX } from './defaults.js';
import { checkPrefix } from './validate.js';

/** Commands a Queue, Worker or QueueEvents sends itself, with what it uses each for. */
const CLIENT_COMMANDS = {
  evalsha: 'every state change runs as a Lua script (EVALSHA)',
  eval: 'the EVALSHA fallback when the server does not have the script cached yet',
  info: 'connect-time check of the Redis version; ioredis ready check (and role check with Sentinel)',
  time: "Redis's clock (clean, metrics, workers)",
  hget: 'getJob, global concurrency, schedules, parent results',
  hmget: 'getJob, getJobs, metrics, workers, schedules, parent results',
  hgetall: 'schedules, repair of schedules',
  hkeys: "getJobs('blocked')",
  hlen: 'counts (blocked)',
  hexists: 'isPaused',
  hset: 'setGlobalConcurrency',
  hdel: 'setGlobalConcurrency(null)',
  llen: 'counts (waiting)',
  lrange: "getJobs('waiting')",
  zcard: 'counts',
  zrangebyscore: 'getJobs, workers',
  xread: 'queue.events(), QueueEvents',
  ssubscribe: "workers' wake-ups, waitFor (sharded pub/sub)",
} as const;

/** Commands called only inside the Lua scripts (src/scripts/*.lua and includes/). */
const SCRIPT_COMMANDS = {
  exists: 'claim (any prioritised job?), clean and retention (any annex?)',
  get: 'rate limiter window',
  hincrby: 'per-minute metrics counters',
  hsetnx: 'add (job records)',
  incr: 'generated job ids, FIFO order within a priority',
  incrby: 'blocks of job ids (addBulk), lease ids (fencing tokens), rate limiter',
  lpop: 'claim (priority 0 waiting list)',
  lpush: 'recovered jobs go back to the front of the waiting list',
  rpush: 'enqueue (priority 0 waiting list)',
  lrem: 'remove, cancel (a waiting job)',
  pexpire: 'rate limiter window',
  pttl: 'rate limiter window',
  spublish: 'wake-ups and completion notices (sharded pub/sub)',
  xadd: 'lifecycle events stream (capped)',
  zadd: 'delayed, active (leases), finished sets, priorities, heartbeats',
  zrange: 'claim by priority, retention',
  zrem: 'every transition out of a sorted set',
} as const;

/** Read-only commands for dashboards and monitoring: counts, getJob(s), metrics, workers, schedules, discovery. */
const MONITOR_COMMANDS = {
  info: 'connect-time check of the Redis version; ioredis ready check',
  time: "Redis's clock (metrics, workers)",
  scan: 'queue discovery (surety stats, the dashboard); SCAN is not key-restricted, it lists every key name',
  hget: 'getJob, global concurrency',
  hmget: 'getJob, getJobs, metrics, workers, schedules',
  hgetall: 'schedules',
  hkeys: "getJobs('blocked')",
  hlen: 'counts (blocked)',
  hexists: 'isPaused',
  llen: 'counts (waiting)',
  lrange: "getJobs('waiting')",
  zcard: 'counts',
  zrangebyscore: 'getJobs, workers',
  xread: 'queue.events(), QueueEvents',
} as const;

export type AclRole = 'worker' | 'monitor';

/** What each command of a role is for (the table in docs/acl.md). */
export function aclCommands(role: AclRole): Readonly<Record<string, string>> {
  return role === 'worker' ? { ...CLIENT_COMMANDS, ...SCRIPT_COMMANDS } : MONITOR_COMMANDS;
}

/**
 * The ACL rules (what follows `ACL SETUSER <name> on ><password>`) for a Surety user under `prefix`.
 * `worker`: producers, workers, QueueEvents and admin calls (retry, remove, pause...). `monitor`: the
 * read-only calls a dashboard or a metrics exporter makes; keys are readable only (`%R~`).
 */
export function aclRules(role: AclRole, prefix = DEFAULT_PREFIX): string {
  checkPrefix(prefix);
  // A prefix is letters, digits and . _ : - (checkPrefix): nothing to escape in a glob.
  const pattern = `{${prefix}:*`;
  const commands = Object.keys(aclCommands(role)).map((c) => `+${c}`);
  const access = role === 'worker' ? `~${pattern} &${pattern}` : `%R~${pattern}`;
  return `resetkeys resetchannels ${access} -@all ${commands.join(' ')}`;
}
