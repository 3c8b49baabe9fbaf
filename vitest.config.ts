import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // examples/ holds example tests of surety/testing (docs/testing.md): documentation that must keep passing.
    include: ['test/**/*.test.ts', 'examples/**/*.test.ts'],
    // Each test file starts its own private redis-server processes; forks keep them isolated.
    pool: 'forks',
    // A fork runs its files one after another in one module graph instead of importing src/ afresh
    // for each: `vitest run` took 356 s instead of 479 s on CI's two cores. Each file still starts and
    // stops its own servers and names its queues uniquely; a test that changes process-wide state
    // (the telemetry test's global tracer, an environment variable) restores it when it ends.
    isolate: false,
    // vitest runs cores - 1 files at once: one at a time on CI's two cores, where the files mostly wait
    // on Redis, child processes and timers (the run used 0.8 of one core). Two at once there took
    // `vitest run` from 240 s to 160 s; machines with more cores keep vitest's default.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    // A temporary directory for the CLI build the CLI tests share (test/helpers/cli-build.ts).
    globalSetup: ['test/helpers/cli-build-dir.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
