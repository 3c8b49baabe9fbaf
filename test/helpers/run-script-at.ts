/**
 * Runs a script on an injected clock with every argument it declares taken by name from one table of
 * test settings (a script that gains an argument fails here by name, not by position): no rate limit,
 * no events, no claim ticket, no handoff registration, no start marks riding on a completion, a
 * 30 s lease, 3 attempts, a 1 000-job batch and generous retention. `extra` overrides any of them.
 */
import type { Redis } from 'ioredis';
import { type ArgValue, runScript, type ScriptSpec } from '../../src/scripts/specs.js';
import type { QueueKeys } from '../../src/store/keys.js';
import { claimArgs } from './claim-args.js';

export function runScriptAt<A extends string, R extends string, T>(
  redis: Redis,
  keys: QueueKeys,
  spec: ScriptSpec<A, R, T>,
  now: number,
  extra: Record<string, ArgValue>,
  rows: Record<R, ArgValue>[] = [],
): Promise<unknown> {
  const values: Record<string, ArgValue> = {
    // claim.lua's settings (no rate limit, events, ticket or handoff) serve every script's same-named ones.
    ...claimArgs({ now, defaultLeaseMs: 30_000, limit: 1000 }),
    starts: '',
    defaultMaxAttempts: 3,
    keepCount: 1000,
    keepAgeMs: 3_600_000,
    wakeChannel: keys.wakeChannel,
    doneChannel: keys.doneChannel,
    ...extra,
  };
  const args = {} as Record<A, ArgValue>;
  for (const a of spec.args) {
    const v = values[a];
    if (v === undefined) throw new Error(`no test value for argument ${a} of ${spec.name}.lua`);
    args[a] = v;
  }
  return runScript(redis, spec as ScriptSpec<A, R, unknown>, keys, args, rows);
}
