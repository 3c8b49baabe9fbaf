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
  CONTEXT_FAULTS,
  type ContextFault,
  ThrowingContextManager,
  ThrowingTracerProvider,
  type TracerFault,
} from '../../chaos/throwing-tracer.js';
import {
  type Job,
  Queue,
  type QueueOptions,
  RateLimitError,
  SnoozeError,
  type SuretyError,
  type TelemetryError,
  UnrecoverableError,
  ValidationError,
  Worker,
  type WorkerOptions,
} from '../../src/index.js';
import type { OtelApi, TracerProviderLike } from '../../src/telemetry/api.js';
import { otelApi } from '../../src/telemetry/api.js';
import { OtelBoundary } from '../../src/telemetry/boundary.js';
import { decodeTraceField, encodeTraceField } from '../../src/telemetry/trace-field.js';
import { closeAfterEach, uniqueName, useRedis, waitUntil } from '../helpers/setup.js';

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
    const w = new Worker(name, new URL('../fixtures/sandbox/default.mjs', import.meta.url), {
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

/** What a Worker reported: its `error` events, and how many `completed`, `failed`, `leaseLost` events. */
function watch(w: Worker) {
  const seen = { errors: [] as SuretyError[], completed: 0, failed: 0, leaseLost: 0 };
  w.on('error', (err) => seen.errors.push(err as SuretyError));
  w.on('completed', () => seen.completed++);
  w.on('failed', () => seen.failed++);
  w.on('leaseLost', () => seen.leaseLost++);
  return seen;
}
function telemetryCalls(errors: readonly SuretyError[]): string[] {
  expect(errors.map((e) => e.code)).toEqual(errors.map(() => 'ERR_TELEMETRY'));
  return errors.map((e) => (e as TelemetryError).call);
}

/** Adds 4 jobs that complete and 2 that end dead, each with one attempt; runs them and checks every event. */
async function runSixJobs(name: string, q: Queue, workerOpts: WorkerOptions) {
  const runs = new Map<string, number>();
  const w = worker(
    name,
    (job) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
      if (job.data === 'dead') throw new UnrecoverableError('bad input');
      return job.data;
    },
    workerOpts,
  );
  const seen = watch(w);
  const data = ['a', 'b', 'dead', 'c', 'dead', 'd'];
  const ids: string[] = [];
  for (const d of data) ids.push((await q.add(d, { maxAttempts: 1 })).id);
  await waitUntil(() => seen.completed + seen.failed === 6, 'an event per job');
  for (const [i, id] of ids.entries()) {
    const info = await q.getJob(id);
    expect(info?.state).toBe(data[i] === 'dead' ? 'dead' : 'completed');
    if (data[i] !== 'dead') expect(info?.result).toBe(data[i]);
    expect(runs.get(id)).toBe(1);
  }
  expect(seen).toMatchObject({ completed: 4, failed: 2, leaseLost: 0 });
  return seen;
}

describe('a tracer that throws never changes an outcome', () => {
  const workerFaults: TracerFault[] = [
    'getTracer',
    'startSpan',
    'span.isRecording',
    'span.setAttribute',
    'span.setStatus',
    'span.recordException',
    'span.end',
  ];
  it.each(workerFaults)(
    "a worker's tracer whose %s throws: every job runs once, every event comes, one ERR_TELEMETRY",
    async (fault) => {
      const name = uniqueName();
      const tracer = new ThrowingTracerProvider(provider, { faults: [fault] });
      const seen = await runSixJobs(name, queue(name), { telemetry: { tracerProvider: tracer } });
      expect(tracer.thrown[fault]).toBeGreaterThan(0);
      // Reported once, however many calls threw; nothing else (no refused outcome, no connection error).
      expect(telemetryCalls(seen.errors)).toEqual([fault]);
    },
  );

  const producerFaults: TracerFault[] = [
    'getTracer',
    'startSpan',
    'span.spanContext',
    'span.isRecording',
    'span.setAttribute',
    'span.setStatus',
    'span.recordException',
    'span.end',
  ];
  it.each(producerFaults)(
    "a queue's tracer whose %s throws: add, addBulk and schedule resolve, each job written once",
    async (fault) => {
      const name = uniqueName();
      const tracer = new ThrowingTracerProvider(provider, { faults: [fault] });
      const warnings: string[] = [];
      const q = queue(name, {
        telemetry: { tracerProvider: tracer },
        logger: { warn: (m) => warnings.push(m) },
      });
      const one = await q.add({ n: 1 });
      const bulk = await q.addBulk([{ data: { n: 2 } }, { data: { n: 3 } }]);
      expect((await q.schedule('tick', { everyMs: 60_000 }, { data: {} })).changed).toBe(true);
      // A failed add still fails as it would have, its span (if any) marked.
      await expect(q.add({ n: 4 }, { id: one.id, maxAttempts: 0 })).rejects.toBeInstanceOf(ValidationError);
      for (const id of [one.id, ...bulk.map((b) => b.id)])
        expect((await q.getJob(id))?.state).toBe('waiting');
      expect(await q.counts()).toMatchObject({ waiting: 3, delayed: 1 });
      expect(tracer.thrown[fault]).toBeGreaterThan(0);
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(new RegExp(`^surety: ERR_TELEMETRY OpenTelemetry's ${fault} threw`));
    },
  );

  it.each(CONTEXT_FAULTS)(
    'a context manager whose %s throws: the add resolves, the processor runs once and its result stands',
    async (fault: ContextFault) => {
      const throwing = new ThrowingContextManager(new AsyncLocalStorageContextManager(), {
        faults: [fault],
      });
      context.disable();
      context.setGlobalContextManager(throwing.enable());
      try {
        const name = uniqueName();
        const warnings: string[] = [];
        const q = queue(name, { logger: { warn: (m) => warnings.push(m) } });
        const seen = await runSixJobs(name, q, {});
        expect(throwing.thrown[fault]).toBeGreaterThan(0);
        // The SDK's own span processor calls the context manager too (on span.end): contained as well.
        // Each of the Queue (logger) and the Worker (error event) reports a kind of call once.
        const byWorker = telemetryCalls(seen.errors);
        const byQueue = warnings.map((m) => /OpenTelemetry's (\S+)/.exec(m)?.[1]);
        expect([...byWorker, ...byQueue]).toContain(
          fault === 'context.active' ? 'context.active' : 'context.with',
        );
        expect(new Set(byWorker).size).toBe(byWorker.length);
        expect(new Set(byQueue).size).toBe(byQueue.length);
      } finally {
        context.disable();
        context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
      }
    },
  );

  it('a tracer and a context manager throwing at random (seeded) on both sides change nothing', async () => {
    const name = uniqueName();
    const all: TracerFault[] = ['startSpan', 'span.isRecording', 'span.spanContext', 'span.setAttribute'];
    all.push('span.setStatus', 'span.recordException', 'span.end');
    const producer = new ThrowingTracerProvider(provider, { faults: all, rate: 0.3, seed: 33 });
    const consumer = new ThrowingTracerProvider(provider, { faults: all, rate: 0.3, seed: 34 });
    const q = queue(name, { telemetry: { tracerProvider: producer }, logger: { warn: () => {} } });
    const runs = new Map<string, number>();
    const w = worker(
      name,
      (job) => {
        runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
        if ((job.data as number) % 5 === 0) throw new UnrecoverableError('every fifth');
        return job.data;
      },
      { telemetry: { tracerProvider: consumer }, concurrency: 4 },
    );
    const seen = watch(w);
    const ids: string[] = [];
    for (let n = 1; n <= 20; n++) ids.push((await q.add(n, { maxAttempts: 1 })).id);
    ids.push(
      ...(await q.addBulk([21, 22, 23, 24, 25].map((n) => ({ data: n, opts: { maxAttempts: 1 } })))).map(
        (a) => a.id,
      ),
    );
    await waitUntil(() => seen.completed + seen.failed === 25, 'an event per job');
    expect(seen).toMatchObject({ completed: 20, failed: 5, leaseLost: 0 });
    expect(await q.counts()).toMatchObject({ waiting: 0, active: 0, completed: 20, dead: 5 });
    for (const id of ids) expect(runs.get(id)).toBe(1);
    expect(producer.totalThrown).toBeGreaterThan(0);
    expect(consumer.totalThrown).toBeGreaterThan(0);
    const calls = telemetryCalls(seen.errors);
    expect(new Set(calls).size).toBe(calls.length);
  });
});

describe('the OpenTelemetry boundary', () => {
  /** A boundary over the real API, whose context manager `with` is replaced by `withImpl`. */
  function boundaryWith(withImpl: (fn: (arg: number) => unknown, arg: number) => unknown) {
    const api = otelApi()!;
    const fake = {
      ...api,
      context: {
        ...api.context,
        with: (_c: unknown, fn: never, _t: unknown, arg: never) => withImpl(fn, arg),
      },
    };
    const reported: TelemetryError[] = [];
    const otel = new OtelBoundary(fake as unknown as OtelApi, undefined, (e) => reported.push(e));
    return { otel, reported, ctx: api.ROOT_CONTEXT };
  }

  it('runs the work exactly once whatever the context manager does, and answers what the work did', () => {
    let calls = 0;
    const work = (n: number) => {
      calls++;
      if (n < 0) throw new Error('work threw');
      return n * 2;
    };
    const never = boundaryWith(() => undefined);
    expect(never.otel.run(never.ctx, work, 1)).toBe(2);
    expect(never.reported.map((e) => e.call)).toEqual(['context.with']);
    const twice = boundaryWith((fn, arg) => {
      fn(arg);
      return fn(arg);
    });
    expect(twice.otel.run(twice.ctx, work, 2)).toBe(4);
    const lies = boundaryWith((fn, arg) => {
      fn(arg);
      return 'not the answer';
    });
    expect(lies.otel.run(lies.ctx, work, 3)).toBe(6);
    const swallows = boundaryWith((fn, arg) => {
      try {
        fn(arg);
      } catch {}
      return 'swallowed';
    });
    expect(() => swallows.otel.run(swallows.ctx, work, -1)).toThrow('work threw');
    expect(swallows.reported).toEqual([]);
    expect(calls).toBe(4);
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
      new URL('../fixtures/otel-absent.ts', import.meta.url).pathname,
      [fx.url, uniqueName()],
      {
        execArgv: [
          '--require',
          new URL('../fixtures/hide-otel.cjs', import.meta.url).pathname,
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
