/**
 * Spans for OpenTelemetry (docs/telemetry.md): one PRODUCER span per add call (add, addBulk,
 * addBatch, schedule) and one CONSUMER span per attempt (`process`), whose context the job carries
 * (trace-field.ts), so the worker's span continues the producer's trace on every attempt.
 *
 * With the API package absent, or `telemetry: false`, every hook is TRACING_OFF's: a property test and
 * a return. With the API present but no SDK registered, the API's no-op tracer answers: a
 * non-recording span per call, nothing stored, and the processor runs without a context switch.
 */
import { ValidationError } from '../errors.js';
import { OCCURRENCE_PREFIX } from '../occurrence-id.js';
import { show } from '../validate.js';
import {
  type Attributes,
  type OtelApi,
  otelApi,
  type SpanLike,
  type SpanOptionsLike,
  type TracerLike,
  type TracerProviderLike,
} from './api.js';
import { decodeTraceField, encodeTraceField } from './trace-field.js';

/** How an attempt ended, as the `surety.job.outcome` attribute of its `process` span. */
export type AttemptOutcome =
  | 'completed'
  | 'retry'
  | 'dead'
  | 'snoozed'
  | 'rate-limited'
  | 'lease-lost'
  | 'cancelled';

/** What a process span needs of a running job (the worker's Job has these). */
export interface TracedAttempt {
  readonly id: string;
  readonly attempt: number;
  readonly name: string;
  /** The stored trace field ('' = none). */
  readonly trace: string;
  /** The attempt's recording span, until its outcome ends it. */
  span: SpanLike | undefined;
}

/** The `telemetry` option of a Queue or Worker. */
export type TelemetryOption = boolean | { tracerProvider?: TracerProviderLike };

const SYSTEM = 'surety';

export class Tracing {
  private tracerCache: TracerLike | undefined;
  /** The API's no-op provider: the global provider's delegate while no SDK is registered. */
  private readonly noop: unknown;
  private idle = false;
  private checkedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly api: OtelApi | null,
    private readonly provider?: TracerProviderLike,
  ) {
    this.noop =
      provider === undefined && api?.ProxyTracerProvider ? new api.ProxyTracerProvider().getDelegate() : {};
  }

  /**
   * True while no SDK is registered (and no provider was given): a span would be a non-recording
   * no-op, so an attempt without a producer context skips it altogether. @opentelemetry/api is nearly
   * always installed (prom-client depends on it), so this is the path of most workers: measured at
   * about 4 µs of worker CPU per job before it was taken (bench cost scenario). A global provider from
   * another copy of the API never compares equal, and takes the full path, which is always right.
   */
  private noSdk(api: OtelApi): boolean {
    // Asked at most once a second: reading the global provider costs more than the rest of this
    // path, and an SDK registered after start still gets spans a second later.
    const now = Date.now();
    if (now - this.checkedAt > 1_000) {
      const global = api.trace.getTracerProvider() as { getDelegate?: () => unknown };
      this.idle = global.getDelegate?.() === this.noop;
      this.checkedAt = now;
    }
    return this.idle;
  }

  get enabled(): boolean {
    return this.api !== null;
  }

  /**
   * The tracer, fetched once: without a provider of its own it is the API's proxy tracer, which follows
   * the global provider, so an SDK registered after the Queue or Worker was built still gets spans.
   */
  private tracer(api: OtelApi): TracerLike {
    this.tracerCache ??= (this.provider ?? api.trace.getTracerProvider()).getTracer(SYSTEM) as TracerLike;
    return this.tracerCache;
  }

  /**
   * Runs an add call (`operation` add or schedule, of `count` jobs) inside its PRODUCER span; `run`
   * gets the trace field to store in the jobs. `idOf` names the job of a single add once it is known.
   */
  async produce<T>(
    queue: string,
    operation: 'add' | 'schedule',
    attributes: Attributes,
    run: (trace: string) => Promise<T>,
    idOf?: (out: T) => string,
  ): Promise<T> {
    const api = this.api;
    if (api === null) return run('');
    const active = api.context.active();
    // No SDK, and no caller's span whose context the jobs could carry: nothing to trace.
    if (this.noSdk(api) && api.trace.getSpan?.(active) === undefined) return run('');
    const span = this.tracer(api).startSpan(
      `${operation} ${queue}`,
      {
        kind: api.SpanKind.PRODUCER,
        attributes: {
          'messaging.system': SYSTEM,
          'messaging.destination.name': queue,
          'messaging.operation.name': operation,
          'messaging.operation.type': 'send',
          ...attributes,
        },
      },
      active,
    );
    const field = encodeTraceField(api, span.spanContext());
    // No SDK and no caller's trace (a non-recording span with no valid context): nothing to carry.
    if (field === '' && !span.isRecording()) return run('');
    try {
      const out = await api.context.with(
        api.trace.setSpan(active, span),
        run,
        undefined,
        encodeTraceField(api, span.spanContext()),
      );
      if (idOf && span.isRecording()) span.setAttribute('messaging.message.id', idOf(out));
      return out;
    } catch (err) {
      failed(api, span, err);
      throw err;
    } finally {
      span.end();
    }
  }

  /**
   * Wraps a processor: each call runs inside the attempt's CONSUMER span (user spans nest under it).
   * The span is the child of the producer's context the job carries; a schedule occurrence's span
   * starts a trace of its own, linked to the schedule call's context (see docs/telemetry.md).
   */
  wrap<J extends TracedAttempt, R>(queue: string, processor: (job: J) => R): (job: J) => R {
    const api = this.api;
    if (api === null) return processor;
    return (job: J) => {
      if (job.trace === '' && this.noSdk(api)) return processor(job);
      const remote = job.trace === '' ? undefined : decodeTraceField(api, job.trace);
      let parent = api.ROOT_CONTEXT;
      const options: SpanOptionsLike = {
        kind: api.SpanKind.CONSUMER,
        attributes: {
          'messaging.system': SYSTEM,
          'messaging.destination.name': queue,
          'messaging.operation.name': 'process',
          'messaging.operation.type': 'process',
          'messaging.message.id': job.id,
          'surety.job.attempt': job.attempt,
        },
      };
      if (job.name !== '') options.attributes!['surety.job.name'] = job.name;
      if (remote !== undefined) {
        if (job.id.startsWith(OCCURRENCE_PREFIX)) options.links = [{ context: remote }];
        else parent = api.trace.setSpanContext(parent, remote);
      }
      const span = this.tracer(api).startSpan(`process ${queue}`, options, parent);
      // No SDK and no producer context: there is nothing to record or to hand to user code.
      if (!span.isRecording() && !api.isSpanContextValid(span.spanContext())) return processor(job);
      if (span.isRecording()) job.span = span;
      return api.context.with(api.trace.setSpan(parent, span), processor, undefined, job);
    };
  }

  /** Ends an attempt's span with its outcome (the outcome written, or refused by the fence). */
  ended(job: TracedAttempt, outcome: AttemptOutcome, cause?: Error): void {
    const span = job.span;
    if (span === undefined || this.api === null) return;
    job.span = undefined;
    span.setAttribute('surety.job.outcome', outcome);
    if (outcome === 'retry' || outcome === 'dead') failed(this.api, span, cause);
    else if (outcome === 'lease-lost') {
      span.setStatus({
        code: this.api.SpanStatusCode.ERROR,
        message: 'the lease was lost; the outcome was refused',
      });
    }
    span.end();
  }
}

function failed(api: OtelApi, span: SpanLike, err: unknown): void {
  if (err instanceof Error) span.recordException(err);
  span.setStatus({
    code: api.SpanStatusCode.ERROR,
    message: err instanceof Error ? err.message : String(err),
  });
}

/** Tracing turned off (`telemetry: false`, or no API package): every hook returns at once. */
export const TRACING_OFF = new Tracing(null);

/** Resolves the `telemetry` option (default on: spans go to the globally registered SDK, if any). */
export function resolveTelemetry(name: string, value: unknown): Tracing {
  if (value === false) return TRACING_OFF;
  if (value === undefined || value === true) {
    const api = otelApi();
    return api === null ? TRACING_OFF : new Tracing(api);
  }
  const provider = (value as { tracerProvider?: unknown } | null)?.tracerProvider;
  if (
    typeof value !== 'object' ||
    value === null ||
    Object.keys(value).some((k) => k !== 'tracerProvider') ||
    (provider !== undefined &&
      (provider === null || typeof (provider as TracerProviderLike).getTracer !== 'function'))
  ) {
    throw new ValidationError(
      `${name}.telemetry must be true, false or { tracerProvider } (an OpenTelemetry TracerProvider, with a getTracer method), got ${show(value)}`,
    );
  }
  const api = otelApi();
  if (api === null) {
    throw new ValidationError(
      `${name}.telemetry.tracerProvider needs the @opentelemetry/api package, which could not be loaded`,
    );
  }
  return new Tracing(api, provider as TracerProviderLike | undefined);
}
