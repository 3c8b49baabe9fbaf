/** The examples are documentation: they must keep running. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);

describe('examples', () => {
  it('quickstart runs to the end and shows each outcome', async () => {
    const file = new URL('../examples/quickstart.ts', import.meta.url).pathname;
    const env = { ...process.env };
    delete env.REDIS_URL; // the example starts its own private redis-server
    const { stdout } = await run(process.execPath, ['--import', 'tsx', file], { env, timeout: 30_000 });
    expect(stdout).toMatch(/result of 1 \{ messageId: 'msg-1-1' \}/);
    expect(stdout).toMatch(/result of 2 \{ messageId: 'msg-2-2' \}/);
    expect(stdout).toMatch(/re-adding id 1: isNew=false/);
    expect(stdout).toMatch(/job 4 is dead: ERR_JOB_DEAD/);
    expect(stdout).toContain(
      'counts {"waiting":0,"delayed":0,"blocked":0,"active":0,"completed":3,"dead":1}',
    );
  });

  it('the node:test example of surety/testing passes (docs/testing.md)', async () => {
    // The vitest example (examples/testing/vitest.example.test.ts) runs with the other test files.
    const file = new URL('../examples/testing/node-test.example.ts', import.meta.url).pathname;
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--test', file], { timeout: 60_000 });
    expect(stdout).toMatch(/^# pass 3$/m);
    expect(stdout).toMatch(/^# fail 0$/m);
  });
});
