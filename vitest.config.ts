import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // 2 cores: one Temporal dev server is shared; two test files at a time keep it and the workers busy.
    maxWorkers: 2,
    pool: 'forks',
  },
});
