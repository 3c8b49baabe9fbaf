/**
 * A TypeScript processor module in a sandbox while the app runs under tsx (issue 33, defect 5): tsx
 * given with --import registers its hooks in the main thread only (on Node before 22.22.3 / 24.11.1),
 * so a thread sandbox registers them itself. Run as users run it: a real `node --import tsx` child
 * using the built package.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it, onTestFinished } from 'vitest';
import { BUILD_TIMEOUT_MS, compiledCli } from '../helpers/cli-build.js';
import { uniqueName, useRedis } from '../helpers/setup.js';

const fx = useRedis();
const APP = fileURLToPath(new URL('../fixtures/tsx-app/app.ts', import.meta.url));
const REPO = fileURLToPath(new URL('../..', import.meta.url));
const TYPED = new URL('../fixtures/tsx-app/typed-processor.ts', import.meta.url).href;

describe('a TypeScript module in a sandbox', () => {
  it(
    'runs in a thread and in a process while the app runs under node --import tsx',
    async () => {
      // The built package (dist/ beside package.json), as an installed one is laid out.
      const index = join(dirname(dirname(await compiledCli())), 'index.js');
      const { stdout } = await promisify(execFile)(
        process.execPath,
        ['--import', 'tsx', APP, index, fx.url, uniqueName('tsx')],
        { cwd: REPO, timeout: 150_000 },
      );
      expect(JSON.parse(stdout)).toEqual({ thread: { doubled: 42 }, process: { doubled: 42 } });
    },
    BUILD_TIMEOUT_MS + 150_000,
  );

  it(
    'is refused at construction with ERR_INVALID_OPTION where tsx cannot be found (and Node does not strip types)',
    async () => {
      // The built package, installed with every dependency but tsx.
      const dir = mkdtempSync(join(tmpdir(), 'surety-no-tsx-'));
      onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
      const pkg = join(dir, 'surety');
      cpSync(dirname(dirname(await compiledCli())), join(pkg, 'dist'), { recursive: true });
      cpSync(join(REPO, 'package.json'), join(pkg, 'package.json'));
      mkdirSync(join(pkg, 'node_modules'));
      for (const dep of readdirSync(join(REPO, 'node_modules'))) {
        if (dep !== 'tsx' && dep !== '.bin')
          symlinkSync(join(REPO, 'node_modules', dep), join(pkg, 'node_modules', dep));
      }
      const script = `
        const { Worker } = await import(${JSON.stringify(join(pkg, 'dist', 'index.js'))});
        const native = Boolean(process.features.typescript);
        try {
          new Worker('q', new URL(${JSON.stringify(TYPED)}), { connection: 'redis://127.0.0.1:1', sandbox: 'thread', autostart: false });
          console.log(JSON.stringify({ native, refused: false }));
        } catch (err) {
          console.log(JSON.stringify({ native, refused: true, name: err.name, code: err.code, message: err.message }));
        }
        process.exit(0); // a Worker that was built would keep retrying its connection`;
      const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
        cwd: pkg,
        timeout: 60_000,
      });
      const out = JSON.parse(stdout) as {
        native: boolean;
        refused: boolean;
        code?: string;
        message?: string;
      };
      if (out.native) expect(out.refused).toBe(false);
      else {
        expect(out).toMatchObject({ refused: true, name: 'ValidationError', code: 'ERR_INVALID_OPTION' });
        expect(out.message).toContain('is TypeScript and tsx is not installed');
      }
    },
    BUILD_TIMEOUT_MS + 60_000,
  );
});
