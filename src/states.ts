/** Job states: the letter a record's header starts with (see job-record.ts), and its name. */
export const STATE_BY_LETTER = {
  w: 'waiting',
  d: 'delayed',
  b: 'blocked',
  a: 'active',
  c: 'completed',
  x: 'dead',
} as const satisfies Record<string, string>;

export type JobStateName = (typeof STATE_BY_LETTER)[keyof typeof STATE_BY_LETTER];

/** Every state, in the order people read them (CLI, dashboard, counts): the one list of states. */
export const JOB_STATES: readonly JobStateName[] = Object.freeze([
  'waiting',
  'delayed',
  'blocked',
  'active',
  'completed',
  'dead',
]);

/** True when `s` names a job state. */
export function isJobState(s: unknown): s is JobStateName {
  return typeof s === 'string' && (JOB_STATES as readonly string[]).includes(s);
}

/** The state named by a record's letter (a reply's letter in errors and refusals, too). */
export function stateName(letter: string): JobStateName | undefined {
  return (STATE_BY_LETTER as Record<string, JobStateName>)[letter];
}
