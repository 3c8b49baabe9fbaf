/**
 * Loads the processor of `surety worker <module>`: the module's default export, or its named export
 * `process`, must be a function `(job) => result`. A module may also export `queue` (a name), used
 * when --queue is not given. TypeScript modules (.ts, .mts, .cts) load through tsx: already active when
 * surety runs from a source checkout or under `node --import tsx`, otherwise registered here when the
 * tsx package is installed.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Processor } from '../worker/worker.js';
import { CliError } from './errors.js';

/** Set by bin/surety.js when it registered tsx. */
const TSX_ACTIVE = Symbol.for('surety.tsx');

export interface LoadedProcessor {
  file: string;
  processor: Processor<unknown, unknown>;
  queue?: string;
}

async function ensureTypeScript(spec: string): Promise<void> {
  const g = globalThis as Record<symbol, unknown>;
  if (g[TSX_ACTIVE] || /\btsx\b/.test(`${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS ?? ''}`))
    return;
  try {
    const api = (await import('tsx/esm/api')) as { register: () => unknown };
    api.register();
    g[TSX_ACTIVE] = true;
  } catch {
    throw new CliError(
      `${spec} is TypeScript and tsx is not installed: run npm install --save-dev tsx (or compile the module to JavaScript)`,
    );
  }
}

type Exports = Record<string, unknown> & { default?: unknown };

function pick(mod: Exports): { processor?: unknown; queue?: unknown } {
  const inner = (mod.default !== null && typeof mod.default === 'object' ? mod.default : {}) as Exports;
  const processor = [mod.default, mod.process, inner.default, inner.process].find(
    (f) => typeof f === 'function',
  );
  return { processor, queue: mod.queue ?? inner.queue };
}

export async function loadProcessor(spec: string): Promise<LoadedProcessor> {
  const file = resolve(spec);
  if (!existsSync(file)) throw new CliError(`cannot find module ${spec} (looked for ${file})`);
  if (/\.[cm]?tsx?$/.test(file)) await ensureTypeScript(spec);
  let mod: Exports;
  try {
    mod = (await import(pathToFileURL(file).href)) as Exports;
  } catch (err) {
    const e = err as Error;
    throw new CliError(`cannot load ${spec}: ${e.name}: ${e.message.split('\n')[0]}`);
  }
  const { processor, queue } = pick(mod);
  if (typeof processor !== 'function') {
    throw new CliError(
      `${spec} exports no processor: export default async function (job) { ... } or export async function process(job) { ... }`,
    );
  }
  if (queue !== undefined && typeof queue !== 'string')
    throw new CliError(`${spec} exports queue, but not as a string`);
  return { file, processor: processor as Processor<unknown, unknown>, ...(queue ? { queue } : {}) };
}
