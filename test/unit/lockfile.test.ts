/**
 * `npm ci` on a fresh machine, of any platform, needs every platform package in package-lock.json: npm
 * refuses a lock file that lacks one, before it installs anything. scripts/complete-lock.ts explains why
 * one can go missing, and puts them back.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { type Lockfile, missingOptionalPackages, platformFromName } from '../../scripts/complete-lock.js';

const lock = JSON.parse(
  readFileSync(new URL('../../package-lock.json', import.meta.url), 'utf8'),
) as Lockfile;

describe('package-lock.json', () => {
  it('has an entry for every optional dependency of every package (run `npm run lock:complete` if not)', () => {
    expect(missingOptionalPackages(lock).map((m) => `${m.name}@${m.spec}`)).toEqual([]);
  });

  it('says for each platform package which platform it is for, so npm skips it on the others', () => {
    const platformPackages = Object.entries(lock.packages).filter(([path]) =>
      /node_modules\/(@biomejs\/cli-|@rollup\/rollup-|@esbuild\/|@msgpackr-extract\/)/.test(path),
    );
    expect(platformPackages.length).toBeGreaterThan(50);
    for (const [path, entry] of platformPackages) {
      expect({ path, os: entry.os, cpu: entry.cpu, optional: entry.optional }).toEqual({
        path,
        os: [expect.any(String)],
        cpu: [expect.any(String)],
        optional: true,
      });
    }
  });

  it('finds an optional dependency that is missing, and where it goes', () => {
    const broken: Lockfile = {
      lockfileVersion: 3,
      packages: {
        '': { devDependencies: { tool: '^1.0.0' } },
        'node_modules/tool': {
          version: '1.0.0',
          dev: true,
          optionalDependencies: { 'tool-linux-x64': '1.0.0', shared: '2.0.0' },
        },
        'node_modules/tool-linux-x64': {
          version: '1.0.0',
          dev: true,
          optional: true,
          os: ['linux'],
          cpu: ['x64'],
        },
        'node_modules/shared': { version: '1.0.0', dev: true },
        'node_modules/other': {
          version: '1.0.0',
          dev: true,
          optionalDependencies: { 'tool-darwin-arm64': '1.0.0' },
        },
      },
    };
    expect(missingOptionalPackages(broken)).toEqual([
      // shared resolves to 1.0.0 at the top: a version mismatch is npm's business, not a missing entry.
      {
        name: 'tool-darwin-arm64',
        spec: '1.0.0',
        parent: 'node_modules/other',
        path: 'node_modules/tool-darwin-arm64',
      },
    ]);
  });

  it('reads a platform from a package name when the registry does not know the package', () => {
    expect(platformFromName('@biomejs/cli-android-arm64')).toMatchObject({ os: ['android'], cpu: ['arm64'] });
    expect(platformFromName('@biomejs/cli-android-arm64')?.libc).toBeUndefined();
    expect(platformFromName('@rollup/rollup-linux-arm-musleabihf')).toMatchObject({
      os: ['linux'],
      cpu: ['arm'],
      libc: ['musl'],
    });
    expect(platformFromName('@rollup/rollup-linux-x64-gnu')).toMatchObject({ libc: ['glibc'] });
    expect(platformFromName('@rollup/rollup-win32-ia32-msvc')).toMatchObject({
      os: ['win32'],
      cpu: ['ia32'],
    });
    expect(platformFromName('left-pad')).toBeNull();
  });
});
