/**
 * toJson (validate.ts), the check every add's data passes: a quick walk decides, and only a refused
 * value is walked again to name its path. The property: whatever the value, toJson returns exactly
 * JSON.stringify's text when the value is plain JSON (by the rules written out in `plain` below), and
 * otherwise throws NotSerializableError; never the text of a value JSON would change.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { NotSerializableError } from '../../src/index.js';
import { toJson } from '../../src/validate.js';

const LIMIT = 1 << 30;

/** The documented rule, written independently of validate.ts. */
function plain(value: unknown, depth = 0, path = new Set<object>()): boolean {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (typeof value !== 'object') return false;
  if (depth > 100 || path.has(value)) return false;
  const proto = Object.getPrototypeOf(value);
  if (!Array.isArray(value) && proto !== Object.prototype && proto !== null) return false;
  path.add(value);
  const ok = Array.isArray(value)
    ? Array.from({ length: value.length }, (_, i) => value[i]).every((v) => plain(v, depth + 1, path))
    : Object.values(value).every((v) => v === undefined || plain(v, depth + 1, path));
  path.delete(value);
  return ok;
}

/** JSON-like values with, now and then, a leaf or a container JSON cannot hold unchanged. */
const odd = fc.constantFrom<unknown>(
  undefined,
  Number.NaN,
  Number.NEGATIVE_INFINITY,
  10n,
  Symbol('s'),
  () => 1,
  new Date(0),
  new Map(),
  new (class Order {})(),
);
const { value } = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.oneof(fc.string(), fc.double(), fc.integer(), fc.boolean(), fc.constant(null)),
    fc.oneof({ weight: 1, arbitrary: odd }, { weight: 9, arbitrary: fc.constant(0) }),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.string({ maxLength: 4 }), tie('value'), { maxKeys: 4 }),
  ),
}));

function nested(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

describe('toJson', () => {
  it('returns JSON.stringify of plain JSON and refuses everything else', () => {
    fc.assert(
      fc.property(value, (v) => {
        if (plain(v)) {
          expect(toJson('data', v, LIMIT)).toBe(JSON.stringify(v));
        } else {
          expect(() => toJson('data', v, LIMIT)).toThrow(NotSerializableError);
        }
      }),
      { numRuns: 2_000 },
    );
  });

  it('takes 100 levels of nesting and refuses 101; a shared object is no cycle; a cycle is named', () => {
    // nested(101) is 101 arrays around a number: the number sits at depth 101, the last array at 100.
    expect(toJson('data', nested(101), LIMIT)).toBe(JSON.stringify(nested(101)));
    expect(() => toJson('data', nested(102), LIMIT)).toThrow(/nested more than 100 levels/);
    const shared = { x: 1 };
    expect(toJson('data', { a: shared, b: [shared, shared] }, LIMIT)).toBe(
      '{"a":{"x":1},"b":[{"x":1},{"x":1}]}',
    );
    const deep: Record<string, unknown> = { in: nested(40) };
    (deep.in as unknown[][])[0]!.push(deep);
    expect(() => toJson('data', deep, LIMIT)).toThrow(/data\.in\[0\]\[1\] is a circular reference/);
  });
});
