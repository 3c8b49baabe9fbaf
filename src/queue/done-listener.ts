/**
 * Lets waitFor resolve without polling: one subscriber client per Queue listens on the queue's
 * done channels (one per partition) (completed/dead job ids published by complete, fail and recover) and wakes the
 * waiters of those ids. Subscribing happens before the waiter's first read of the job, so a
 * completion can never fall between the read and the subscription.
 */
import type { RedisClient } from '../scripts/specs.js';

type Wake = () => void;

export class DoneListener {
  private readonly waiters = new Map<string, Set<Wake>>();
  private ready: Promise<unknown> | null = null;

  constructor(
    private readonly subscriber: RedisClient,
    private readonly channels: readonly string[],
  ) {}

  /** Registers `wake` for `id`; resolves once the subscription is live. Returns the unregister function. */
  async watch(id: string, wake: Wake): Promise<() => void> {
    let set = this.waiters.get(id);
    if (!set) {
      set = new Set();
      this.waiters.set(id, set);
    }
    set.add(wake);
    const unwatch = () => {
      const s = this.waiters.get(id);
      s?.delete(wake);
      if (s?.size === 0) this.waiters.delete(id);
    };
    if (!this.ready) {
      this.subscriber.on('smessage', (_channel: string, message: string) => this.onMessage(message));
      // After a reconnect the subscription is restored, but messages sent meanwhile are gone: re-check all.
      this.subscriber.on('ready', () => this.wakeAll());
      // One SSUBSCRIBE per channel: on a Cluster each partition's channel lives on its own shard.
      this.ready = Promise.all(this.channels.map((c) => this.subscriber.ssubscribe(c)));
    }
    await this.ready;
    return unwatch;
  }

  private onMessage(message: string): void {
    const ids = message.split('\n');
    for (let i = 1; i < ids.length; i++) {
      const set = this.waiters.get(ids[i] as string);
      if (set) for (const wake of set) wake();
    }
  }

  private wakeAll(): void {
    for (const set of this.waiters.values()) for (const wake of set) wake();
  }
}
