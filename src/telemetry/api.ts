/**
 * The OpenTelemetry API, loaded if the application has it: `@opentelemetry/api` is an optional peer
 * dependency, so Surety must load and run without it.
 *
 * Loaded synchronously (createRequire), once, on first use, not with a dynamic import(): an import
 * resolves a turn later, so the first jobs added or run after start would miss their spans. The API
 * keeps what the application registers (tracer provider, context manager) on a global symbol shared by
 * its CommonJS and ESM builds, so the copy loaded here sees the same SDK as the application's import.
 *
 * The types below are the few parts of the API Surety calls, written out instead of imported: the
 * published declarations must not name a package the user may not have.
 */
import { createRequire } from 'node:module';

export type Attributes = Record<string, string | number | boolean>;

/** An OpenTelemetry Context (immutable). */
export interface OtelContext {
  getValue(key: symbol): unknown;
}

export interface TraceStateLike {
  serialize(): string;
}

export interface SpanContextLike {
  traceId: string;
  spanId: string;
  traceFlags: number;
  isRemote?: boolean;
  traceState?: TraceStateLike;
}

export interface SpanLike {
  spanContext(): SpanContextLike;
  setAttribute(key: string, value: string | number | boolean): unknown;
  recordException(exception: Error): void;
  setStatus(status: { code: number; message?: string }): unknown;
  isRecording(): boolean;
  end(): void;
}

export interface SpanOptionsLike {
  kind?: number;
  attributes?: Attributes;
  links?: { context: SpanContextLike }[];
  root?: boolean;
}

export interface TracerLike {
  startSpan(name: string, options?: SpanOptionsLike, context?: OtelContext): SpanLike;
}

/** What the `telemetry.tracerProvider` option takes: an OpenTelemetry TracerProvider. */
export interface TracerProviderLike {
  getTracer(name: string, version?: string): unknown;
}

export interface OtelApi {
  trace: {
    getTracerProvider(): TracerProviderLike;
    setSpan(context: OtelContext, span: SpanLike): OtelContext;
    setSpanContext(context: OtelContext, spanContext: SpanContextLike): OtelContext;
    getSpan?(context: OtelContext): SpanLike | undefined;
  };
  context: {
    active(): OtelContext;
    with<A extends unknown[], R>(
      context: OtelContext,
      fn: (...args: A) => R,
      thisArg?: unknown,
      ...args: A
    ): R;
  };
  ROOT_CONTEXT: OtelContext;
  SpanKind: { PRODUCER: number; CONSUMER: number };
  SpanStatusCode: { ERROR: number };
  isSpanContextValid(spanContext: SpanContextLike): boolean;
  /** From API 1.1 on; without it a stored tracestate is dropped. */
  createTraceState?(raw: string): TraceStateLike;
  /** The global provider's class: its `getDelegate()` is the no-op provider until an SDK registers. */
  ProxyTracerProvider?: new () => { getDelegate(): unknown };
}

/** The module name, in a variable so that no bundler or type checker insists on finding it. */
const API_MODULE = '@opentelemetry/api';
let loaded: OtelApi | null | undefined;

/** The OpenTelemetry API, or null when the package is not installed (then tracing is off). */
export function otelApi(): OtelApi | null {
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)(API_MODULE) as OtelApi;
    } catch {
      loaded = null;
    }
  }
  return loaded;
}
