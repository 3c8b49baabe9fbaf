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
import { OCCURRENCE_PREFIX } from '../store/occurrence-id.js';
import { show } from '../validate.js';
import {
  type Attributes,
  type OtelApi,
  otelApi,
  type SpanLike,
  type SpanOptionsLike,
  type TracerProviderLike,
} from './api.js';
import { OtelBoundary, type TelemetrySink } from './boundary.js';

/** How an attempt ended, as the `surety.job.outcome` attribute of its `process` span. */
export type AttemptOutcome =
  | 'completed'
  | 'retry'
  | 'dead'
  | 'snoozed'
  | 'rate-limited'
  | 'lease-lost'
  | 'cancelled'
  /** It waits for a signal (job.waitForSignal): out of the worker until then. */
  | 'parked'
  /** The processor never started it (it expired while it waited for a sandbox): handed back. */
  | 'handed-back';

/** What a process span needs of a running job (the worker's Job has these). */
export interface TracedAttempt {
  readonly id: string;
  readonly attempt: number;
  readonly name: string;
}

/** The `telemetry` option of a Queue or Worker. */
export type TelemetryOption = boolean | { tracerProvider?: TracerProviderLike };

const SYSTEM = 'surety';

/** Where a Queue's contained telemetry failures go (redis/client.ts's Logger). */
interface Logger {
  warn(message: string): void;
}

export class Tracing {
  /** Every call into OpenTelemetry goes through it (null: tracing off). */
  private readonly otel: OtelBoundary | null;
  /** The API's no-op provider: the global provider's delegate while no SDK is registered. */
  private readonly noop: unknown;
  private idle = false;
  private checkedAt = Number.NEGATIVE_INFINITY;
  /** Each attempt's recording `process` span, until its outcome ends it. */
  private readonly spans = new WeakMap<TracedAttempt, SpanLike>();

  constructor(api: OtelApi | null, provider?: TracerProviderLike, logger?: Logger) {
    const warn: TelemetrySink = (err) => logger?.warn(`surety: ${err.code} ${err.message}`);
    this.otel = api === null ? null : new OtelBoundary(api, provider, warn);
    this.noop =
      provider === undefined && api?.ProxyTracerProvider
        ? this.otel!.call('ProxyTracerProvider', () => new api.ProxyTracerProvider!().getDelegate(), {})
        : {};
  }

  /**
   * Where a call into OpenTelemetry that threw is reported (once per kind of call): a Worker sends it
   * to its `error` event; by default (a Queue) it goes to the `logger`.
   */
  reportTo(sink: TelemetrySink): void {
    this.otel?.reportTo(sink);
  }

  /**
   * True while no SDK is registered (and no provider was given): a span would be a non-recording
   * no-op, so an attempt without a producer context skips it altogether. @opentelemetry/api is nearly
   * always installed (prom-client depends on it), so this is the path of most workers: measured at
   * about 4 µs of worker CPU per job before it was taken (bench cost scenario). A global provider from
   * another copy of the API never compares equal, and takes the full path, which is always right.
   */
  private noSdk(otel: OtelBoundary): boolean {
    // Asked at most once a second: reading the global provider costs more than the rest of this
    // path, and an SDK registered after start still gets spans a second later.
    const now = Date.now();
    if (now - this.checkedAt > 1_000) {
      this.idle = otel.globalDelegate() === this.noop;
      this.checkedAt = now;
    }
    return this.idle;
  }

  get enabled(): boolean {
    return this.otel !== null;
  }

  /**
   * Runs an add call (`operation` add or schedule, of `count` jobs) inside its PRODUCER span; `run`
   * gets the trace field to store in the jobs. `idOf` names the job of a single add once it is known.
   * Whatever the tracer does, `run` is called once and its answer is the answer.
   */
  async produce<T>(
    queue: string,
    operation: 'add' | 'schedule',
    attributes: Attributes,
    run: (trace: string) => Promise<T>,
    idOf?: (out: T) => string,
  ): Promise<T> {
    const otel = this.otel;
    if (otel === null) return run('');
    const active = otel.activeContext();
    // No SDK, and no caller's span whose context the jobs could carry: nothing to trace.
    if (this.noSdk(otel) && !otel.hasSpan(active)) return run('');
    const span = otel.startSpan(
      `${operation} ${queue}`,
      {
        kind: otel.api.SpanKind.PRODUCER,
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
    if (span === undefined) return run('');
    const field = otel.traceField(span);
    const recording = otel.isRecording(span);
    // No SDK and no caller's trace (a non-recording span with no valid context): nothing to carry.
    if (field === '' && !recording) return run('');
    const inside = otel.withSpan(active, span);
    let out: T;
    try {
      out = await (inside === undefined ? run(field) : otel.run(inside, run, field));
    } catch (err) {
      otel.setError(span, err);
      otel.end(span);
      throw err;
    }
    if (idOf && recording) otel.setAttributes(span, { 'messaging.message.id': idOf(out) });
    otel.end(span);
    return out;
  }

  /**
   * Wraps a processor: each call runs inside the attempt's CONSUMER span (user spans nest under it).
   * The span is the child of the producer's context the job carries; a schedule occurrence's span
   * starts a trace of its own, linked to the schedule call's context (see docs/telemetry.md). A tracer
   * that throws costs the attempt its span, never its run.
   */
  wrap<J extends TracedAttempt, R>(
    queue: string,
    processor: (job: J) => R,
    /** The trace field the job carries ('' = none). */
    traceOf: (job: J) => string,
  ): (job: J) => R {
    const otel = this.otel;
    if (otel === null) return processor;
    return (job: J) => {
      const trace = traceOf(job);
      if (trace === '' && this.noSdk(otel)) return processor(job);
      const remote = trace === '' ? undefined : otel.decode(trace);
      let parent = otel.api.ROOT_CONTEXT;
      const options: SpanOptionsLike = {
        kind: otel.api.SpanKind.CONSUMER,
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
        else parent = otel.withRemoteParent(parent, remote);
      }
      const span = otel.startSpan(`process ${queue}`, options, parent);
      if (span === undefined) return processor(job);
      const recording = otel.isRecording(span);
      // No SDK and no producer context: there is nothing to record or to hand to user code.
      if (!recording && !otel.hasValidContext(span)) return processor(job);
      if (recording) this.spans.set(job, span);
      const inside = otel.withSpan(parent, span);
      return inside === undefined ? processor(job) : otel.run(inside, processor, job);
    };
  }

  /**
   * Ends an attempt's span with its outcome (the outcome written, or refused by the fence). Never
   * throws: the callers go on to emit the outcome's event.
   */
  ended(job: TracedAttempt, outcome: AttemptOutcome, cause?: Error): void {
    const span = this.spans.get(job);
    const otel = this.otel;
    if (span === undefined || otel === null) return;
    this.spans.delete(job);
    otel.setAttributes(span, { 'surety.job.outcome': outcome });
    if (outcome === 'retry' || outcome === 'dead') otel.setError(span, cause);
    else if (outcome === 'lease-lost') {
      otel.setErrorStatus(span, 'the lease was lost; the outcome was refused');
    }
    otel.end(span);
  }
}

/** Tracing turned off (`telemetry: false`, or no API package): every hook returns at once. */
export const TRACING_OFF = new Tracing(null);

/** Resolves the `telemetry` option (default on: spans go to the globally registered SDK, if any). */
export function resolveTelemetry(name: string, value: unknown, logger?: Logger): Tracing {
  if (value === false) return TRACING_OFF;
  if (value === undefined || value === true) {
    const api = otelApi();
    return api === null ? TRACING_OFF : new Tracing(api, undefined, logger);
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
  return new Tracing(api, provider as TracerProviderLike | undefined, logger);
}
