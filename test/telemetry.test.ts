/**
 * OpenTelemetry (docs/telemetry.md): spans through the SDK's in-memory exporter, registered globally
 * as an application would, with no Surety option; and a child process without the API package.
 */
import { fork } from 'node:child_process';
import { context, SpanKind, SpanStatusCode, type TracerProvider, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, beforeEach, describe, expect, expectTypeOf, it } from 'vitest';
import {
  type Job,
  Queue,
  type QueueOptions,
  RateLimitError,
  SnoozeError,
  UnrecoverableError,
  ValidationError,
  Worker,
  type WorkerOptions,
} from '../src/index.js';
import type { TracerProviderLike } from '../src/telemetry/api.js';
import { otelApi } from '../src/telemetry/api.js';
import { decodeTraceField, encodeTraceField } from '../src/telemetry/trace-field.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from './helpers/setup.js';

const fx = useRedis();
const open = closeAfterEach();
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(provider);
});
afterAll(async () => {
  await provider.shutdown();
  trace.disable();
  context.disable();
});
beforeEach(() => exporter.reset());

function queue(name: string, opts: QueueOptions = {}): Queue {
  const q = new Queue(name, { connection: fx.url, ...opts });
  open.push(q);
  return q;
}
function worker(name: string, fn: (job: Job) => unknown, opts: WorkerOptions = {}): Worker {
  const w = new Worker(name, fn, { connection: fx.url, ...opts });
  open.push(w);
  return w;
}

/** The finished spans of queue `name` (add, schedule and process), in the order they ended. */
function spansOf(name: string, exp = exporter): ReadableSpan[] {
  return exp.getFinishedSpans().filter((s) => s.attributes['messaging.destination.name'] === name);
}
function processSpans(name: string, exp = exporter): ReadableSpan[] {
  return spansOf(name, exp).filter((s) => s.name === `process ${name}`);
}
/** Polls until `n` process spans of `name` have ended, and returns them. */
async function waitSpans(name: string, n: number, exp = exporter): Promise<ReadableSpan[]> {
  await waitUntil(() => processSpans(name, exp).length >= n, `${n} process span(s) of ${name}`);
  return processSpans(name, exp);
}
function producerSpan(name: string, operation = 'add'): ReadableSpan {
  const found = spansOf(name).filter((s) => s.name === `${operation} ${name}`);
  expect(found).toHaveLength(1);
  return found[0]!;
}
function isChildOf(child: ReadableSpan, parent: ReadableSpan): boolean {
  return (
    child.spanContext().traceId === parent.spanContext().traceId &&
    child.parentSpanContext?.spanId === parent.spanContext().spanId
  );
}

describe('OpenTelemetry spans', () => {
  it('every attempt, a retry included, is a CONSUMER child of the PRODUCER add span, with its outcome', async () => {
    const name = uniqueName();
    const q = queue(name);
    worker(
      name,
      (job) => {
        if (job.attempt === 1) throw new Error('first attempt fails');
        return 'ok';
      },
      { concurrency: 1 },
    );
    const added = await q.add(
      { n: 1 },
      { name: 'resize', maxAttempts: 2, backoff: { type: 'fixed', delayMs: 0 } },
    );
    await q.waitFor(added.id);
    const spans = await waitSpans(name, 2);
    const add = producerSpan(name);
    expect(add.kind).toBe(SpanKind.PRODUCER);
    expect(add.attributes).toMatchObject({
      'messaging.system': 'surety',
      'messaging.operation.name': 'add',
      'messaging.message.id': added.id,
    });
    const [first, second] = spans.sort(
      (a, b) => Number(a.attributes['surety.job.attempt']) - Number(b.attributes['surety.job.attempt']),
    );
    for (const s of [first!, second!]) {
      expect(s.kind).toBe(SpanKind.CONSUMER);
      expect(isChildOf(s, add)).toBe(true);
      expect(s.attributes).toMatchObject({
        'messaging.system': 'surety',
        'messaging.operation.name': 'process',
        'messaging.message.id': added.id,
        'surety.job.name': 'resize',
      });
    }
    expect(first!.attributes).toMatchObject({ 'surety.job.attempt': 1, 'surety.job.outcome': 'retry' });
    expect(first!.status).toMatchObject({ code: SpanStatusCode.ERROR, message: 'first attempt fails' });
    expect(first!.events.map((e) => e.name)).toContain('exception');
    expect(second!.attributes).toMatchObject({ 'surety.job.attempt': 2, 'surety.job.outcome': 'completed' });
    expect(second!.status.code).toBe(SpanStatusCode.UNSET);
    // The context lives in the record, header field 21, as a W3C traceparent.
    const header = (await fx.redis.hget(q.keys.jobs, added.id))!.split('\n')[0]!.split('|');
    expect(header[21]).toBe(`00-${add.spanContext().traceId}-${add.spanContext().spanId}-01`);
  });

  it('an attempt whose lease was recovered before its outcome was written ends as lease-lost', async () => {
    const name = uniqueName();
    const q = queue(name);
    const w = worker(name, async (job) => {
      if (job.attempt > 1) return 'second';
      // Block past the 100 ms lease (no renewal can run), then have the lease recovered: the recover
      // call is written before the event loop reaches the renewer's timer, so the completion is refused.
      const until = Date.now() + 300;
      while (Date.now() < until) {}
      await q.recoverExpired();
      return 'first';
    });
    const refused: Error[] = [];
    w.on('error', (err: Error) => refused.push(err));
    // Loads recover.lua into Redis first: a NOSCRIPT round trip would let the extend go first.
    await q.recoverExpired();
    const added = await q.add({}, { leaseMs: 100 });
    expect(await q.waitFor(added.id)).toBe('second');
    const spans = await waitSpans(name, 2);
    const outcome = (attempt: number) =>
      spans.find((s) => s.attributes['surety.job.attempt'] === attempt)?.attributes['surety.job.outcome'];
    expect(outcome(1)).toBe('lease-lost');
    expect(outcome(2)).toBe('completed');
    // The attempt after the recovery continues the producer's trace too.
    for (const s of spans) expect(isChildOf(s, producerSpan(name))).toBe(true);
    expect(spans.find((s) => s.attributes['surety.job.outcome'] === 'lease-lost')!.status.code).toBe(
      SpanStatusCode.ERROR,
    );
    expect(refused.map((e) => (e as { code?: string }).code)).toContain('ERR_STALE_JOB');
  });

  it('outcomes dead (UnrecoverableError), snoozed and rate-limited are recorded; only the failure is an error', async () => {
    const name = uniqueName();
    const q = queue(name);
    const limitedOnce = new Set<string>();
    worker(name, (job) => {
      if (job.data === 'snooze' && job.snoozes === 0) throw new SnoozeError(0);
      if (job.data === 'limit' && !limitedOnce.has(job.id)) {
        limitedOnce.add(job.id);
        throw new RateLimitError(1);
      }
      if (job.data === 'dead') throw new UnrecoverableError('bad input');
      return null;
    });
    const dead = await q.add('dead');
    const snoozed = await q.add('snooze');
    const limited = await q.add('limit');
    await q.waitFor(snoozed.id);
    await q.waitFor(limited.id);
    await waitUntil(async () => (await q.getJob(dead.id))?.state === 'dead', 'dead');
    const spans = await waitSpans(name, 5);
    const of = (id: string) => spans.filter((s) => s.attributes['messaging.message.id'] === id);
    const [deadSpan] = of(dead.id);
    expect(deadSpan!.attributes['surety.job.outcome']).toBe('dead');
    expect(deadSpan!.status).toMatchObject({ code: SpanStatusCode.ERROR, message: 'bad input' });
    const exception = deadSpan!.events.find((e) => e.name === 'exception');
    expect(exception?.attributes?.['exception.message']).toBe('bad input');
    const outcomes = (id: string) => of(id).map((s) => s.attributes['surety.job.outcome']);
    expect(outcomes(snoozed.id).sort()).toEqual(['completed', 'snoozed']);
    expect(outcomes(limited.id).sort()).toEqual(['completed', 'rate-limited']);
    for (const s of [...of(snoozed.id), ...of(limited.id)]) expect(s.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('a span the processor starts is a child of its process span; an add inside a span is its child', async () => {
    const name = uniqueName();
    const q = queue(name);
    worker(name, async () => {
      await trace.getTracer('app').startActiveSpan('resize image', async (span) => {
        await new Promise((r) => setImmediate(r));
        span.end();
      });
      return 1;
    });
    const added = await trace.getTracer('app').startActiveSpan('http request', async (span) => {
      const out = await q.add({});
      span.end();
      return out;
    });
    await q.waitFor(added.id);
    const [process] = await waitSpans(name, 1);
    const finished = exporter.getFinishedSpans();
    const inner = finished.find((s) => s.name === 'resize image')!;
    const request = finished.find((s) => s.name === 'http request')!;
    const add = producerSpan(name);
    expect(isChildOf(inner, process!)).toBe(true);
    expect(isChildOf(process!, add)).toBe(true);
    expect(isChildOf(add, request)).toBe(true);
  });

  it('addBulk is one add span with the job count, and each job is processed as its child', async () => {
    const name = uniqueName();
    const q = queue(name);
    worker(name, () => null, { concurrency: 3 });
    const added = await q.addBulk([{ data: 1 }, { data: 2 }, { data: 3 }]);
    await Promise.all(added.map((a) => q.waitFor(a.id)));
    const spans = await waitSpans(name, 3);
    const add = producerSpan(name);
    expect(add.attributes['messaging.batch.message_count']).toBe(3);
    expect(spans.map((s) => s.attributes['messaging.message.id']).sort()).toEqual(
      added.map((a) => a.id).sort(),
    );
    for (const s of spans) expect(isChildOf(s, add)).toBe(true);
  });

  it('each schedule occurrence, also those a worker creates, starts a trace linked to the schedule call', async () => {
    const name = uniqueName();
    const q = queue(name);
    worker(name, () => null);
    const spec = { data: {}, immediately: true, limit: 2 } as const;
    await q.schedule('tick', { everyMs: 200 }, spec);
    // The first occurrence comes from schedule(), the second from the worker as the first starts.
    const spans = await waitSpans(name, 2);
    const schedule = producerSpan(name, 'schedule');
    expect(schedule.attributes['surety.schedule.key']).toBe('tick');
    expect(new Set(spans.map((s) => s.attributes['messaging.message.id'])).size).toBe(2);
    for (const s of spans) {
      expect(s.parentSpanContext).toBeUndefined();
      expect(s.spanContext().traceId).not.toBe(schedule.spanContext().traceId);
      expect(s.links.map((l) => l.context.spanId)).toEqual([schedule.spanContext().spanId]);
    }
    // An identical upsert (as at every start) changes nothing: the stored context stays the first call's.
    exporter.reset();
    expect((await q.schedule('tick', { everyMs: 200 }, spec)).changed).toBe(false);
    const stored = JSON.parse((await fx.redis.hget(q.keys.schedules, 'tick'))!) as { trace: string };
    expect(stored.trace).toBe(`00-${schedule.spanContext().traceId}-${schedule.spanContext().spanId}-01`);
    expect(producerSpan(name, 'schedule').spanContext().spanId).not.toBe(schedule.spanContext().spanId);
  });

  it('with the API but no SDK registered, jobs run untraced and carry no trace context', async () => {
    trace.disable();
    context.disable();
    try {
      const name = uniqueName();
      const q = queue(name);
      worker(name, (job) => job.data);
      const added = await q.add('plain');
      expect(await q.waitFor(added.id)).toBe('plain');
      const stored = await fx.redis.hget(q.keys.jobs, added.id);
      expect(stored!.split('\n')[0]!.split('|').length).toBeLessThan(22);
      expect(q.options.tracing.enabled).toBe(true);
    } finally {
      context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
      trace.setGlobalTracerProvider(provider);
    }
    expect(exporter.getFinishedSpans()).toEqual([]);
  });

  it("with no SDK, a caller's propagated context still reaches the processor (only untraced jobs skip the span)", async () => {
    trace.disable();
    try {
      const name = uniqueName();
      const q = queue(name);
      const seen: string[] = [];
      worker(name, () => {
        seen.push(trace.getSpanContext(context.active())?.traceId ?? 'none');
        return null;
      });
      const remote = { traceId: 'ab'.repeat(16), spanId: 'cd'.repeat(8), traceFlags: 1, isRemote: true };
      const carried = await context.with(trace.setSpanContext(context.active(), remote), () =>
        q.add('in a trace'),
      );
      const plain = await q.add('no trace');
      await q.waitFor(carried.id);
      await q.waitFor(plain.id);
      const field = (await fx.redis.hget(q.keys.jobs, carried.id))!.split('\n')[0]!.split('|')[21];
      expect(field).toContain(remote.traceId);
      expect(seen.sort()).toEqual([remote.traceId, 'none'].sort());
    } finally {
      trace.setGlobalTracerProvider(provider);
    }
    expect(exporter.getFinishedSpans()).toEqual([]);
  });

  it('telemetry: false records nothing and stores no trace context; such a job later runs as a root span', async () => {
    const name = uniqueName();
    const quiet = queue(name, { telemetry: false });
    const added = await quiet.add({});
    const stored = await fx.redis.hget(quiet.keys.jobs, added.id);
    expect(stored!.split('\n')[0]!.split('|').length).toBeLessThan(22);
    expect(spansOf(name)).toEqual([]);
    worker(name, () => null);
    await quiet.waitFor(added.id);
    const [process] = await waitSpans(name, 1);
    expect(process!.parentSpanContext).toBeUndefined();
    expect(process!.attributes['surety.job.outcome']).toBe('completed');
  });

  it('a cancelled attempt ends its span as cancelled', async () => {
    const name = uniqueName();
    const q = queue(name);
    worker(name, (job) => new Promise((resolve) => job.signal.addEventListener('abort', resolve)));
    const added = await q.add({});
    await waitUntil(async () => (await q.getJob(added.id))?.state === 'active', 'running');
    await q.cancel(added.id);
    const [process] = await waitSpans(name, 1);
    expect(process!.attributes['surety.job.outcome']).toBe('cancelled');
  });

  it('a sandboxed processor (worker thread) gets its process span, in the worker, under the add span', async () => {
    const name = uniqueName();
    const q = queue(name);
    const w = new Worker(name, new URL('./fixtures/sandbox/default.mjs', import.meta.url), {
      connection: fx.url,
      sandbox: 'thread',
    });
    open.push(w);
    const added = await q.add({ n: 2 });
    expect(await q.waitFor(added.id)).toMatchObject({ doubled: 4 });
    const [process] = await waitSpans(name, 1);
    expect(isChildOf(process!, producerSpan(name))).toBe(true);
    expect(process!.attributes['surety.job.outcome']).toBe('completed');
  });

  it('telemetry.tracerProvider sends the spans there instead of to the global provider', async () => {
    const own = new InMemorySpanExporter();
    const ownProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(own)] });
    const name = uniqueName();
    const q = queue(name, { telemetry: { tracerProvider: ownProvider } });
    worker(name, () => null, { telemetry: { tracerProvider: ownProvider } });
    const added = await q.add({});
    await q.waitFor(added.id);
    await waitUntil(() => processSpans(name, own).length === 1, 'process span in the own provider');
    expect(
      spansOf(name, own)
        .map((s) => s.name)
        .sort(),
    ).toEqual([`add ${name}`, `process ${name}`]);
    expect(spansOf(name)).toEqual([]);
    await ownProvider.shutdown();
  });

  it('the telemetry option is validated, naming the value and what is allowed', () => {
    expect(() => new Queue('q', { connection: fx.url, telemetry: 'yes' as never })).toThrow(
      /Queue options\.telemetry must be true, false or \{ tracerProvider \}.*got "yes"/,
    );
    expect(
      () => new Worker('q', () => null, { connection: fx.url, telemetry: { tracerProvider: {} } as never }),
    ).toThrow(ValidationError);
    expectTypeOf<TracerProvider>().toExtend<TracerProviderLike>();
  });
});

describe('the stored trace field', () => {
  it('round-trips traceparent and a tracestate holding | and %', () => {
    const api = otelApi()!;
    const sc = {
      traceId: '0af7651916cd43dd8448eb211c80319c',
      spanId: 'b7ad6b7169203331',
      traceFlags: 1,
      traceState: api.createTraceState!('vendor=a|b%c,other=x'),
    };
    const field = encodeTraceField(api, sc);
    expect(field).toBe('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01 vendor=a%7Cb%25c,other=x');
    expect(field).not.toMatch(/[|\n]/);
    const back = decodeTraceField(api, field)!;
    expect(back).toMatchObject({ traceId: sc.traceId, spanId: sc.spanId, traceFlags: 1, isRemote: true });
    expect(back.traceState!.serialize()).toBe('vendor=a|b%c,other=x');
    expect(decodeTraceField(api, 'garbage')).toBeUndefined();
    expect(encodeTraceField(api, { traceId: '0'.repeat(32), spanId: '0'.repeat(16), traceFlags: 0 })).toBe(
      '',
    );
  });
});

describe('without @opentelemetry/api', () => {
  it('a process that cannot load the package adds and runs jobs, and refuses only a tracerProvider', async () => {
    const child = fork(
      new URL('./fixtures/otel-absent.ts', import.meta.url).pathname,
      [fx.url, uniqueName()],
      {
        execArgv: [
          '--require',
          new URL('./fixtures/hide-otel.cjs', import.meta.url).pathname,
          '--import',
          'tsx',
        ],
        stdio: 'pipe',
      },
    );
    let stderr = '';
    child.stderr?.on('data', (d) => {
      stderr += String(d);
    });
    const report = await new Promise<Record<string, unknown>>((resolve, reject) => {
      child.once('message', (m) => resolve(m as Record<string, unknown>));
      child.once('exit', (code) => reject(new Error(`child exited ${code} without a report: ${stderr}`)));
    });
    expect(report).toEqual({
      hidden: true,
      api: null,
      tracing: false,
      result: { got: { n: 1 } },
      refused:
        'Queue options.telemetry.tracerProvider needs the @opentelemetry/api package, which could not be loaded',
    });
  });
});
