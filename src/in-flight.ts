/** Settles calls that ioredis would leave pending forever when a connection drops mid-command. */
import type { Cluster, Redis } from 'ioredis';
import { ConnectionError } from './errors.js';

const inFlight = new WeakMap<Redis | Cluster, Set<(err: Error) => void>>();

/**
 * `promise` (a call on `client`), rejected with ConnectionError if the connection closes before it
 * settles. ioredis, with autoResendUnfulfilledCommands off, drops such commands without ever
 * settling their promises; this is what keeps a worker's loops from waiting forever.
 */
export function untilClosed<T>(client: Redis | Cluster, promise: Promise<T>): Promise<T> {
  let pending = inFlight.get(client);
  if (!pending) {
    const set = new Set<(err: Error) => void>();
    pending = set;
    inFlight.set(client, set);
    client.on('close', () => {
      const err = new ConnectionError(
        'the Redis connection closed before the reply arrived; the command may or may not have run',
        null,
      );
      for (const reject of [...set]) reject(err);
      set.clear();
    });
  }
  const set = pending;
  return new Promise<T>((resolve, reject) => {
    set.add(reject);
    promise.then(
      (v) => {
        set.delete(reject);
        resolve(v);
      },
      (e) => {
        set.delete(reject);
        reject(e);
      },
    );
  });
}
