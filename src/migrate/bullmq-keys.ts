/**
 * The key names of a BullMQ (6.x) queue, the one place the migration builds them: `<prefix>:<queue>:`
 * followed by the structure's name, or by a job id for a job's hash. They mirror BullMQ's own layout
 * (its `QueueKeys`), which Surety only reads and, one job at a time, takes jobs out of.
 */
export interface BullMQKeys {
  readonly prefix: string;
  readonly queue: string;
  /** LIST of waiting job ids (LPUSH to add, taken from the tail). */
  readonly wait: string;
  /** LIST of a queue paused before BullMQ 5 (a paused queue now keeps its jobs in `wait`). */
  readonly paused: string;
  /** ZSET of waiting jobs with a priority. */
  readonly prioritized: string;
  /** ZSET of delayed jobs, score = due ms * 4096 + order. */
  readonly delayed: string;
  /** ZSET of failed jobs, score = finishedOn. */
  readonly failed: string;
  /** LIST of jobs BullMQ workers hold. */
  readonly active: string;
  /** ZSET of completed jobs. */
  readonly completed: string;
  /** ZSET of parents waiting for their children (flows). */
  readonly waitingChildren: string;
  /** ZSET of job schedulers by next tick; each scheduler's HASH is `repeat:<id>`. */
  readonly repeat: string;
  /** HASH of queue settings (`paused`). */
  readonly meta: string;
  /** STRING, the counter of generated ids. */
  readonly id: string;
}

export function bullmqKeys(prefix: string, queue: string): BullMQKeys {
  const base = `${prefix}:${queue}:`;
  return Object.freeze({
    prefix,
    queue,
    wait: `${base}wait`,
    paused: `${base}paused`,
    prioritized: `${base}prioritized`,
    delayed: `${base}delayed`,
    failed: `${base}failed`,
    active: `${base}active`,
    completed: `${base}completed`,
    waitingChildren: `${base}waiting-children`,
    repeat: `${base}repeat`,
    meta: `${base}meta`,
    id: `${base}id`,
  });
}

/** The HASH of job `id`. */
export function bullmqJobKey(k: BullMQKeys, id: string): string {
  return `${k.prefix}:${k.queue}:${id}`;
}

/** The LIST of job `id`'s log lines. */
export function bullmqLogsKey(k: BullMQKeys, id: string): string {
  return `${bullmqJobKey(k, id)}:logs`;
}

/**
 * STRING: the receipt bullmq-take.lua leaves when it takes job `id` to another server (the copy's
 * fingerprint, for a week): Surety's, in BullMQ's key space, so it shares the job's Cluster slot.
 */
export function bullmqTakenKey(k: BullMQKeys, id: string): string {
  return `${bullmqJobKey(k, id)}:surety-taken`;
}

/** Keys that exist only for a job in a flow (a parent with children): such a job is left in BullMQ. */
export function bullmqFlowKeys(k: BullMQKeys, id: string): string[] {
  const job = bullmqJobKey(k, id);
  return [`${job}:dependencies`, `${job}:processed`, `${job}:failed`, `${job}:unsuccessful`];
}

/** The HASH of job scheduler `id`. */
export function bullmqSchedulerKey(k: BullMQKeys, id: string): string {
  return `${k.repeat}:${id}`;
}
