/**
 * Loads a processor module, for `surety worker <module>` and for sandboxes: the module's default
 * export, or its named export `process`, must be a function `(job) => result`. A module may also export
 * `queue` (a name), which the CLI uses when --queue is not given. TypeScript modules (.ts, .mts, .cts)
 * load through tsx: already active when surety runs from a source checkout or under
 * `node --import tsx`, otherwise registered here when the tsx package is installed.
 */
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Processor } from '../runner.js';

/** Set by bin/surety.js (or here) once tsx is registered. */
const TSX_ACTIVE = Symbol.for('surety.tsx');

export interface LoadedProcessor {
  file: string;
  processor: Processor<unknown, unknown>;
  queue?: string;
}

/** Makes the error a failed load throws (the CLI's CliError, a sandbox's SandboxError). */
export type LoadErrorFactory = (message: string) => Error;

async function ensureTypeScript(spec: string, fail: LoadErrorFactory): Promise<void> {
  const g = globalThis as Record<symbol, unknown>;
  if (g[TSX_ACTIVE] || /\btsx\b/.test(`${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS ?? ''}`))
    return;
  try {
    const api = (await import('tsx/esm/api')) as { register: () => unknown };
    api.register();
    g[TSX_ACTIVE] = true;
  } catch {
    throw fail(
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

/** `spec`: a path (relative to the current directory) or a file: URL. */
export async function loadProcessor(spec: string, fail: LoadErrorFactory): Promise<LoadedProcessor> {
  const file = spec.startsWith('file:') ? new URL(spec).pathname : resolve(spec);
  if (!existsSync(file)) throw fail(`cannot find module ${spec} (looked for ${file})`);
  if (/\.[cm]?tsx?$/.test(file)) await ensureTypeScript(spec, fail);
  let mod: Exports;
  try {
    mod = (await import(pathToFileURL(file).href)) as Exports;
  } catch (err) {
    const e = err as Error;
    throw fail(`cannot load ${spec}: ${e?.name}: ${String(e?.message).split('\n')[0]}`);
  }
  const { processor, queue } = pick(mod);
  if (typeof processor !== 'function') {
    throw fail(
      `${spec} exports no processor: export default async function (job) { ... } or export async function process(job) { ... }`,
    );
  }
  if (queue !== undefined && typeof queue !== 'string')
    throw fail(`${spec} exports queue, but not as a string`);
  return { file, processor: processor as Processor<unknown, unknown>, ...(queue ? { queue } : {}) };
}
