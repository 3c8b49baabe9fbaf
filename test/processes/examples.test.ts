/** The examples are documentation: they must keep running, and leave nothing behind. */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { waitUntil } from '../helpers/setup.js';

const run = promisify(execFile);
const file = new URL('../../examples/quickstart.ts', import.meta.url).pathname;

/** A private TMPDIR for one run, so that what the example leaves in it can be seen. */
const tmps: string[] = [];
function privateEnv(): { env: NodeJS.ProcessEnv; leftovers: () => string[] } {
  const tmp = mkdtempSync(join(tmpdir(), 'surety-example-test-'));
  tmps.push(tmp);
  const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp };
  delete env.REDIS_URL; // the example starts its own private redis-server
  // tsx keeps its cache in TMPDIR too: only the example's own directories count.
  return { env, leftovers: () => readdirSync(tmp).filter((f) => f.startsWith('surety-')) };
}
afterEach(() => {
  for (const tmp of tmps.splice(0)) rmSync(tmp, { recursive: true, force: true });
});

describe('examples', () => {
  it('quickstart runs to the end, shows each outcome and removes its redis directory', async () => {
    const { env, leftovers } = privateEnv();
    const { stdout } = await run(process.execPath, ['--import', 'tsx', file], { env, timeout: 30_000 });
    expect(stdout).toMatch(/result of 1 \{ messageId: 'msg-1-1' \}/);
    expect(stdout).toMatch(/result of 2 \{ messageId: 'msg-2-2' \}/);
    expect(stdout).toMatch(/re-adding id 1: isNew=false/);
    expect(stdout).toMatch(/job 4 is dead: ERR_JOB_DEAD/);
    expect(stdout).toContain(
      'counts {"waiting":0,"delayed":0,"blocked":0,"active":0,"completed":3,"dead":1}',
    );
    expect(leftovers()).toEqual([]);
  });

  it('quickstart interrupted with Ctrl-C (SIGINT) stops its redis-server and removes its directory', async () => {
    const { env, leftovers } = privateEnv();
    const child = spawn(process.execPath, ['--import', 'tsx', file], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await waitUntil(() => out.includes('Redis: '), 'the example to start its redis-server', 20_000);
    expect(leftovers()).toHaveLength(1);
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    expect(leftovers()).toEqual([]);
  });

  it('the node:test example of surety/testing passes (docs/testing.md)', async () => {
    // The vitest example (examples/testing/vitest.example.test.ts) runs with the other test files.
    const file = new URL('../../examples/testing/node-test.example.ts', import.meta.url).pathname;
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--test', file], { timeout: 60_000 });
    expect(stdout).toMatch(/^# pass 3$/m);
    expect(stdout).toMatch(/^# fail 0$/m);
  });
});
