/**
 * A tracer provider that throws: a real OpenTelemetry SDK provider (sdk-trace-base, spans recorded and
 * dropped, no exporter) whose tracer and spans throw from a share of their calls, drawn from the run's
 * seed. Given to some chaos workers and to a second producer Queue (`telemetry: { tracerProvider }`):
 * telemetry is code Surety calls but does not own, so it must never change an outcome (a job ended
 * without running, an add that wrote but rejected, a completion not reported).
 */
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import type { TracerProviderLike } from '../src/index.js';
import type { Rng } from './rng.js';

/** Share of tracer and span calls that throw. */
export const TRACER_THROW_RATE = 0.02;

export class TracerFault extends Error {
  override name = 'TracerFault';
}

export function throwingTracerProvider(rng: Rng, rate = TRACER_THROW_RATE): TracerProviderLike {
  const real = new BasicTracerProvider();
  const maybeThrow = (what: string) => {
    if (rng.chance(rate)) throw new TracerFault(`chaos tracer: ${what} threw`);
  };
  /** Wraps every method of `target` so that a call may throw before doing its work. */
  const faulty = <T extends object>(target: T, what: string, wrapSpan = false): T =>
    new Proxy(target, {
      get(t, key, receiver) {
        const v = Reflect.get(t, key, receiver);
        if (typeof v !== 'function') return v;
        return (...args: unknown[]) => {
          maybeThrow(`${what}.${String(key)}`);
          const out = (v as (...a: unknown[]) => unknown).apply(t, args);
          return wrapSpan && key === 'startSpan' ? faulty(out as object, 'span') : out;
        };
      },
    });
  return {
    getTracer(name: string, version?: string) {
      maybeThrow('provider.getTracer');
      return faulty(real.getTracer(name, version), 'tracer', true);
    },
  };
}
