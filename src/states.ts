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

/** The state named by a record's letter (a reply's letter in errors and refusals, too). */
export function stateName(letter: string): JobStateName | undefined {
  return (STATE_BY_LETTER as Record<string, JobStateName>)[letter];
}
