/**
 * The one place Surety calls into OpenTelemetry. The tracer provider, its spans and the context
 * manager are the application's code (or an SDK's, or an instrumentation's): any of them may throw,
 * and none of them may change what becomes of a job. Every call goes through `call` below, which
 * catches what it throws, reports it once per kind of call (TelemetryError, ERR_TELEMETRY) and
 * answers a fallback that leaves that piece of the trace out: no span, no attribute, no context.
 *
 * `run` is the one call that carries Surety's own work (the processor, the add): it runs that work
 * exactly once whatever the context manager does (throws before or after it, never calls it, calls it
 * twice), and hands back what the work itself returned or threw.
 */

import { isA, normaliseThrown } from '../error-normaliser.js';
import { TelemetryError } from '../errors.js';
import type {
  Attributes,
  OtelApi,
  OtelContext,
  SpanContextLike,
  SpanLike,
  SpanOptionsLike,
  TracerLike,
  TracerProviderLike,
} from './api.js';
import { decodeTraceField, encodeTraceField } from './trace-field.js';

/** Where a contained failure goes: a Worker's `error` event, else the logger. */
export type TelemetrySink = (err: TelemetryError) => void;

export class OtelBoundary {
  /** The kinds of call already reported: each is reported once per Queue or Worker, not per job. */
  private readonly reported = new Set<string>();
  private tracerCache: TracerLike | undefined;

  constructor(
    readonly api: OtelApi,
    private readonly provider: TracerProviderLike | undefined,
    private sink: TelemetrySink,
  ) {}

  /** Sends contained failures to `sink` from now on. */
  reportTo(sink: TelemetrySink): void {
    this.sink = sink;
  }

  /** `fn()`, or `fallback` if it threw (reported once per `kind`). */
  call<T>(kind: string, fn: () => T, fallback: T): T {
    try {
      return fn();
    } catch (err) {
      this.failed(kind, err);
      return fallback;
    }
  }

  private failed(kind: string, err: unknown): void {
    if (this.reported.has(kind)) return;
    this.reported.add(kind);
    try {
      this.sink(new TelemetryError(kind, normaliseThrown(err).message, err));
    } catch {
      // A sink that throws (a logger) has nobody to tell: the trace is already best effort.
    }
  }

  // ---- the provider and the context manager --------------------------------------------------

  /** The global tracer provider's delegate (undefined if it has none, or reading it threw). */
  globalDelegate(): unknown {
    return this.call(
      'getTracerProvider',
      () => (this.api.trace.getTracerProvider() as { getDelegate?: () => unknown }).getDelegate?.(),
      undefined,
    );
  }

  activeContext(): OtelContext {
    return this.call('context.active', () => this.api.context.active(), this.api.ROOT_CONTEXT);
  }

  /** True when `ctx` holds a span (a caller's trace to continue). */
  hasSpan(ctx: OtelContext): boolean {
    return this.call('trace.getSpan', () => this.api.trace.getSpan?.(ctx) !== undefined, false);
  }

  /** `ctx` with `span` as its active span, or undefined if that failed. */
  withSpan(ctx: OtelContext, span: SpanLike): OtelContext | undefined {
    return this.call('trace.setSpan', () => this.api.trace.setSpan(ctx, span), undefined);
  }

  /** `ctx` with a remote parent, or `ctx` itself if that failed (the span becomes a root). */
  withRemoteParent(ctx: OtelContext, remote: SpanContextLike): OtelContext {
    return this.call('trace.setSpanContext', () => this.api.trace.setSpanContext(ctx, remote), ctx);
  }

  /**
   * `work(arg)` inside `ctx`. The work runs exactly once: if the context manager throws before calling
   * it, or returns without calling it, it runs outside the context; what it returned or threw is the
   * answer, whatever the context manager did after.
   */
  run<A, R>(ctx: OtelContext, work: (arg: A) => R, arg: A): R {
    // An object, not three lets: the closure changes it, and TypeScript does not see that.
    const done: { state: 'not called' | 'returned' | 'threw'; value?: R; thrown?: unknown } = {
      state: 'not called',
    };
    const once = (a: A): R => {
      if (done.state === 'returned') return done.value as R;
      if (done.state === 'threw') throw done.thrown;
      try {
        done.value = work(a);
        done.state = 'returned';
        return done.value;
      } catch (err) {
        done.thrown = err;
        done.state = 'threw';
        throw err;
      }
    };
    try {
      this.api.context.with(ctx, once, undefined, arg);
    } catch (err) {
      // The work's own throw passes through; anything else is the context manager's.
      if (done.state !== 'threw') this.failed('context.with', err);
    }
    if (done.state === 'not called') {
      this.failed('context.with', new Error('context.with returned without calling its function'));
      return once(arg);
    }
    if (done.state === 'threw') throw done.thrown;
    return done.value as R;
  }

  // ---- spans -----------------------------------------------------------------------------------

  /** A started span, or undefined if the provider, its tracer or startSpan threw (or gave no span). */
  startSpan(name: string, options: SpanOptionsLike, ctx: OtelContext): SpanLike | undefined {
    const tracer = this.tracer();
    if (tracer === undefined) return undefined;
    const span = this.call('startSpan', () => tracer.startSpan(name, options, ctx), undefined);
    return typeof span === 'object' && span !== null ? span : undefined;
  }

  /**
   * The tracer, fetched once: without a provider of its own it is the API's proxy tracer, which follows
   * the global provider, so an SDK registered after the Queue or Worker was built still gets spans.
   */
  private tracer(): TracerLike | undefined {
    this.tracerCache ??= this.call(
      'getTracer',
      () => (this.provider ?? this.api.trace.getTracerProvider()).getTracer('surety') as TracerLike,
      undefined,
    );
    return this.tracerCache;
  }

  isRecording(span: SpanLike): boolean {
    return this.call('span.isRecording', () => span.isRecording() === true, false);
  }

  /** The span's context as the job's trace field ('' when it has no valid one). */
  traceField(span: SpanLike): string {
    return this.call('span.spanContext', () => encodeTraceField(this.api, span.spanContext()), '');
  }

  /** True when the span has a valid context (one worth handing to the processor). */
  hasValidContext(span: SpanLike): boolean {
    return this.call('span.spanContext', () => this.api.isSpanContextValid(span.spanContext()), false);
  }

  setAttributes(span: SpanLike, attributes: Attributes): void {
    for (const [key, value] of Object.entries(attributes))
      this.call('span.setAttribute', () => span.setAttribute(key, value), undefined);
  }

  /** Marks the span as failed by `err` (the exception recorded, status ERROR with its message). */
  setError(span: SpanLike, err: unknown): void {
    if (isA(err, Error))
      this.call('span.recordException', () => span.recordException(err as Error), undefined);
    this.setErrorStatus(span, normaliseThrown(err).message);
  }

  setErrorStatus(span: SpanLike, message: string): void {
    this.call(
      'span.setStatus',
      () => span.setStatus({ code: this.api.SpanStatusCode.ERROR, message }),
      undefined,
    );
  }

  end(span: SpanLike): void {
    this.call('span.end', () => span.end(), undefined);
  }

  // ---- the stored trace field ------------------------------------------------------------------

  /** The remote span context a job's field holds, or undefined (none, invalid, or reading it threw). */
  decode(field: string): SpanContextLike | undefined {
    return this.call('trace field', () => decodeTraceField(this.api, field), undefined);
  }
}
