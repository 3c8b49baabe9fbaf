/**
 * One recovery pass over a queue, shared by every Worker's recovery loop, Queue.recoverExpired and the
 * CLI reaper: jobs whose lease expired go back to waiting (or to dead when their attempts are spent),
 * jobs whose expiry came before they started end dead (expire.lua), and schedules whose pending
 * occurrence's claimer died are advanced, and dependencies across queues that a crash left half done
 * are carried on (cross-queue.ts). Atomic per script, so any number of processes may run it at once.
 */
import {
  DEFAULT_EVENTS_MAX_LEN,
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_RETENTION,
  SCRIPT_BATCH_LIMIT,
} from '../defaults.js';
import { callScript, type RedisClient, scripts } from '../scripts/specs.js';
import type { QueueKeys } from '../store/keys.js';
import type { RetentionRule } from '../types.js';
import { purgeWaiters } from './children.js';
import { forwardCross, relinkCross } from './cross-queue.js';
import { repairSchedules } from './schedules.js';

export interface RecoveredJobs {
  /** Jobs put back to waiting. */
  requeued: string[];
  /** Jobs that had no attempts left and went dead. */
  dead: string[];
  /** Jobs that expired before they started (add option `expireAt` / `ttlMs`) and went dead. */
  expired: string[];
  /** Schedules advanced because the worker that claimed their occurrence died first. */
  repairedSchedules: number;
  /**
   * Dependencies across queues a crash left half done: notifications delivered to children in other
   * queues, and links made to parents in other queues (src/queue/cross-queue.ts).
   */
  crossQueue: number;
}

export async function recoverExpired(
  client: RedisClient,
  keys: QueueKeys,
  deadRetention: RetentionRule = DEFAULT_RETENTION.dead,
  eventsMaxLen: number = DEFAULT_EVENTS_MAX_LEN,
  limit = SCRIPT_BATCH_LIMIT,
): Promise<RecoveredJobs> {
  const { requeued, dead } = await callScript(client, scripts.recover, keys, {
    now: '',
    limit,
    defaultMaxAttempts: DEFAULT_MAX_ATTEMPTS,
    keepCount: deadRetention.maxCount,
    keepAgeMs: deadRetention.maxAgeMs,
    wakeChannel: keys.wakeChannel,
    doneChannel: keys.doneChannel,
    eventsMaxLen,
  });
  const expired = await callScript(client, scripts.expire, keys, {
    now: '',
    limit,
    keepCount: deadRetention.maxCount,
    keepAgeMs: deadRetention.maxAgeMs,
    wakeChannel: keys.wakeChannel,
    doneChannel: keys.doneChannel,
    eventsMaxLen,
  });
  const repairedSchedules = await repairSchedules(client, keys);
  const crossQueue =
    (await forwardCross(client, keys, eventsMaxLen, limit)) +
    (await relinkCross(client, keys, eventsMaxLen, limit));
  await purgeWaiters(client, keys, limit);
  return { requeued, dead, expired, repairedSchedules, crossQueue };
}
