import { describe, expect, it } from 'vitest';
import { closestName as closest } from '../../src/queue/discover.js';

describe('the CLI\'s "did you mean" for a misspelt queue name', () => {
  it('suggests a name two typos away (a swap and a dropped letter), and a one-letter typo', () => {
    expect(closest('emial', ['emails', 'reports'])).toBe('emails');
    expect(closest('emials', ['emails', 'reports'])).toBe('emails');
    expect(closest('reprots', ['emails', 'reports'])).toBe('reports');
    expect(closest('Emails', ['emails'])).toBe('emails');
  });

  it('suggests nothing for a short name more than one edit away, or for an unrelated name', () => {
    expect(closest('ab', ['xyz'])).toBeUndefined();
    expect(closest('abc', ['ayz'])).toBeUndefined();
    expect(closest('invoices', ['emails', 'reports'])).toBeUndefined();
  });
});
