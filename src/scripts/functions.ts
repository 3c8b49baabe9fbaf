/**
 * Which scripts run as Redis Functions on which client, and loading the library (library.ts).
 *
 * A client calls FCALL first, without asking: the library is normally in Redis already (another client
 * loaded it; Redis keeps functions in its RDB and AOF files and replicates them). Only when Redis
 * answers that the function is unknown does the client send FUNCTION LOAD (once, shared by its calls
 * in flight), on every master of a Cluster, and call again. A server that refuses functions (Redis
 * older than 7, or an ACL user without FCALL or FUNCTION LOAD) is remembered per client, whose scripts
 * then go by EVALSHA as before: the same Lua, the same atomicity, only the per-call helper set-up back.
 */
import { Cluster, type Redis, ReplyError } from 'ioredis';
import { buildLibrary, type ScriptLibrary } from './library.js';

/** A client as call.ts takes it (not imported from there: that module imports this one). */
type RedisClient = Redis | Cluster;

const registered: string[] = [];
let library: ScriptLibrary | undefined;
/** Clients whose server or user cannot run the library: they use EVALSHA. */
const refused = new WeakSet<RedisClient>();
const loading = new WeakMap<RedisClient, Promise<boolean>>();

/** Called by define() for each script: the library is built, on first use, from those named so far. */
export function registerScript(name: string): void {
  if (!registered.includes(name)) registered.push(name);
}

/** The library of every registered script (built once). */
export function scriptLibrary(): ScriptLibrary {
  if (library === undefined || library.functions.size !== registered.length) {
    library = buildLibrary(registered);
  }
  return library;
}

/** The function to FCALL for `script` on this client, or null to use EVALSHA. */
export function libraryFunction(redis: RedisClient, script: string): string | null {
  if (refused.has(redis)) return null;
  return scriptLibrary().functions.get(script) ?? null;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : '';
}

/** Redis says the function (so the library) is not loaded on the server that answered. */
export function isFunctionMissing(err: unknown): boolean {
  return /^ERR Function not found/i.test(message(err));
}

/** Redis says this server or user does not run functions at all: use EVALSHA from now on. */
export function refusesFunctions(redis: RedisClient, err: unknown): boolean {
  const m = message(err);
  // Only a refusal of FCALL or FUNCTION itself: a NOPERM for the keys would refuse EVALSHA alike.
  if (!/^NOPERM\b.*'(fcall|function\|load|function)'/i.test(m) && !/^ERR unknown command/i.test(m)) {
    return false;
  }
  refused.add(redis);
  return true;
}

/**
 * Loads the library (on every master of a Cluster). True when the server has it now (loaded here, or
 * by someone else meanwhile); false when it cannot (refused for good: the client is marked; or not
 * now, e.g. over maxmemory: this call uses EVALSHA). A lost connection is thrown.
 */
export function loadLibrary(redis: RedisClient): Promise<boolean> {
  let pending = loading.get(redis);
  if (pending === undefined) {
    pending = loadOnServers(redis).finally(() => loading.delete(redis));
    loading.set(redis, pending);
  }
  return pending;
}

/** The servers a client's calls can reach: the client itself, or every master of a Cluster. */
export function libraryServers(redis: RedisClient): Redis[] {
  return redis instanceof Cluster ? redis.nodes('master') : [redis];
}

/**
 * FUNCTION LOAD of the library on one server (`surety scripts load` calls it with an operator's
 * connection): 'loaded', or 'present' when that server has this version already. Refusals throw.
 */
export async function loadLibraryOn(server: Redis): Promise<'loaded' | 'present'> {
  try {
    await server.call('FUNCTION', 'LOAD', scriptLibrary().code);
    return 'loaded';
  } catch (err) {
    if (/already exists/i.test(message(err))) return 'present';
    throw err;
  }
}

async function loadOnServers(redis: RedisClient): Promise<boolean> {
  const results = await Promise.all(
    libraryServers(redis).map(async (server) => {
      try {
        await loadLibraryOn(server);
        return true;
      } catch (err) {
        if (refusesFunctions(redis, err)) return false;
        // Over maxmemory, busy or loading: not now (this call uses EVALSHA; a later one tries again).
        if (/^(OOM|BUSY|LOADING|READONLY)\b/.test(message(err))) return false;
        // Any other refusal is for good (so calls do not each pay a failed load): EVALSHA from now on.
        if (err instanceof ReplyError) {
          refused.add(redis);
          return false;
        }
        throw err;
      }
    }),
  );
  return results.every(Boolean);
}

/**
 * Deletes the libraries of other Surety versions from one server (`surety scripts prune`), returning
 * their names. Safe while clients of those versions still run: a client whose library is gone loads
 * it again at its next call (see the module comment), at the cost of one FUNCTION LOAD.
 */
export async function pruneLibrariesOn(server: Redis): Promise<string[]> {
  const current = scriptLibrary().name;
  const list = (await server.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'surety_*')) as unknown[][];
  const names = list.map((entry) => String(entry[1])).filter((n) => /^surety_[0-9a-f]{12}$/.test(n));
  const old = names.filter((n) => n !== current);
  for (const name of old) await server.call('FUNCTION', 'DELETE', name);
  return old;
}
