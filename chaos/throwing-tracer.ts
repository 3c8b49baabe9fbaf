/**
 * OpenTelemetry parts that throw, on purpose: a tracer provider and a context manager wrapping real
 * ones, whose calls of the chosen kinds throw (always, or at random from a seed). Tracing must never
 * change what becomes of a job (docs/telemetry.md), so tests and the chaos workload hand these to
 * Queues and Workers and check that every job still runs, completes and is reported as without them.
 *
 *   const tracer = new ThrowingTracerProvider(realProvider, { faults: ['span.end'], rate: 0.3, seed: 7 });
 *   new Worker(name, fn, { telemetry: { tracerProvider: tracer } });
 *   tracer.thrown // { 'span.end': 12 } : how many calls threw, per kind
 *
 * With the same seed and the same sequence of calls, the same calls throw (one seeded stream per
 * provider or context manager, drawn once per call of a listed kind).
 */
import type { Context, ContextManager, Span, Tracer, TracerProvider } from '@opentelemetry/api';
import { Rng } from './rng.js';

/** The calls that can be made to throw. `span.*` apply to every span the provider's tracers start. */
export const TRACER_FAULTS = [
  'getTracer',
  'startSpan',
  'startActiveSpan',
  'span.end',
  'span.setAttribute',
  'span.setAttributes',
  'span.setStatus',
  'span.recordException',
  'span.addEvent',
  'span.isRecording',
  'span.spanContext',
  'span.updateName',
] as const;
export type TracerFault = (typeof TRACER_FAULTS)[number];

/** `context.with:before` throws instead of calling the function; `context.with:after` once it returned. */
export const CONTEXT_FAULTS = ['context.active', 'context.with:before', 'context.with:after'] as const;
export type ContextFault = (typeof CONTEXT_FAULTS)[number];

export interface ThrowingOptions<F extends string> {
  /** Which calls may throw. */
  faults: readonly F[];
  /** The chance that a call of a listed kind throws, in [0, 1]. Default 1: every such call throws. */
  rate?: number;
  /** Seed of the draws (used when rate < 1). Default 1. */
  seed?: number;
}

/** What a faulty call throws: `fault` names the call. */
export class InjectedTracerFault extends Error {
  constructor(readonly fault: string) {
    super(`injected fault: ${fault} threw`);
    this.name = 'InjectedTracerFault';
  }
}

/** Draws, per call, whether it throws; counts what was thrown. */
class Faults<F extends string> {
  readonly thrown: Partial<Record<F, number>> = {};
  private readonly kinds: ReadonlySet<F>;
  private readonly rate: number;
  private readonly rng: Rng;

  constructor(opts: ThrowingOptions<F>, all: readonly F[]) {
    for (const f of opts.faults)
      if (!all.includes(f)) throw new Error(`unknown fault ${f}; known: ${all.join(', ')}`);
    const rate = opts.rate ?? 1;
    if (!(rate >= 0 && rate <= 1)) throw new Error(`rate must be in [0, 1], got ${rate}`);
    this.kinds = new Set(opts.faults);
    this.rate = rate;
    this.rng = new Rng(opts.seed ?? 1);
  }

  /** Throws InjectedTracerFault if `kind` is listed and the draw says so. */
  maybeThrow(kind: F): void {
    if (!this.kinds.has(kind)) return;
    if (this.rate < 1 && !this.rng.chance(this.rate)) return;
    this.thrown[kind] = (this.thrown[kind] ?? 0) + 1;
    throw new InjectedTracerFault(kind);
  }

  get total(): number {
    return Object.values<number | undefined>(this.thrown).reduce<number>((n, c) => n + (c ?? 0), 0);
  }
}

const SPAN_METHODS = new Set<string>(
  TRACER_FAULTS.filter((f) => f.startsWith('span.')).map((f) => f.slice('span.'.length)),
);

/**
 * A TracerProvider whose tracers and spans are `inner`'s, except that the listed calls throw. Give it
 * as `telemetry: { tracerProvider }`, or register it globally (trace.setGlobalTracerProvider).
 */
export class ThrowingTracerProvider implements TracerProvider {
  private readonly faults: Faults<TracerFault>;

  constructor(
    private readonly inner: TracerProvider,
    opts: ThrowingOptions<TracerFault>,
  ) {
    this.faults = new Faults(opts, TRACER_FAULTS);
  }

  /** How many calls threw, per kind. */
  get thrown(): Partial<Record<TracerFault, number>> {
    return this.faults.thrown;
  }

  /** How many calls threw in all. */
  get totalThrown(): number {
    return this.faults.total;
  }

  getTracer(name: string, version?: string): Tracer {
    this.faults.maybeThrow('getTracer');
    const tracer = this.inner.getTracer(name, version);
    const faults = this.faults;
    const wrapSpan = (span: Span): Span =>
      new Proxy(span, {
        get(target, prop, receiver) {
          const value = Reflect.get(target, prop, receiver);
          if (typeof prop !== 'string' || !SPAN_METHODS.has(prop) || typeof value !== 'function')
            return value;
          return (...args: unknown[]) => {
            faults.maybeThrow(`span.${prop}` as TracerFault);
            const out = (value as (...a: unknown[]) => unknown).apply(target, args);
            // Chained setters (setAttribute, setStatus...) return the span: keep returning the proxy.
            return out === target ? receiver : out;
          };
        },
      });
    return {
      startSpan(spanName, options, context) {
        faults.maybeThrow('startSpan');
        return wrapSpan(tracer.startSpan(spanName, options, context));
      },
      startActiveSpan(...args: unknown[]) {
        faults.maybeThrow('startActiveSpan');
        // The callback is last; hand it the wrapped span.
        const fn = args[args.length - 1] as (span: Span) => unknown;
        args[args.length - 1] = (span: Span) => fn(wrapSpan(span));
        return (tracer.startActiveSpan as (...a: unknown[]) => unknown)(...args);
      },
    } as Tracer;
  }
}

/**
 * A ContextManager that delegates to `inner` (e.g. AsyncLocalStorageContextManager), except that the
 * listed calls throw. Register it with context.setGlobalContextManager.
 */
export class ThrowingContextManager implements ContextManager {
  private readonly faults: Faults<ContextFault>;

  constructor(
    private readonly inner: ContextManager,
    opts: ThrowingOptions<ContextFault>,
  ) {
    this.faults = new Faults(opts, CONTEXT_FAULTS);
  }

  get thrown(): Partial<Record<ContextFault, number>> {
    return this.faults.thrown;
  }

  get totalThrown(): number {
    return this.faults.total;
  }

  active(): Context {
    this.faults.maybeThrow('context.active');
    return this.inner.active();
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    context: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    this.faults.maybeThrow('context.with:before');
    const out = this.inner.with(context, fn, thisArg, ...args);
    this.faults.maybeThrow('context.with:after');
    return out;
  }

  bind<T>(context: Context, target: T): T {
    return this.inner.bind(context, target);
  }

  enable(): this {
    this.inner.enable();
    return this;
  }

  disable(): this {
    this.inner.disable();
    return this;
  }
}
