import { defineConfig } from 'vitest/config'

/** Runs bench/refundLatency.test.ts alone (npm test does not include bench/). */
export default defineConfig({
  test: {
    globalSetup: ['test/globalSetup.ts'],
    include: ['bench/refundLatency.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 60_000,
  },
})
