/**
 * The sandbox protocol's reading of untrusted input (src/worker/sandbox/protocol.ts): errors are
 * marked as the library's by prototype, never by name, rebuilt without letting fields change their
 * class, and messages are checked field by field.
 */
import { describe, expect, it } from 'vitest';
import * as errors from '../../src/errors.js';
import { RateLimitError, SnoozeError, UnrecoverableError } from '../../src/index.js';
import { checkFromSandbox, errorToData, rebuildError } from '../../src/worker/sandbox/protocol.js';

const CLASSES = errors as unknown as Record<string, unknown>;

describe('errorToData and rebuildError', () => {
  it("mark the library's classes by prototype (subclasses too), never by name", () => {
    class Sdk429 extends Error {
      override name = 'RateLimitError';
      delayMs = 0;
    }
    class Mine extends RateLimitError {}
    expect(errorToData(new Sdk429('429'), CLASSES).libraryClass).toBeUndefined();
    expect(errorToData(new Mine(5), CLASSES)).toMatchObject({
      libraryClass: 'RateLimitError',
      fields: { delayMs: 5 },
    });
    expect(errorToData(new UnrecoverableError('x'), CLASSES).libraryClass).toBe('UnrecoverableError');
    const lookalike = rebuildError(errorToData(new Sdk429('429'), CLASSES), CLASSES);
    expect(lookalike).not.toBeInstanceOf(RateLimitError);
    expect(lookalike).toMatchObject({ name: 'RateLimitError', message: '429', delayMs: 0 });
    const real = rebuildError(errorToData(new SnoozeError(7), CLASSES), CLASSES);
    expect(real).toBeInstanceOf(SnoozeError);
    expect((real as SnoozeError).delayMs).toBe(7);
  });

  it("never let a field change the rebuilt error's prototype, and read any thrown value as normaliseThrown does", () => {
    const fields = JSON.parse('{"__proto__": {"polluted": true}, "constructor": 1, "detail": 2}');
    const err = rebuildError({ name: 'Error', message: 'm', fields }, CLASSES);
    expect(err).toBeInstanceOf(Error);
    expect((err as unknown as { polluted?: boolean }).polluted).toBeUndefined();
    expect((err as unknown as { detail: number }).detail).toBe(2);
    expect(errorToData({ a: 1 })).toEqual({ name: 'Error', message: '{"a":1}', fields: { a: 1 } });
    expect(errorToData(undefined)).toEqual({ name: 'Error', message: 'undefined' });
    const trap = new Proxy(
      {},
      {
        get() {
          throw new Error('trap');
        },
        getPrototypeOf() {
          throw new Error('trap');
        },
      },
    );
    expect(() => errorToData(trap, CLASSES)).not.toThrow();
  });
});

describe('checkFromSandbox', () => {
  it('accepts the protocol and refuses anything shaped otherwise', () => {
    expect(checkFromSandbox({ t: 'started', run: 1 })).toEqual({ t: 'started', run: 1 });
    expect(checkFromSandbox({ t: 'done', run: 1, ok: true, json: '{}' })).toEqual({
      t: 'done',
      run: 1,
      ok: true,
      json: '{}',
    });
    for (const bad of [
      null,
      'done',
      { t: 'nope' },
      { t: 'done', run: 1, ok: true },
      { t: 'done', run: '1', ok: true, json: '' },
      { t: 'done', run: 1, ok: false, error: { name: 1, message: 'x' } },
      { t: 'call', callId: 1, run: 1, jobId: 1, token: 't', method: 'log', args: [] },
      { t: 'started', run: 1.5 },
    ])
      expect(checkFromSandbox(bad)).toBeNull();
  });
});
