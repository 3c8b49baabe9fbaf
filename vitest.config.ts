import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // examples/ holds example tests of surety/testing (docs/testing.md): documentation that must keep passing.
    include: ['test/**/*.test.ts', 'examples/**/*.test.ts'],
    // Each test file starts its own private redis-server processes; forks keep them isolated.
    pool: 'forks',
    // A temporary directory for the CLI build the CLI tests share (test/helpers/cli-build.ts).
    globalSetup: ['test/helpers/cli-build-dir.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
