/**
 * A Worker given `{ [name]: processor }` instead of one function runs, for each job, the processor of
 * the job's name (add(data, { name })). Key '*' catches the names the map does not list; a job whose
 * name has no processor (and no '*') ends dead at once with an UnrecoverableError naming it.
 */
import { UnrecoverableError, ValidationError } from '../errors.js';
import type { Job } from './job.js';
import type { Processor } from './runner.js';

export type ProcessorMap<Data, Result> = Readonly<Record<string, Processor<Data, Result>>>;

export function routeByName<Data, Result>(map: ProcessorMap<Data, Result>): Processor<Data, Result> {
  const table = new Map<string, Processor<Data, Result>>();
  for (const [name, fn] of Object.entries(map)) {
    if (typeof fn !== 'function')
      throw new ValidationError(`processor ${JSON.stringify(name)} must be a function`);
    table.set(name, fn);
  }
  if (table.size === 0) throw new ValidationError('a processor map needs at least one processor');
  const fallback = table.get('*');
  return (job: Job<Data>) => {
    const fn = table.get(job.name) ?? fallback;
    if (!fn) {
      throw new UnrecoverableError(
        `no processor for job name ${JSON.stringify(job.name)} (this worker runs: ${[...table.keys()].join(', ')})`,
      );
    }
    return fn(job);
  };
}
