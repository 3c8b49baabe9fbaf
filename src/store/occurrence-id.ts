/**
 * The id of a schedule occurrence: `schedule:<key>:<tick>`. A schedule's jobs are ordinary jobs under
 * these ids, so one id per tick makes a duplicate run of a tick impossible however many workers race;
 * the worker reads the id back to advance the schedule as the occurrence starts, and partition routing
 * sends every occurrence to its schedule's partition. Only this module knows the format.
 */

export const OCCURRENCE_PREFIX = 'schedule:';
/** What a schedule key may be: it is part of job ids and hash fields. */
export const SCHEDULE_KEY_RE = /^[A-Za-z0-9._-]{1,100}$/;

export function occurrenceId(key: string, tick: number): string {
  return `${OCCURRENCE_PREFIX}${key}:${tick}`;
}

/** The schedule key and tick of an occurrence job id, or null for an ordinary job. */
export function parseOccurrenceId(id: string): { key: string; tick: number } | null {
  if (!id.startsWith(OCCURRENCE_PREFIX)) return null;
  const colon = id.lastIndexOf(':');
  const key = id.slice(OCCURRENCE_PREFIX.length, colon);
  const tick = Number(id.slice(colon + 1));
  return SCHEDULE_KEY_RE.test(key) && Number.isInteger(tick) ? { key, tick } : null;
}
