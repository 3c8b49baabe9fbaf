/**
 * The TS readers of the job record, the annex and script replies agree with the Lua that writes them,
 * and script refusals map to their typed errors in one place.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  InvalidStateError,
  JobNotFoundError,
  PartitionMismatchError,
  RepartitionError,
  StaleJobError,
} from '../../src/errors.js';
import { parseRefusal, refusalError } from '../../src/scripts/refusals.js';
import {
  decodeAdd,
  decodeComplete,
  decodeCrossResolve,
  decodeFail,
  decodeJobChange,
} from '../../src/scripts/replies.js';
import {
  ANNEX_SUFFIX,
  annexFields,
  annexOf,
  decodeClaimed,
  HEADER,
  readHeader,
} from '../../src/store/job-record.js';

const includes = new URL('../../src/scripts/includes/', import.meta.url);

describe('job record layout', () => {
  it('HEADER names the same positions as F_* in parse_record.lua (which is 1-based)', () => {
    const lua = readFileSync(new URL('parse_record.lua', includes), 'utf8');
    const byName = new Map<string, number>();
    for (const m of lua.matchAll(/^local ((?:F_\w+, )*F_\w+) = ([\d, ]+)$/gm)) {
      const names = m[1]!.split(', ');
      const values = m[2]!.split(', ').map(Number);
      for (const [i, n] of names.entries()) byName.set(n, values[i]!);
    }
    const lua2ts: Record<string, keyof typeof HEADER> = {
      F_STATE: 'state',
      F_TOKEN: 'token',
      F_ATTEMPTS: 'attempts',
      F_BASE: 'base',
      F_CREATED: 'createdAt',
      F_RUN_AT: 'runAt',
      F_STARTED: 'startedAt',
      F_FINISHED: 'finishedAt',
      F_PRIORITY: 'priority',
      F_MAX_ATTEMPTS: 'maxAttempts',
      F_LEASE: 'leaseMs',
      F_GROUP: 'group',
      F_DEDUPE: 'dedupe',
      F_REFUNDS: 'refunds',
      F_NAME: 'name',
      F_EXPIRE: 'expireAt',
      F_SNOOZES: 'snoozes',
      F_BATCH: 'batch',
      F_KEEP: 'keep',
      F_TRACE: 'trace',
      F_LIFO: 'lifo',
    };
    expect([...byName.keys()].sort()).toEqual(Object.keys(lua2ts).sort());
    for (const [luaName, pos] of byName) expect(HEADER[lua2ts[luaName]!] + 1, luaName).toBe(pos);
  });

  it('the annex parts come in the order annex_fields.lua lists their suffixes', () => {
    const lua = readFileSync(new URL('annex_fields.lua', includes), 'utf8');
    const suffixes = [...lua.matchAll(/fields\[#fields \+ 1\] = ids\[i\](?: \.\. '\\1(\w)')?/g)].map((m) =>
      m[1] ? `\x01${m[1]}` : '',
    );
    expect(suffixes).toEqual(Object.values(ANNEX_SUFFIX));
    expect(annexFields('j')).toEqual([
      'j',
      'j\x01p',
      'j\x01l',
      'j\x01d',
      'j\x01b',
      'j\x01s',
      'j\x01x',
      'j\x01y',
      'j\x01g',
      'j\x01w',
      'j\x01c',
      'j\x01k',
      'j\x01u',
    ]);
    const two = annexOf(
      ['e1', null, null, 'p1', ...new Array<null>(9).fill(null)].concat([
        'e2',
        '3',
        'l',
        null,
        'b',
        's',
        'x',
        'y',
        'g',
        'w',
        'c',
        'k',
        'u',
      ]),
      1,
    );
    expect(two).toEqual({
      errorLines: 'e2',
      progress: '3',
      logs: 'l',
      parents: null,
      body: 'b',
      steps: 's',
      crossParents: 'x',
      crossPending: 'y',
      signals: 'g',
      signalWait: 'w',
      children: 'c',
      childEnds: 'k',
      flowParent: 'u',
    });
  });

  it('readHeader fills the library defaults for empty option fields, and reads set ones', () => {
    const h = readHeader('a|t1|2||1000||1500|||||');
    expect(h).toMatchObject({ state: 'a', token: 't1', attempts: 2, base: 0, createdAt: 1000, runAt: 1000 });
    expect(h).toMatchObject({ startedAt: 1500, finishedAt: undefined, priority: 0, timeoutMs: 0 });
    const set = readHeader('w||0|1|1000|2000|||7|9|30000|f,5,,0|250');
    expect(set).toMatchObject({ base: 1, runAt: 2000, priority: 7, maxAttempts: 9, leaseMs: 30000 });
    expect(set).toMatchObject({ backoff: 'f,5,,0', timeoutMs: 250, startedAt: undefined });
    expect(decodeClaimed('a|t|0||1000|||||||\n{"x":1}')).toMatchObject({
      attempts: 0,
      startedAt: undefined,
      dataJson: '{"x":1}',
    });
  });
});

describe('script replies and refusals', () => {
  it('decoders read positional replies into named fields', () => {
    expect(decodeAdd(['1', 1, 'w', 'x', 0, 'd'])).toEqual([
      { id: '1', isNew: true, state: 'waiting' },
      { id: 'x', isNew: false, state: 'delayed' },
    ]);
    expect(decodeComplete(['7', 'STALE:w:3', '8', 'NOT_FOUND', '9', 'START_LOST'])).toEqual({
      refused: [
        { id: '7', refusal: { code: 'STALE', state: 'w', attempts: 3 } },
        { id: '8', refusal: { code: 'NOT_FOUND' } },
      ],
      lostStarts: ['9'],
      notified: false,
    });
    expect(decodeComplete(['', 'XNOTIFY'])).toEqual({ refused: [], lostStarts: [], notified: true });
    expect(decodeFail(['1', 'delayed', '2', 'STALE:a:2'])).toEqual({
      rows: [
        { id: '1', outcome: 'delayed' },
        { id: '2', refusal: { code: 'STALE', state: 'a', attempts: 2 } },
      ],
      notified: false,
    });
    expect(decodeFail(['1', 'dead', '', 'XNOTIFY'])).toEqual({
      rows: [{ id: '1', outcome: 'dead' }],
      notified: true,
    });
    expect(decodeCrossResolve(['failed', 1])).toEqual({ outcome: 'failed', notified: true });
    expect(decodeJobChange('OK')).toBeNull();
    expect(decodeJobChange('INVALID_STATE:c')).toEqual({ code: 'INVALID_STATE', state: 'c' });
  });

  it('refusalError maps every refusal to its typed error, naming the job and the operation', () => {
    const notFound = refusalError({ code: 'NOT_FOUND' }, { operation: 'retry', jobId: 'j' });
    expect(notFound).toBeInstanceOf(JobNotFoundError);
    const invalid = refusalError({ code: 'INVALID_STATE', state: 'a' }, { operation: 'remove', jobId: 'j' });
    expect(invalid).toBeInstanceOf(InvalidStateError);
    expect(invalid.message).toBe('cannot remove job "j": it is active');
    const stale = refusalError(
      { code: 'STALE', state: 'w', attempts: 3 },
      { operation: 'complete', jobId: 'j', attempt: 2 },
    );
    expect(stale).toBeInstanceOf(StaleJobError);
    expect((stale as StaleJobError).reason).toBe('its lease was lost; the job is now waiting at attempt 3');
    const gone = refusalError({ code: 'NOT_FOUND' }, { operation: 'fail', jobId: 'j', attempt: 1 });
    expect(gone).toBeInstanceOf(StaleJobError);
    const parent = refusalError(parseRefusal('ERR SURETY_UNKNOWN_PARENT p:1')!, { operation: 'add' });
    expect(parent).toBeInstanceOf(JobNotFoundError);
    expect((parent as JobNotFoundError).jobId).toBe('p:1');
    const moved = refusalError(parseRefusal('SURETY_PARTITIONS 4')!, {
      operation: 'add',
      queue: 'q',
      partitions: 2,
    });
    expect(moved).toBeInstanceOf(PartitionMismatchError);
    expect(moved).toMatchObject({ queue: 'q', configured: 2, recorded: 4 });
    const notMovable = refusalError(parseRefusal('SURETY_NOT_MOVABLE a b a')!, { operation: 'move-in' });
    expect(notMovable).toBeInstanceOf(RepartitionError);
    expect(notMovable.message).toContain('"a b" is active');
    const odd = refusalError(parseRefusal('WHAT') ?? { code: 'UNEXPECTED', text: 'WHAT' }, {
      operation: 'promote',
    });
    expect(odd.code).toBe('ERR_UNEXPECTED_REPLY');
  });
});
