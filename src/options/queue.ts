import { DEFAULT_MAX_PAYLOAD_BYTES } from '../defaults.js';
import type { ResolvedJobOptions } from '../store/job-record.js';
import type { JobOptions } from '../types.js';
import { checkInt, checkKnownKeys, checkObject } from '../validate.js';
import { type CommonOptions, type ResolvedCommon, resolveCommon } from './common.js';
import { checkJobFields, DEFAULTS_KEYS, LIBRARY_JOB_DEFAULTS } from './job.js';

export interface QueueOptions extends CommonOptions {
  /** Defaults for every job added through this Queue. */
  defaults?: Omit<JobOptions, 'id' | 'delayMs' | 'runAt'>;
  /** Largest accepted job payload, as UTF-8 JSON. Default 512 KiB. */
  maxPayloadBytes?: number;
  /**
   * Make add() wait until `waitReplicas` replicas have the job (Redis WAIT), up to `timeoutMs`
   * (default 1 000). If fewer confirm, add() rejects with DurabilityError (the job was added on the
   * master but may be lost if it fails now). Default: no wait (Redis's asynchronous replication).
   */
  durability?: { waitReplicas: number; timeoutMs?: number };
}

export interface ResolvedQueueOptions extends ResolvedCommon {
  defaults: ResolvedJobOptions;
  maxPayloadBytes: number;
  /** Replicas add() waits for (0: none) and for how long. */
  durability: { waitReplicas: number; timeoutMs: number };
}

export function resolveQueueOptions(opts: QueueOptions): ResolvedQueueOptions {
  const o = checkObject('Queue options', opts);
  checkKnownKeys('Queue options', o, [
    'connection',
    'prefix',
    'strict',
    'logger',
    'events',
    'defaults',
    'maxPayloadBytes',
    'partitions',
    'durability',
    'telemetry',
    'clock',
  ]);
  let defaults = LIBRARY_JOB_DEFAULTS;
  if (opts.defaults !== undefined) {
    const d = checkObject('defaults', opts.defaults);
    checkKnownKeys('defaults', d, DEFAULTS_KEYS);
    defaults = checkJobFields('defaults.', d, LIBRARY_JOB_DEFAULTS);
  }
  return Object.freeze({
    ...resolveCommon('Queue options', opts),
    defaults,
    maxPayloadBytes:
      opts.maxPayloadBytes === undefined
        ? DEFAULT_MAX_PAYLOAD_BYTES
        : checkInt('maxPayloadBytes', opts.maxPayloadBytes, 1, 512 * 1024 * 1024),
    durability: resolveDurability(opts.durability),
  });
}

function resolveDurability(value: unknown): { waitReplicas: number; timeoutMs: number } {
  if (value === undefined) return { waitReplicas: 0, timeoutMs: 0 };
  const d = checkObject('durability', value);
  checkKnownKeys('durability', d, ['waitReplicas', 'timeoutMs']);
  return {
    waitReplicas: checkInt('durability.waitReplicas', d.waitReplicas, 1, 100),
    timeoutMs: checkInt('durability.timeoutMs', d.timeoutMs ?? 1_000, 1, 60_000),
  };
}
