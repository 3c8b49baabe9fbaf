/**
 * The chaos workload's tracer provider that throws: a real OpenTelemetry SDK provider (sdk-trace-base,
 * spans recorded and dropped, no exporter) wrapped by chaos/throwing-tracer.ts, so that a share of every
 * kind of tracer and span call throws, drawn from the run's seed. Given to some chaos workers and to a
 * second producer Queue (`telemetry: { tracerProvider }`): telemetry is code Surety calls but does not
 * own, so it must never change an outcome (a job ended without running, an add that wrote but
 * rejected, a completion not reported).
 */
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import type { TracerProviderLike } from '../src/index.js';
import { ThrowingTracerProvider, TRACER_FAULTS } from './throwing-tracer.js';

/** Share of tracer and span calls that throw. */
export const TRACER_THROW_RATE = 0.02;

export function throwingTracerProvider(seed: number, rate = TRACER_THROW_RATE): TracerProviderLike {
  return new ThrowingTracerProvider(new BasicTracerProvider(), { faults: TRACER_FAULTS, rate, seed });
}
