/** Every scenario, in the order they run and are reported. */
import type { Scenario } from './context.js';
import { e2e, e2eBatch, e2eLarge, e2eLive } from './e2e.js';
import { enqueueBulk, enqueueSerial } from './enqueue.js';
import { cost, memory } from './resources.js';
import { delayed, latency } from './timing.js';

export const SCENARIOS: readonly Scenario[] = [
  enqueueSerial,
  enqueueBulk,
  e2e,
  e2eLarge,
  e2eBatch,
  e2eLive,
  latency,
  delayed,
  memory,
  cost,
];
