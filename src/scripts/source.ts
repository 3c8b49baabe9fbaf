/**
 * Reading the Lua scripts of src/scripts/: the one place that resolves their `-- @include` lines,
 * for EVALSHA (loadLua: a whole script) and for the function library (scriptParts: a script's helpers
 * and its body apart, script-library.ts).
 */
import { readFileSync } from 'node:fs';

const SCRIPT_DIR = new URL('./', import.meta.url);
const INCLUDE = /^-- @include (\w+)$/gm;

/** A script's parts for the library: its flags, its helpers (includes inlined), its body. */
export interface ScriptParts {
  readonly name: string;
  readonly flags: readonly string[];
  readonly helpers: string;
  readonly body: string;
}

function read(name: string): string {
  return readFileSync(new URL(`${name}.lua`, SCRIPT_DIR), 'utf8');
}

/**
 * `text` with every `-- @include name` line replaced by includes/name.lua. An include may include the
 * helpers it needs the same way; each include is inlined once, at its first mention, so a helper is
 * always defined before the function that calls it.
 */
function inlineIncludes(text: string, inlined: Set<string>): string {
  return text.replace(INCLUDE, (_, inc: string) => {
    if (inlined.has(inc)) return `-- (${inc}: inlined above)`;
    inlined.add(inc);
    return inlineIncludes(read(`includes/${inc}`), inlined).trimEnd();
  });
}

/** src/scripts/<name>.lua with its includes inlined: the source EVALSHA runs. */
export function loadLua(name: string): string {
  return inlineIncludes(read(name), new Set());
}

/** Splits src/scripts/<name>.lua at its last `-- @include` line: helpers before, body after. */
export function scriptParts(name: string): ScriptParts {
  const raw = read(name);
  const firstBreak = raw.indexOf('\n');
  const shebang = raw.slice(0, firstBreak);
  const flags = /flags=([\w,-]+)/.exec(shebang)?.[1]?.split(',') ?? [];
  const rest = raw.slice(firstBreak + 1);
  let cut = 0;
  for (const m of rest.matchAll(INCLUDE)) cut = m.index + m[0].length;
  return {
    name,
    flags,
    helpers: inlineIncludes(rest.slice(0, cut), new Set()),
    body: rest.slice(cut),
  };
}
