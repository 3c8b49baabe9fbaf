/**
 * Dependencies across queues through a crash: the worker that completes a parent is killed (kill -9)
 * after the completion was written and before it delivered the notification to the child's queue.
 * The notification waits in the parent queue's outbox, atomically written with the completion, and
 * the recovery pass of another worker of the parent's queue delivers it: the child still runs.
 *
 * To hold the dying worker exactly between the two steps, it runs as a Redis ACL user that may touch
 * only its own queue's keys: its completion succeeds, its delivery to the other queue is refused (an
 * `error` event), and it is killed once that refusal is reported.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Queue, Worker } from '../../src/index.js';
import { aclRules } from '../../src/redis/acl.js';
import { loadLibrary } from '../../src/scripts/functions.js';
import { queueKeys } from '../../src/store/keys.js';
import { createAclUser, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';
import { useWorkerChildren } from '../helpers/worker-children.js';

const fx = useRedis();
const open: { close(): Promise<void> }[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});
// Registered after the hook above, so it runs first: children are killed before the queues close.
const startChild = useWorkerChildren();

describe('dependencies across queues through a crash', () => {
  it("a parent's worker killed between the completion and the delivery: the child runs via the recovery pass", async () => {
    const parentName = uniqueName('parents');
    const childName = uniqueName('children');
    const parents = new Queue(parentName, { connection: fx.url });
    const children = new Queue(childName, { connection: fx.url });
    const childWorker = new Worker(childName, async (job) => job.parentResults(), { connection: fx.url });
    open.push(parents, children, childWorker);

    // The dying worker's user: the worker rules, narrowed to the parents' queue.
    const rules = aclRules('worker')
      .replace('~{surety:*', `~{surety:${parentName}}*`)
      .replace('&{surety:*', `&{surety:${parentName}}*`);
    await loadLibrary(fx.redis);
    const narrowUrl = await createAclUser(fx.redis, fx.server.url, rules);
    const { child, messages } = startChild(narrowUrl, parentName, 2_000);
    await waitUntil(() => messages.some((m) => m.ready), 'parent worker ready');

    const p = await parents.add({}, { id: 'p' });
    await waitUntil(() => messages.some((m) => m.started === p.id), 'parent started');
    const c = await children.add({}, { id: 'c', dependsOn: [{ queue: parentName, id: 'p' }] });
    expect(c.state).toBe('blocked');
    child.send({ release: 'p' });
    await waitUntil(() => messages.some((m) => m.message?.includes('NOPERM')), 'the delivery refused');
    child.kill('SIGKILL');

    expect((await parents.getJob('p'))!.state).toBe('completed');
    expect((await children.getJob('c'))!.state).toBe('blocked');
    expect(await fx.redis.zcard(queueKeys('surety', parentName).xnotify)).toBe(1);

    // Another worker of the parents' queue: its recovery pass delivers what the dead one could not.
    const rescuer = new Worker(parentName, () => 'unused', { connection: fx.url, recoverIntervalMs: 50 });
    open.push(rescuer);
    const results = (await children.waitFor('c', { timeoutMs: 10_000 })) as Record<string, unknown>;
    expect(Object.keys(results)).toEqual([`${parentName}:p`]);
    expect(String(results[`${parentName}:p`])).toMatch(/^done by \d+ attempt 1$/);
    expect(await fx.redis.exists(queueKeys('surety', parentName).xnotify)).toBe(0);
  });
});
