import { defineConfig } from 'vitest/config'

// CI_JSON makes `npm test` also write vitest's JSON report, from which .ci/run prints its closing line.
const jsonReport = process.env.CI_JSON

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'protocol/**/*.test.ts', 'adapters/**/*.test.ts', 'test/**/*.test.ts'],
    globalSetup: ['test/globalSetup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: jsonReport ? ['default', ['json', { outputFile: jsonReport }]] : ['default'],
  },
})
