/**
 * storedJson (validate.ts), the outbox relay's check of the JSON text a row holds: it must decide as
 * toJson(JSON.parse(text)) decides, which is what the relay ran before it took the text as it is.
 * The property: for any JSON text (compact or spaced, with exponents, long digit runs, negative zeros,
 * deep nesting, over the size limit), it throws the same error class as that, or returns text that
 * parses to the same value (Object.is for every number).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { NotSerializableError, PayloadTooLargeError } from '../../src/index.js';
import { storedJson, toJson } from '../../src/validate.js';

/** What toJson(JSON.parse(text)) does: its text parsed back, or the class of its error. */
function longWay(text: string, limit: number): unknown {
  try {
    return { value: JSON.parse(toJson('data', JSON.parse(text), limit)) as unknown };
  } catch (err) {
    return { refused: (err as Error).constructor };
  }
}

function shortWay(text: string, limit: number): unknown {
  try {
    return { value: JSON.parse(storedJson('data', text, limit)) as unknown };
  } catch (err) {
    return { refused: (err as Error).constructor };
  }
}

/** Number texts JSON allows, the awkward ones often. */
const numberText = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => JSON.stringify(n)),
  fc.constantFrom('-0', '-0.0', '-0.00', '0.0', '1e999', '-1E+400', '1e-400', '2.5e3', '-0e0', '1.50'),
  fc.integer({ min: 300, max: 320 }).map((n) => '9'.repeat(n)),
);

/** JSON text with spaces here and there, of any depth up to 110. */
const { text } = fc.letrec((tie) => ({
  text: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    numberText,
    fc.string({ maxLength: 6 }).map((s) => JSON.stringify(s)),
    fc.constantFrom('true', 'false', 'null', '"a-0"', '"1e5"', '"2024-05-01"', '"[{"'),
    fc
      .array(tie('text'), { maxLength: 3 })
      .chain((items) => fc.constantFrom('', ' ', '\n ').map((sp) => `[${sp}${items.join(`,${sp}`)}${sp}]`)),
    fc
      .array(fc.tuple(fc.string({ maxLength: 3 }), tie('text')), { maxLength: 3 })
      .map((entries) => `{${entries.map(([k, v]) => `${JSON.stringify(k)} : ${v}`).join(',')}}`),
  ),
}));

function nestedText(depth: number): string {
  return `${'['.repeat(depth)}1${']'.repeat(depth)}`;
}

describe('storedJson', () => {
  it('decides as toJson(JSON.parse(text)) does, for any JSON text', () => {
    fc.assert(
      fc.property(text, fc.constantFrom(1 << 30, 64, 16), (t, limit) => {
        expect(shortWay(t, limit)).toEqual(longWay(t, limit));
      }),
      { numRuns: 3_000 },
    );
  });

  it('returns toJson text as it is, and refuses what toJson would refuse after a parse', () => {
    const made = toJson('data', { i: 1, s: 'x'.repeat(100), at: '2024-05-01', n: [1.5, -2] }, 1 << 20);
    expect(storedJson('data', made, 1 << 20)).toBe(made);
    expect(storedJson('data', '{ "a" : 1 }', 1 << 20)).toBe('{ "a" : 1 }');
    expect(storedJson('data', '{"a": -0}', 1 << 20)).toBe('{"a":0}');
    expect(() => storedJson('data', '{"a":1e999}', 1 << 20)).toThrow(NotSerializableError);
    expect(() => storedJson('data', '9'.repeat(309), 1 << 20)).toThrow(NotSerializableError);
    expect(storedJson('data', nestedText(101), 1 << 20)).toBe(nestedText(101));
    expect(() => storedJson('data', nestedText(102), 1 << 20)).toThrow(/nested more than 100 levels/);
    expect(() => storedJson('item 3 data', `"${'x'.repeat(100)}"`, 50)).toThrow(
      new PayloadTooLargeError('item 3 data is 102 bytes as JSON; the limit (maxPayloadBytes) is 50'),
    );
    // Over the limit as stored, within it once the spaces are gone: the long way takes it.
    expect(storedJson('data', `[${' '.repeat(40)}1]`, 20)).toBe('[1]');
  });
});
