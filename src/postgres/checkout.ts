/**
 * Connections taken from the application's Pool, never left unheard. pg-pool's connect() promise
 * resolves a microtask after the connection is ready, and a connection the server ends at once (a
 * Postgres restarting) can emit `error` within that microtask, before the caller's listener is on:
 * unheard, that event ends the process. connect()'s callback is called as the connection becomes
 * ready, so the listener goes on there. A lost connection is then reported by the query it fails.
 */
import type { Pool, PoolClient } from 'pg';

const ignore = () => {};

/** A client of `pool` with `onError` (default: ignore) listening to its `error` event from the start. */
export function checkout(pool: Pool, onError: (err: Error) => void = ignore): Promise<PoolClient> {
  return new Promise((resolve, reject) => {
    pool.connect((err, client) => {
      if (err || !client) {
        reject(err ?? new Error('pool.connect() gave no client'));
        return;
      }
      client.on('error', onError);
      resolve(client);
    });
  });
}

/** Gives a client of checkout() back to its pool (destroyed when `err` is set); `onError` as given. */
export function giveBack(
  client: PoolClient,
  err?: Error | boolean,
  onError: (err: Error) => void = ignore,
): void {
  client.off('error', onError);
  client.release(err);
}

/** Runs `use` with a client of `pool`, given back after (destroyed when `broken` says so then). */
export async function withPoolClient<R>(
  pool: Pool,
  use: (client: PoolClient) => Promise<R>,
  broken: (client: PoolClient) => Error | boolean | undefined = () => undefined,
): Promise<R> {
  const client = await checkout(pool);
  try {
    return await use(client);
  } finally {
    giveBack(client, broken(client));
  }
}

const dropped = new WeakSet<PoolClient>();

/**
 * Closes a pool client's connection (release with an error destroys it), at most once. Its `error`
 * listeners stay: the connection may still report its end.
 */
export function drop(client: PoolClient, err?: unknown): void {
  if (dropped.has(client)) return;
  dropped.add(client);
  client.release(err instanceof Error ? err : true);
}
