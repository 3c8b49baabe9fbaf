/**
 * Loads the processor of `surety worker <module>` with the loader sandboxes use
 * (src/worker/sandbox/load-processor.ts); a module that cannot be loaded is a CliError.
 */
import { type LoadedProcessor, loadProcessor as load } from '../worker/sandbox/load-processor.js';
import { CliError } from './errors.js';

export type { LoadedProcessor } from '../worker/sandbox/load-processor.js';

export function loadProcessor(spec: string): Promise<LoadedProcessor> {
  return load(spec, (message) => new CliError(message));
}
