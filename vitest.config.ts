import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Each test file starts its own private redis-server processes; forks keep them isolated.
    pool: 'forks',
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
