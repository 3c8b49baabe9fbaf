/**
 * Loads a processor module, for `surety worker <module>` and for sandboxes: the module's default
 * export, or its named export `process`, must be a function `(job) => result`. A module may also export
 * `queue` (a name), which the CLI uses when --queue is not given. TypeScript modules (.ts, .mts, .cts)
 * load through tsx: already active when surety runs from a source checkout or under
 * `node --import tsx`, otherwise registered here when the tsx package is installed.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { isMainThread } from 'node:worker_threads';
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

/** A TypeScript module's file name (what ensureTypeScript is needed for). */
export function isTypeScript(file: string): boolean {
  return /\.[cm]?tsx?$/.test(file);
}

/** Node strips types itself (22.6+ with --experimental-strip-types, 23.6+ by default). */
function nativeTypeScript(): boolean {
  return Boolean((process.features as { typescript?: unknown }).typescript);
}

/**
 * Whether this process can load a TypeScript module in a sandbox: tsx can be found from here (a
 * sandbox registers it), or Node strips types itself. `resolveTsx` is for tests.
 */
export function canLoadTypeScript(
  resolveTsx: () => unknown = () => createRequire(import.meta.url).resolve('tsx/package.json'),
): boolean {
  if (nativeTypeScript()) return true;
  try {
    resolveTsx();
    return true;
  } catch {
    return false;
  }
}

/** The message of a TypeScript module that cannot be loaded (tsx missing). */
export function noTypeScriptMessage(spec: string): string {
  return `${spec} is TypeScript and tsx is not installed: run npm install --save-dev tsx (or compile the module to JavaScript)`;
}

/**
 * Makes TypeScript modules loadable in this thread. tsx given to node with --import registers its
 * hooks in the main thread, but in worker threads only on recent Node versions (22.22.3+, 24.11.1+):
 * so in a thread (a sandbox) they are registered here unless this thread did already. A second
 * registration where --import did register is harmless (tsx transforms the module once more).
 */
async function ensureTypeScript(spec: string, fail: LoadErrorFactory): Promise<void> {
  const g = globalThis as Record<symbol, unknown>;
  if (g[TSX_ACTIVE]) return;
  const tsxFlag = /\btsx\b/.test(`${process.execArgv.join(' ')} ${process.env.NODE_OPTIONS ?? ''}`);
  if (isMainThread && tsxFlag) return;
  try {
    const api = (await import('tsx/esm/api')) as { register: () => unknown };
    api.register();
    g[TSX_ACTIVE] = true;
  } catch {
    if (nativeTypeScript()) return;
    throw fail(noTypeScriptMessage(spec));
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
  if (isTypeScript(file)) await ensureTypeScript(spec, fail);
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
