/** The CLI loads node-postgres only when a command needs it, and says how to install it when missing. */
import { describe, expect, it } from 'vitest';
import { loadPg } from '../../src/cli/postgres.js';
import { PostgresNotInstalledError } from '../../src/index.js';

describe('loadPg', () => {
  it('loads pg when it is installed', async () => {
    expect(typeof (await loadPg()).Pool).toBe('function');
  });

  it('throws PostgresNotInstalledError, saying to npm install pg, when it is not', async () => {
    const err = await loadPg('surety-test-no-such-module').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PostgresNotInstalledError);
    expect(err).toMatchObject({
      code: 'ERR_POSTGRES_NOT_INSTALLED',
      message: expect.stringMatching(/npm install pg/),
    });
  });
});
