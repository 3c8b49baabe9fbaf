/**
 * The trace context a job carries: header field `trace` of its record (job-record.ts), written at add
 * and read by every claim, so each attempt (retries, recovered leases, manual retries) continues the
 * producer's trace with no extra round trip.
 *
 * Format: the W3C `traceparent` (`00-<trace id>-<span id>-<flags>`), then, if the producer's span had
 * one, a space and its `tracestate`. A header field may hold neither `|` nor a newline: tracestate may
 * contain `|` (and `%`), so those two are percent-encoded; a tracestate with any other character
 * outside printable ASCII is not valid W3C and is dropped. Surety writes this itself rather than
 * through the application's propagator, so it works with no propagator registered (and with any).
 */
import type { OtelApi, SpanContextLike } from './api.js';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const PRINTABLE = /^[\x20-\x7e]*$/;
/** W3C limits tracestate to 32 members of at most 256 characters each: 8 KiB is above any valid one. */
const MAX_TRACESTATE = 8192;

/** The field for a span context, '' when it is not valid (no SDK and no parent: nothing to carry). */
export function encodeTraceField(api: OtelApi, sc: SpanContextLike): string {
  if (!api.isSpanContextValid(sc)) return '';
  const flags = (sc.traceFlags & 0xff).toString(16).padStart(2, '0');
  const parent = `00-${sc.traceId}-${sc.spanId}-${flags}`;
  const state = sc.traceState?.serialize() ?? '';
  if (state === '' || state.length > MAX_TRACESTATE || !PRINTABLE.test(state)) return parent;
  return `${parent} ${state.replace(/[%|]/g, (c) => (c === '%' ? '%25' : '%7C'))}`;
}

/** The remote span context stored in a job's field, or undefined ('' or not a valid traceparent). */
export function decodeTraceField(api: OtelApi, field: string): SpanContextLike | undefined {
  const space = field.indexOf(' ');
  const m = TRACEPARENT.exec(space < 0 ? field : field.slice(0, space));
  if (!m) return undefined;
  const sc: SpanContextLike = {
    traceId: m[1]!,
    spanId: m[2]!,
    traceFlags: Number.parseInt(m[3]!, 16),
    isRemote: true,
  };
  if (space >= 0 && api.createTraceState) {
    sc.traceState = api.createTraceState(
      field.slice(space + 1).replace(/%7C|%25/g, (c) => (c === '%7C' ? '|' : '%')),
    );
  }
  return api.isSpanContextValid(sc) ? sc : undefined;
}
