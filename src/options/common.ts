/**
 * The options a Queue and a Worker share (connection, prefix, partitions, events, logger, telemetry,
 * clock): validated once, frozen.
 */
import { type Clock, checkClock } from '../clock.js';
import { DEFAULT_EVENTS_MAX_LEN, DEFAULT_PREFIX } from '../defaults.js';
import { ValidationError } from '../errors.js';
import type { ConnectionOption, Logger } from '../redis/client.js';
import { resolveTelemetry, type TelemetryOption, type Tracing } from '../telemetry/tracing.js';
import {
  checkBool,
  checkInt,
  checkKnownKeys,
  checkObject,
  checkPartitions,
  checkPrefix,
  show,
} from '../validate.js';

export interface CommonOptions {
  connection?: ConnectionOption;
  /** Key prefix; every key of a queue is `{prefix:queue}:...`. Default 'surety'. */
  prefix?: string;
  /** Refuse to start on a Redis whose maxmemory-policy may evict jobs (default: warn). */
  strict?: boolean;
  /** Where warnings go. Default: console. */
  logger?: Logger;
  /**
   * Lifecycle events appended to the queue's capped Redis Stream by this client's operations
   * (read them with queue.events()). `false` turns them off; default on, capped near 10 000 entries.
   */
  events?: boolean | { maxLen: number };
  /**
   * Spread this queue over N hash tags (`{prefix:queue:0}` ... `{prefix:queue:N-1}`) so a Redis Cluster
   * serves it from several masters. Every Queue and Worker of the queue must use the same count: it is
   * recorded in Redis and another count is refused (PartitionMismatchError). 'auto' uses the recorded
   * count (1 for a queue that has none): what admin tools want. Default 1. See docs/scaling.md.
   */
  partitions?: number | 'auto';
  /**
   * OpenTelemetry spans (docs/telemetry.md): on by default when `@opentelemetry/api` is installed
   * (spans go to the SDK the application registered; none registered: no-op). `false` turns them off;
   * `{ tracerProvider }` sends them to that provider instead of the global one.
   */
  telemetry?: TelemetryOption;
  /** For tests only: a virtual clock (surety/testing) instead of Redis's; see docs/testing.md. */
  clock?: Clock;
}

/** The shared options, resolved: part of a Queue's and of a Worker's resolved options. */
export interface ResolvedCommon {
  prefix: string;
  /** 0 = 'auto' (the count recorded in Redis). */
  partitions: number;
  eventsMaxLen: number;
  strict: boolean;
  logger: Logger;
  /** Spans of add calls (a Queue) or of attempts (a Worker): the telemetry option. */
  tracing: Tracing;
  clock: Clock | undefined;
}

export function resolveCommon(name: string, o: CommonOptions): ResolvedCommon {
  const logger = o.logger === undefined ? console : checkLogger(`${name}.logger`, o.logger);
  return {
    clock: checkClock(`${name}.clock`, o.clock),
    partitions: checkPartitions(o.partitions),
    eventsMaxLen: resolveEvents(o.events),
    prefix: o.prefix === undefined ? DEFAULT_PREFIX : checkPrefix(o.prefix),
    strict: o.strict === undefined ? false : checkBool(`${name}.strict`, o.strict),
    logger,
    tracing: resolveTelemetry(name, o.telemetry, logger),
  };
}

/** A logger is used only when something goes wrong: check it now, not when the warning comes. */
function checkLogger(name: string, value: unknown): Logger {
  if (
    value === null ||
    typeof value !== 'object' ||
    typeof (value as { warn?: unknown }).warn !== 'function'
  ) {
    throw new ValidationError(`${name} must be an object with a warn(message) method, got ${show(value)}`);
  }
  return value as Logger;
}

function resolveEvents(value: unknown): number {
  if (value === undefined || value === true) return DEFAULT_EVENTS_MAX_LEN;
  if (value === false) return 0;
  const e = checkObject('events', value);
  checkKnownKeys('events', e, ['maxLen']);
  return checkInt('events.maxLen', e.maxLen, 1, 10_000_000);
}
