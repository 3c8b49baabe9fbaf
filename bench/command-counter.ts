/**
 * Counts the Redis commands a process sends, by wrapping the send function of both clients in use:
 * ioredis (Surety, BullMQ) and node-redis v3 (Bee-Queue). A command inside a pipeline or MULTI counts
 * as a command; the pipeline as one round trip. Other commands are one round trip each (commands sent
 * concurrently from one turn of the event loop still count one each: an upper bound).
 */
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { Pipeline, Redis } from 'ioredis';

export interface CommandCount {
  commands: number;
  roundTrips: number;
}

type AnyFn = (this: object, ...args: unknown[]) => unknown;

export class CommandCounter {
  commands = 0;
  roundTrips = 0;
  enabled = false;
  private readonly excluded = new WeakSet<object>();

  /** Commands of this client (the harness's own admin client) are never counted. */
  exclude(client: object): void {
    this.excluded.add(client);
  }

  counts(client: object): boolean {
    return this.enabled && !this.excluded.has(client);
  }

  start(): void {
    this.commands = 0;
    this.roundTrips = 0;
    this.enabled = true;
  }

  stop(): CommandCount {
    this.enabled = false;
    return { commands: this.commands, roundTrips: this.roundTrips };
  }
}

let installed: CommandCounter | null = null;

/** Installs the wrappers once per process and returns the process's counter (disabled until start()). */
export function installCounter(): CommandCounter {
  if (installed) return installed;
  const counter = new CommandCounter();
  installed = counter;

  // ioredis: a pipeline calls sendCommand(command, stream) with its buffering stream, then writes once.
  const redisProto = Redis.prototype as unknown as Record<string, AnyFn>;
  const send = redisProto.sendCommand!;
  redisProto.sendCommand = function (this: object, ...args: unknown[]) {
    if (counter.counts(this)) {
      counter.commands++;
      if (args[1] === undefined) counter.roundTrips++;
    }
    return send.apply(this, args);
  };
  const pipeProto = Pipeline.prototype as unknown as Record<string, AnyFn>;
  const exec = pipeProto.exec!;
  pipeProto.exec = function (this: object, ...args: unknown[]) {
    const owner = (this as { redis?: object }).redis;
    if (owner && counter.counts(owner)) counter.roundTrips++;
    return exec.apply(this, args);
  };

  installNodeRedisV3(counter);
  return counter;
}

/** node-redis v3 as Bee-Queue resolves it; absent: nothing to wrap. */
function installNodeRedisV3(counter: CommandCounter): void {
  const require = createRequire(import.meta.url);
  let redisDir: string;
  try {
    const beeMain = require.resolve('bee-queue');
    redisDir = dirname(require.resolve('redis/package.json', { paths: [dirname(beeMain)] }));
  } catch {
    return;
  }
  const client = require(redisDir) as { RedisClient: { prototype: Record<string, AnyFn> } };
  const multi = require(`${redisDir}/lib/multi.js`) as { prototype: Record<string, AnyFn> };
  let batching = 0;
  const proto = client.RedisClient.prototype;
  const sendInternal = proto.internal_send_command!;
  proto.internal_send_command = function (this: object, ...args: unknown[]) {
    if (counter.counts(this)) {
      counter.commands++;
      if (batching === 0) counter.roundTrips++;
    }
    return sendInternal.apply(this, args);
  };
  // MULTI/EXEC and batches write their commands synchronously inside exec: one round trip.
  const wrapExec = (fn: AnyFn): AnyFn =>
    function (this: object, ...args: unknown[]) {
      const owner = (this as { _client?: object })._client;
      if (owner && counter.counts(owner)) counter.roundTrips++;
      batching++;
      try {
        return fn.apply(this, args);
      } finally {
        batching--;
      }
    };
  const mp = multi.prototype;
  const transaction = wrapExec(mp.exec_transaction!);
  const batch = wrapExec(mp.exec_batch!);
  mp.exec_transaction = transaction;
  mp.exec_batch = batch;
  mp.exec = batch;
  mp.EXEC = batch;
}
