import { defineConfig } from 'vitest/config'

// CI_JSON makes `npm test` also write vitest's JSON report, from which .ci/run prints its closing line.
const jsonReport = process.env.CI_JSON

/**
 * The suites that run a second time with every server fast path off (src/server/fastPath.ts): the
 * answers must be the same as the plain path's. Only these, to keep CI's time in check.
 */
const fastPathSuites = [
  'test/gateway/**/*.test.ts',
  'test/server/payments.test.ts',
  'test/server/paymentEvents.test.ts',
  // Solana live confirm: the blockhash validity read shared per slot (chains/solana/chain.ts) against
  // asking the node every time, quote_expired included.
  'test/solana-live/payment.test.ts',
  // A live gasless confirm as one statement (gateway/confirm.ts) against the transaction of several.
  'test/evm/confirmStatement.test.ts',
  // The relay job simulating its call only as sent (chains/evm/relay.ts `asSentOnly`) against also
  // plainly before its estimate: a used authorization is refused either way, nothing broadcast.
  'test/evm/gasless.test.ts',
]

export default defineConfig({
  test: {
    globalSetup: ['test/globalSetup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    reporters: jsonReport ? ['default', ['json', { outputFile: jsonReport }]] : ['default'],
    projects: [
      {
        extends: true,
        test: {
          name: 'caipay',
          include: [
            'src/**/*.test.ts',
            'protocol/**/*.test.ts',
            'adapters/**/*.test.ts',
            'test/**/*.test.ts',
          ],
        },
      },
      {
        extends: true,
        test: { name: 'fast paths off', include: fastPathSuites, env: { CAIPAY_FAST_PATHS: '0' } },
      },
    ],
  },
})
