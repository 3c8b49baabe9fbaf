/**
 * Puts back into package-lock.json the platform packages npm left out of it.
 *
 * Packages with native builds (@biomejs/biome, rollup, msgpackr-extract) list one optional dependency
 * per platform: @biomejs/cli-darwin-arm64, @rollup/rollup-linux-x64-musl... npm records every one of them
 * in the lock file, whatever platform it runs on, and `npm ci` refuses a lock file that lacks one
 * ("Missing: @biomejs/cli-darwin-arm64@ from lock file"). But when npm cannot fetch one from the registry
 * it is configured with (a partial mirror holding only this machine's builds, as where this project is
 * developed), it leaves it out of the lock file it writes, without a word.
 *
 *   npm run lock:complete            adds each missing one back
 *   npm run lock:complete -- --check lists them and fails, without changing anything
 *
 * An added entry has the exact version its parent asks for and the os / cpu / libc fields by which npm
 * skips it on other platforms. They come from the registry: the exact version when it has it (then
 * with its integrity hash), else the newest version it has (a platform package keeps its platform from
 * version to version), else, for a package the registry does not know at all, from its name. An entry
 * without an integrity hash is fetched by version, from the registry, on the machines that need it.
 * test/unit/lockfile.test.ts fails while one is missing.
 */
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

/** One entry of package-lock.json's `packages` (the fields read or written here). */
export interface LockEntry {
  version?: string;
  integrity?: string;
  link?: boolean;
  dev?: boolean;
  optional?: boolean;
  devOptional?: boolean;
  peer?: boolean;
  optionalDependencies?: Record<string, string>;
  [field: string]: unknown;
}

export interface Lockfile {
  lockfileVersion: number;
  packages: Record<string, LockEntry>;
  [field: string]: unknown;
}

/** An optional dependency that the lock file does not resolve. */
export interface MissingPackage {
  name: string;
  /** What the parent asks for: an exact version for platform packages. */
  spec: string;
  /** The lock path of the package that depends on it ('' for the project itself). */
  parent: string;
  /** The lock path where it goes: hoisted to the top when that place is free, else under its parent. */
  path: string;
}

/** The lock path of the package that contains `path` ('' for a top-level package, null for the root). */
function parentPath(path: string): string | null {
  if (path === '') return null;
  const i = path.lastIndexOf('/node_modules/');
  return i === -1 ? '' : path.slice(0, i);
}

/** Where Node's resolution finds `name` from the package at `from`, or null if the lock file lacks it. */
function resolve(packages: Lockfile['packages'], from: string, name: string): string | null {
  for (let p: string | null = from; p !== null; p = parentPath(p)) {
    const candidate = `${p === '' ? '' : `${p}/`}node_modules/${name}`;
    if (packages[candidate]) return candidate;
  }
  return null;
}

/** Every optional dependency, of any package in the lock file, that the lock file does not resolve. */
export function missingOptionalPackages(lock: Lockfile): MissingPackage[] {
  const missing: MissingPackage[] = [];
  for (const [parent, entry] of Object.entries(lock.packages)) {
    if (entry.link) continue;
    for (const [name, spec] of Object.entries(entry.optionalDependencies ?? {})) {
      if (resolve(lock.packages, parent, name)) continue;
      const hoisted = `node_modules/${name}`;
      const taken = lock.packages[hoisted] || missing.some((m) => m.path === hoisted && m.spec !== spec);
      const path = taken ? `${parent === '' ? '' : `${parent}/`}node_modules/${name}` : hoisted;
      if (!missing.some((m) => m.path === path)) missing.push({ name, spec, parent, path });
    }
  }
  return missing;
}

/** What npm records about a platform package, and where it was learnt. */
export interface PlatformFields {
  integrity?: string;
  os?: string[];
  cpu?: string[];
  libc?: string[];
  license?: string;
  engines?: Record<string, string>;
  source: string;
}

const OS = [
  'aix',
  'android',
  'darwin',
  'freebsd',
  'linux',
  'netbsd',
  'openbsd',
  'openharmony',
  'sunos',
  'win32',
];
const CPU = ['arm', 'arm64', 'ia32', 'loong64', 'mips64el', 'ppc64', 'riscv64', 's390x', 'x64'];

/**
 * The platform a package is built for, read from its name (`cli-linux-arm64-musl`, `rollup-linux-arm-
 * gnueabihf`, `rollup-win32-x64-msvc`), or null. libc only when the name says it (gnu*, musl*).
 */
export function platformFromName(name: string): PlatformFields | null {
  const words = (name.split('/').pop() ?? name).split('-');
  const os = words.find((w) => OS.includes(w));
  const cpu = words.find((w) => CPU.includes(w));
  if (!os || !cpu) return null;
  const fields: PlatformFields = { os: [os], cpu: [cpu], source: 'its name' };
  if (os === 'linux' && words.some((w) => w.startsWith('musl'))) fields.libc = ['musl'];
  else if (os === 'linux' && words.some((w) => w.startsWith('gnu'))) fields.libc = ['glibc'];
  return fields;
}

const run = promisify(execFile);

/** `npm view <spec> --json <fields>`, or null when the registry has no such package or version. */
async function npmView(spec: string): Promise<Record<string, unknown> | null> {
  const fields = ['version', 'dist.integrity', 'os', 'cpu', 'libc', 'license', 'engines'];
  try {
    const { stdout } = await run('npm', ['view', spec, '--json', '--prefer-offline', ...fields]);
    const found = JSON.parse(stdout) as Record<string, unknown> | Record<string, unknown>[];
    return Array.isArray(found) ? (found.at(-1) ?? null) : found;
  } catch (err) {
    if (/E404|ENOTCACHED|No match found/.test(String((err as { stderr?: string }).stderr ?? err)))
      return null;
    throw err;
  }
}

async function platformFields(name: string, version: string): Promise<PlatformFields> {
  const exact = await npmView(`${name}@${version}`);
  const found = exact ?? (await npmView(name));
  if (found && (found.os || found.cpu)) {
    const { os, cpu, libc, license, engines } = found as Omit<PlatformFields, 'source'>;
    const integrity = exact ? (found['dist.integrity'] as string | undefined) : undefined;
    const source = exact ? 'the registry' : `the registry's ${name}@${String(found.version)}`;
    return { integrity, os, cpu, libc, license, engines, source };
  }
  const named = platformFromName(name);
  if (!named) throw new Error(`${name}@${version}: not in the registry, and its name names no platform`);
  return named;
}

/** The lock entry npm would write (its field order too), with the dev/optional flags of its parent. */
function lockEntry(version: string, parent: LockEntry, fields: PlatformFields): LockEntry {
  const flags: LockEntry = parent.dev
    ? { dev: true, optional: true }
    : parent.devOptional
      ? { devOptional: true }
      : { optional: true };
  if (parent.peer) flags.peer = true;
  const { source: _, integrity, engines, ...meta } = fields;
  const sorted = Object.fromEntries(
    Object.entries({ ...meta, ...flags })
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => a.localeCompare(b, 'en')),
  );
  return { version, ...(integrity ? { integrity } : {}), ...sorted, ...(engines ? { engines } : {}) };
}

/** Adds the missing entries to `lock` (in npm's key order); returns what it added, with the sources. */
export async function completeLock(lock: Lockfile): Promise<string[]> {
  const missing = missingOptionalPackages(lock);
  const inexact = missing.filter((m) => !/^\d+\.\d+\.\d+(-[\w.]+)?$/.test(m.spec));
  if (inexact.length > 0) {
    throw new Error(
      `not exact versions, so not guessed here: ${inexact.map((m) => `${m.name}@${m.spec}`).join(', ')}; ` +
        'let npm resolve them (npm install) with a registry that has them',
    );
  }
  const report: string[] = [];
  const found: PlatformFields[] = [];
  // Six npm processes at a time: one per package would start dozens at once.
  let next = 0;
  const lookUp = async () => {
    for (let i = next++; i < missing.length; i = next++)
      found[i] = await platformFields(missing[i]!.name, missing[i]!.spec);
  };
  await Promise.all(Array.from({ length: 6 }, lookUp));
  missing.forEach((m, i) => {
    const fields = found[i]!;
    lock.packages[m.path] = lockEntry(m.spec, lock.packages[m.parent]!, fields);
    report.push(
      `${m.path}@${m.spec} (${[fields.os, fields.cpu, fields.libc].flat().filter(Boolean).join(' ')}, from ${fields.source})`,
    );
  });
  const { '': root, ...rest } = lock.packages;
  lock.packages = {
    ...(root ? { '': root } : {}),
    ...Object.fromEntries(Object.entries(rest).sort(([a], [b]) => a.localeCompare(b, 'en'))),
  };
  return report;
}

async function main(): Promise<void> {
  const file = new URL('../package-lock.json', import.meta.url);
  const lock = JSON.parse(readFileSync(file, 'utf8')) as Lockfile;
  if (process.argv.includes('--check')) {
    const missing = missingOptionalPackages(lock);
    for (const m of missing)
      console.error(`missing from package-lock.json: ${m.name}@${m.spec} (for ${m.parent})`);
    if (missing.length > 0) console.error('run `npm run lock:complete` to add them');
    else console.log('package-lock.json is complete');
    process.exitCode = missing.length > 0 ? 1 : 0;
    return;
  }
  const added = await completeLock(lock);
  if (added.length === 0) {
    console.log('package-lock.json is complete: nothing to add');
    return;
  }
  writeFileSync(file, `${JSON.stringify(lock, null, 2)}\n`);
  console.log(`added ${added.length} entries to package-lock.json:`);
  for (const line of added) console.log(`  ${line}`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
