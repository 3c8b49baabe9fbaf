/** Small helpers shared by the commands: global options, help examples, option parsers, output. */
import { type Command, InvalidArgumentError } from 'commander';
import { discoverQueues } from '../queue/discover.js';
import type { GlobalOptions, RedisHandle } from './connection.js';
import { painter } from './format.js';

export function globals(cmd: Command): GlobalOptions {
  return cmd.optsWithGlobals<GlobalOptions>();
}

/**
 * The named queues, or else every queue under the prefix. Repeating commands (stats --watch, reaper)
 * rediscover at most every `ttlMs`: a SCAN walks the whole keyspace.
 */
export function queueLister(names: string[], handle: RedisHandle, g: GlobalOptions, ttlMs = 30_000) {
  let cached: { at: number; names: string[] } | null = null;
  return async (): Promise<string[]> => {
    if (names.length > 0) return names;
    if (!cached || Date.now() - cached.at > ttlMs)
      cached = { at: Date.now(), names: await discoverQueues(handle.client, g.prefix) };
    return cached.names;
  };
}

/** Appends an "Examples:" section to the command's --help. */
export function examples(cmd: Command, lines: string[]): Command {
  return cmd.addHelpText('after', `\nExamples:\n${lines.map((l) => `  $ ${l}`).join('\n')}\n`);
}

/** Commander option parser for integers within a range. */
export function intOption(name: string, min: number, max = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^-?\d+$/.test(value.trim()) || n < min || n > max) {
      const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
      throw new InvalidArgumentError(`${name} must be an integer ${range}.`);
    }
    return n;
  };
}

/** Collects a repeatable option into an array. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

export const out = {
  paint: painter(process.stdout),
  err: painter(process.stderr),
  line(text = ''): void {
    process.stdout.write(`${text}\n`);
  },
  json(value: unknown): void {
    process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  },
  /** One compact JSON document per line (streams: worker, reaper, stats --watch). */
  jsonLine(value: unknown): void {
    process.stdout.write(`${JSON.stringify(value)}\n`);
  },
  note(text: string): void {
    process.stderr.write(`${text}\n`);
  },
};
