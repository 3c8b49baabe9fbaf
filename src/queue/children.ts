/**
 * Children of job.addChildren across hash tags (docs/workflows.md#children): a child whose parent
 * lives in another tag (another queue, or another partition) sends its end there through its own
 * queue's `wnotify` outbox, written atomically with the end (includes/settle_dependents.lua). This
 * module delivers the outbox (child-ended.lua in the parent's queue, idempotent: a second delivery
 * counts nothing, so any process may deliver at any time, and a crash between the delivery and the
 * removal only repeats it) and purges the tombstones of ended children (purge-waiters.lua).
 */
import { SCRIPT_BATCH_LIMIT } from '../defaults.js';
import { untilClosed } from '../redis/in-flight.js';
import { serverNow } from '../redis/server-clock.js';
import { callScript, type RedisClient, scripts } from '../scripts/specs.js';
import { type QueueKeys, tagKeys } from '../store/keys.js';

/**
 * How long a tombstone of an ended child stays: a replayed addChildren (the parent's run cut off
 * between planning its children and adding them) must not create the child again. Past this, the
 * parent knows the end (`\x01k`), which the replay reads first.
 */
export const TOMBSTONE_MS = 3_600_000;

/**
 * Outbox entries this process is delivering now, per client: every ack batch that ended a child
 * forwards, and without this the forwards of batches acked together delivered the same ends again
 * (harmless, child-ended.lua counts once, but each a script call). Another process may still deliver
 * one twice.
 */
const delivering = new WeakMap<RedisClient, Set<string>>();

/** Delivers up to `limit` ends at a time from the `wnotify` outbox of `keys`; returns how many. */
export async function forwardChildEnds(
  client: RedisClient,
  keys: QueueKeys,
  limit = SCRIPT_BATCH_LIMIT,
): Promise<number> {
  let busy = delivering.get(client);
  if (!busy) {
    busy = new Set();
    delivering.set(client, busy);
  }
  let total = 0;
  for (;;) {
    const listed = await untilClosed(client, client.zrange(keys.wnotify, 0, limit - 1));
    const members = listed.filter((m) => !busy.has(m));
    // What is left is being delivered by another call of this process.
    if (members.length === 0) return total;
    for (const m of members) busy.add(m);
    try {
      await deliver(client, members);
      await untilClosed(client, client.zrem(keys.wnotify, ...members));
    } finally {
      for (const m of members) busy.delete(m);
    }
    total += members.length;
    if (listed.length < limit) return total;
  }
}

async function deliver(client: RedisClient, members: string[]): Promise<void> {
  await Promise.all(
    members.map((m) => {
      // `parent tag \t parent id \t parent createdAt \t child queue \t child id \t outcome \t result`
      // (ids hold no tab).
      const [tag, parent, created, childQueue, child, outcome, ...result] = m.split('\t') as string[];
      const k = tagKeys(tag!);
      return callScript(client, scripts.childEnded, k, {
        now: '',
        wakeChannel: k.wakeChannel,
        parent: parent!,
        parentCreated: created!,
        childQueue: childQueue!,
        child: child!,
        outcome: outcome!,
        result: result.join('\t'),
      });
    }),
  );
}

/** Deletes the tombstones of children that ended more than TOMBSTONE_MS ago (part of the recovery pass). */
export async function purgeWaiters(
  client: RedisClient,
  keys: QueueKeys,
  limit = SCRIPT_BATCH_LIMIT,
): Promise<number> {
  const cutoff = (await serverNow(client)) - TOMBSTONE_MS;
  return callScript(client, scripts.purgeWaiters, keys, { cutoff, limit });
}
