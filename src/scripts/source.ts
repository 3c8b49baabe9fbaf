/**
 * Reading the Lua scripts of src/scripts/: the one place that resolves their `-- @include` lines,
 * for EVALSHA (loadLua: a whole script) and for the function library (scriptParts: a script's helpers
 * and its body apart, library.ts).
 */
import { readFileSync } from 'node:fs';

const SCRIPT_DIR = new URL('./', import.meta.url);
const INCLUDE = /^-- @include (\w+)$/gm;

/** A script's parts for the library: its flags, its helpers (includes inlined), its body. */
export interface ScriptParts {
  readonly name: string;
  /** Its first line (`#!lua` and its flags). */
  readonly shebang: string;
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

const camelToSnake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/**
 * The prelude that binds a script's KEYS and ARGV to local names, from its header (`-- KEYS[i] name`,
 * `-- ARGV[i] name`, which test/unit/script-headers.test.ts holds to the script's spec): key `name`
 * is the local `name_key`, argument `name` is `arg_name` (snake_case: `eventsMaxLen` is
 * `arg_events_max_len`). So a body reads `jobs_key` and `arg_now`, never a position. Only names the
 * body uses are bound (a local costs the call a table read); a body that reads `queue_keys` gets the
 * key table too (queueKeyTable).
 */
export function namePrelude(raw: string, body: string): string {
  const bind = (table: 'KEYS' | 'ARGV', local: (name: string) => string) => {
    const pairs = [...raw.matchAll(new RegExp(`^-- ${table}\\[(\\d+)\\] (\\w+)`, 'gm'))]
      .map((m) => ({ at: m[1]!, local: local(m[2]!) }))
      .filter((p) => new RegExp(`\\b${p.local}\\b`).test(body));
    if (pairs.length === 0) return '';
    return `local ${pairs.map((p) => p.local).join(', ')} = ${pairs.map((p) => `${table}[${p.at}]`).join(', ')}\n`;
  };
  return (
    bind('KEYS', (n) => `${camelToSnake(n)}_key`) +
    bind('ARGV', (n) => `arg_${camelToSnake(n)}`) +
    (/\bqueue_keys\b/.test(body) ? queueKeyTable(raw) : '')
  );
}

/** The channels a key table carries beside the keys, under the names the shared helpers read. */
const TABLE_CHANNELS: Readonly<Record<string, string>> = { wakeChannel: 'wake', doneChannel: 'done' };

/**
 * `local queue_keys = { jobs = KEYS[1], ... }`: the queue's keys this script holds, by their header
 * names in snake_case, with the wake and done channels: the one table the shared transitions (unlink,
 * settle_dependents, expire_jobs, claim's stages) read a queue's keys from, built here so no script
 * lists them by hand. A key the script does not hold is nil in it.
 */
function queueKeyTable(raw: string): string {
  const fields = [
    ...[...raw.matchAll(/^-- KEYS\[(\d+)\] (\w+)/gm)].map((m) => `${camelToSnake(m[2]!)} = KEYS[${m[1]}]`),
    ...[...raw.matchAll(/^-- ARGV\[(\d+)\] (\w+)/gm)]
      .filter((m) => TABLE_CHANNELS[m[2]!] !== undefined)
      .map((m) => `${TABLE_CHANNELS[m[2]!]} = ARGV[${m[1]}]`),
  ];
  return `local queue_keys = { ${fields.join(', ')} }\n`;
}

/** src/scripts/<name>.lua with its includes inlined and its names bound: the source EVALSHA runs. */
export function loadLua(name: string): string {
  const p = scriptParts(name);
  return `${p.shebang}\n${p.helpers}${p.body}`;
}

/**
 * Splits src/scripts/<name>.lua at its last `-- @include` line: helpers before, body after (opening
 * with the prelude that binds its KEYS and ARGV by name).
 */
export function scriptParts(name: string): ScriptParts {
  const raw = read(name);
  const firstBreak = raw.indexOf('\n');
  const shebang = raw.slice(0, firstBreak);
  const flags = /flags=([\w,-]+)/.exec(shebang)?.[1]?.split(',') ?? [];
  const rest = raw.slice(firstBreak + 1);
  let cut = 0;
  for (const m of rest.matchAll(INCLUDE)) cut = m.index + m[0].length;
  const body = rest.slice(cut);
  return {
    name,
    shebang,
    flags,
    helpers: inlineIncludes(rest.slice(0, cut), new Set()),
    body: `\n${namePrelude(raw, body)}${body}`,
  };
}
