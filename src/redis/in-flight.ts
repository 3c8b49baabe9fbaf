/**
 * Settles the calls pending on a connection when it closes, so that no caller waits forever and no
 * call runs after its caller was told it failed.
 *
 * When a connection closes, a pending call is in one of two places:
 *  - written to the socket: it may or may not have run, and (autoResendUnfulfilledCommands is off)
 *    ioredis drops it without ever settling its promise. It is rejected with ConnectionError ("may or
 *    may not have run"); the caller decides (acks are fenced, claims are retried with their ticket).
 *  - in ioredis's offline queue (made while the client was not ready): it has not run, and ioredis
 *    would send it once a connection is back. It is taken out of that queue, then rejected ("never
 *    ran"). Rejecting it and leaving it queued would let it run later with nobody to read the reply: a
 *    claim would lease jobs to nobody, an add would create a job its caller believes failed (issue 12,
 *    defect 3).
 * Every client-side failure (not a reply from Redis) is reported as a ConnectionError.
 */
import { Cluster, type Redis, ReplyError } from 'ioredis';
import { ConnectionError } from '../errors.js';

interface Pending {
  promise: Promise<unknown>;
  reject(err: Error): void;
  /** A read: if it was never sent it may simply wait in the offline queue for the next connection. */
  idempotent: boolean;
}

const inFlight = new WeakMap<Redis | Cluster, Set<Pending>>();

/** ioredis's (private) offline queue: a denque of the commands not written to any socket yet. */
export interface OfflineQueue {
  toArray(): { command?: { promise?: unknown } }[];
  removeOne(index: number): unknown;
}

/**
 * The offline queues of `client` (for a Cluster, its own and each node's), or null when this ioredis
 * does not keep them the way 5.x does (test/processes/network-blip.test.ts checks that shape).
 */
export function offlineQueues(client: Redis | Cluster): OfflineQueue[] | null {
  const sources: (Redis | Cluster)[] = client instanceof Cluster ? [client, ...client.nodes()] : [client];
  const out: OfflineQueue[] = [];
  for (const c of sources) {
    const q = (c as unknown as { offlineQueue?: OfflineQueue }).offlineQueue;
    if (!q || typeof q.toArray !== 'function' || typeof q.removeOne !== 'function') return null;
    out.push(q);
  }
  return out;
}

/**
 * Of the commands whose promise is in `promises`, those still in the offline queues (never sent): the
 * ones in `withdrawn` are taken out of the queues, the others left to be sent on the next connection.
 */
function unsent(client: Redis | Cluster, promises: Set<unknown>, withdrawn: Set<unknown>): Set<unknown> {
  const found = new Set<unknown>();
  for (const q of offlineQueues(client) ?? []) {
    const items = q.toArray();
    for (let i = items.length - 1; i >= 0; i--) {
      const p = items[i]?.command?.promise;
      if (promises.has(p)) {
        if (withdrawn.has(p)) q.removeOne(i);
        found.add(p);
      }
    }
  }
  return found;
}

function track(client: Redis | Cluster): Set<Pending> {
  let pending = inFlight.get(client);
  if (pending) return pending;
  const set = new Set<Pending>();
  pending = set;
  inFlight.set(client, set);
  client.on('close', () => {
    if (set.size === 0) return;
    // ioredis emits 'close' on the tick after handling it; no connection can have flushed the offline
    // queue since, so what is still there was never sent.
    const notReads = new Set([...set].filter((p) => !p.idempotent).map((p) => p.promise));
    const queued = unsent(client, new Set([...set].map((p) => p.promise)), notReads);
    const written: Pending[] = [];
    for (const p of set) {
      if (!queued.has(p.promise)) written.push(p);
      else if (p.idempotent) {
        // A read never sent: it waits for the next connection (the client's own retry limit bounds that).
      } else {
        set.delete(p);
        p.reject(
          new ConnectionError('the Redis connection closed before the command was sent; it never ran', null),
        );
      }
    }
    if (written.length === 0) return;
    // What ioredis settled itself (its queues flushed when it gives up) settles first, with its own
    // error: this waits one turn of the event loop.
    setImmediate(() => {
      const err = new ConnectionError(
        'the Redis connection closed before the reply arrived; the command may or may not have run',
        null,
      );
      for (const p of written) if (set.delete(p)) p.reject(err);
    });
  });
  return set;
}

/**
 * `promise` (a call just made on `client`, in the same synchronous step), settled when the connection
 * closes before its reply: rejected with ConnectionError, and if it was not sent yet, withdrawn so it
 * never runs (see the file comment). An `idempotent` call (a read) not sent yet is left to wait for the
 * next connection instead.
 */
export function untilClosed<T>(client: Redis | Cluster, promise: Promise<T>, idempotent = false): Promise<T> {
  const set = track(client);
  return new Promise<T>((resolve, reject) => {
    const entry: Pending = { promise, reject, idempotent };
    set.add(entry);
    promise.then(
      (v) => {
        set.delete(entry);
        resolve(v);
      },
      (e: unknown) => {
        set.delete(entry);
        reject(asConnectionError(e));
      },
    );
  });
}

/** Replies from Redis (script errors, NOSCRIPT, OOM...) pass unchanged; client-side failures are typed. */
export function asConnectionError(e: unknown): unknown {
  if (e instanceof ReplyError || !(e instanceof Error) || e instanceof ConnectionError) return e;
  return new ConnectionError(`Redis call failed: ${e.message}`, e);
}

const settlingViews = new WeakMap<Redis | Cluster, Redis | Cluster>();

/**
 * A view of `client` whose every command goes through untilClosed() as idempotent: for paths that make
 * many plain calls (the admin reads), so that none of them waits forever for a reply lost with its
 * connection (a caller may simply try again), while a call made during a reconnect still waits for the
 * connection instead of failing. Its few writes (pause flags, the concurrency cap) set values, so
 * sending them late is harmless too.
 */
export function settling<C extends Redis | Cluster>(client: C): C {
  let view = settlingViews.get(client);
  if (!view) {
    view = new Proxy(client, {
      get(target, prop, receiver) {
        const value: unknown = Reflect.get(target, prop, receiver);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          const out: unknown = (value as (...a: unknown[]) => unknown).apply(target, args);
          return out instanceof Promise ? untilClosed(target, out, true) : out;
        };
      },
    });
    settlingViews.set(client, view);
  }
  return view as C;
}
