/** Reads the server-side numbers of a scenario from INFO: commands run, CPU used, memory used. */
import type { Redis } from 'ioredis';

export interface ServerSnapshot {
  /** Calls summed over every cmdstat_* line: client commands plus commands run inside scripts. */
  commands: number;
  byCommand: Record<string, number>;
  /** used_cpu_user + used_cpu_sys, in µs (the whole server process). */
  cpuUs: number;
}

export function parseInfo(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0 && !line.startsWith('#')) out[line.slice(0, colon)] = line.slice(colon + 1);
  }
  return out;
}

/** One INFO call (Redis >= 7 takes several sections): counts itself once in the next snapshot's commands. */
export async function snapshot(admin: Redis): Promise<ServerSnapshot> {
  const info = parseInfo(await admin.info('cpu', 'commandstats'));
  const byCommand: Record<string, number> = {};
  let commands = 0;
  for (const [key, value] of Object.entries(info)) {
    if (!key.startsWith('cmdstat_')) continue;
    const calls = Number(/calls=(\d+)/.exec(value)?.[1] ?? 0);
    byCommand[key.slice('cmdstat_'.length)] = calls;
    commands += calls;
  }
  const cpuUs = (Number(info.used_cpu_user) + Number(info.used_cpu_sys)) * 1e6;
  return { commands, byCommand, cpuUs };
}

/** Zeroes the command statistics (CPU counters are process totals and are read as deltas). */
export async function resetCommandStats(admin: Redis): Promise<void> {
  await admin.config('RESETSTAT');
}

/**
 * used_memory without the clients' buffers (MEMORY STATS total.allocated - clients.normal): a query
 * buffer grown by a bulk call is released only later by the server cron and would add noise.
 */
export async function usedMemory(admin: Redis): Promise<number> {
  const flat = (await admin.call('MEMORY', 'STATS')) as unknown[];
  const stats: Record<string, number> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) stats[String(flat[i])] = Number(flat[i + 1]);
  return (stats['total.allocated'] ?? Number.NaN) - (stats['clients.normal'] ?? 0);
}

export async function flushAll(admin: Redis): Promise<void> {
  await admin.flushall('SYNC');
}

/** used_cpu_user + used_cpu_sys of the server process, µs (INFO cpu alone: cheaper than snapshot). */
export async function cpuUs(admin: Redis): Promise<number> {
  const info = parseInfo(await admin.info('cpu'));
  return (Number(info.used_cpu_user) + Number(info.used_cpu_sys)) * 1e6;
}
