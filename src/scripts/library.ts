/**
 * The Lua scripts of src/scripts/ as one Redis Functions library (FUNCTION LOAD, FCALL).
 *
 * Why: an EVALSHA runs its whole script chunk on every call, so every helper the script inlines
 * (add.lua: 29 functions, claim.lua: 45) is created again as a closure before the script's own work
 * starts; that alone cost add.lua 5.5 us of its ~47 us inside Redis. In a function library each
 * script's helpers are created once, at the script's first FCALL after the library was loaded (Redis
 * 7.0 runs the loading code without its standard libraries, which the helpers need), and every later
 * FCALL runs only the script's body.
 *
 * The library holds, for each script, a constructor that defines the script's inlined helpers (its
 * `-- @include` part) and returns the body as a function of (KEYS, ARGV), so the body reads exactly as
 * in the .lua file. Helpers that memoise within one script run mark their state `-- @per-call`
 * (`local NAME = <initial value> -- @per-call ...`): the body resets it on entry, so nothing one call
 * cached (a group's limits, the queue's key names) is seen by the next.
 *
 * Names carry a hash of the library's code (`surety_<hash>` and `surety_<hash>_<script>`), so two
 * versions of Surety on one Redis (a rolling deploy) each call their own code. Flags come from each
 * script's shebang line, as for EVALSHA (allow-oom or none).
 */
import { createHash } from 'node:crypto';
import { scriptParts } from './source.js';

const LIB = '@@LIB@@';
const PER_CALL = /^local (\w+) = (.+?) -- @per-call\b/gm;

export interface ScriptLibrary {
  /** The library's name: `surety_<hash of its code>`. */
  readonly name: string;
  /** The FUNCTION LOAD payload. */
  readonly code: string;
  /** Script name -> its function's name in the library. */
  readonly functions: ReadonlyMap<string, string>;
}

/** The library of the named scripts (each src/scripts/<name>.lua). */
export function buildLibrary(names: readonly string[]): ScriptLibrary {
  const chunks = names.map((name) => {
    const p = scriptParts(name);
    const resets = [...p.helpers.matchAll(PER_CALL)].map((m) => `${m[1]} = ${m[2]}`);
    return { p, resets };
  });
  const bodyCode = chunks
    .map(({ p, resets }) => {
      const id = p.name.replace(/-/g, '_');
      return [
        `local function make_${id}()`,
        p.helpers,
        'return function(KEYS, ARGV)',
        ...resets,
        p.body.trimEnd(),
        'end',
        'end',
        // Made at the first call: at FUNCTION LOAD, Redis 7.0 exposes no standard library (string...)
        // to the code it runs, and the helpers compute their patterns with string.rep.
        `local run_${id}`,
        `redis.register_function{function_name = '${LIB}_${id}', callback = function(KEYS, ARGV)`,
        `  if not run_${id} then run_${id} = make_${id}() end`,
        `  return run_${id}(KEYS, ARGV)`,
        `end, flags = {${p.flags.map((f) => `'${f}'`).join(', ')}}}`,
      ].join('\n');
    })
    .join('\n');
  const hash = createHash('sha1').update(bodyCode).digest('hex').slice(0, 12);
  const lib = `surety_${hash}`;
  const functions = new Map(names.map((n) => [n, `${lib}_${n.replace(/-/g, '_')}`]));
  // The function names are written with a placeholder, replaced by the library's name once the
  // code (which the name hashes) is complete.
  const code = [`#!lua name=${lib}`, bodyCode.replaceAll(LIB, lib)].join('\n');
  return { name: lib, code, functions };
}
