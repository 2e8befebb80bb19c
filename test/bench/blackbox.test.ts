import { describe, expect, it } from 'vitest'
import { formatBlackbox, runBlackbox } from '../../bench/blackbox/liveRelay.js'

/**
 * The black-box benchmark, small (bench/blackbox/liveRelay.ts): its own Anvil mining a block a second,
 * its own token and buyers, `caipay serve` started as an operator does, 12 wallets paying through the
 * wallet library and confirming at once. Only what cannot be noise is asserted: every payment
 * succeeded, and the money moved exactly once as the chain and the merchant API show it. The ratio to
 * the ceiling is printed, not judged (2 shared cores).
 */
describe('black-box live relay, small', () => {
  it('12 wallets confirming at once against caipay serve: all succeed, each buyer charged once, the destination credited the same', async () => {
    const result = await runBlackbox({ payers: 12 })
    console.info(formatBlackbox(result))
    const { caipay } = result
    expect(caipay.failures).toEqual([])
    expect(caipay.succeeded).toBe(12)
    expect(caipay.money).toEqual({
      buyersDebitedOnce: true,
      buyersDebited: 12_000_000n,
      destinationCredited: 12_000_000n,
      collectionBack: true,
      settlementsRecorded: true,
      txIdsOnChain: true,
      exactlyOnce: true,
    })
    // The executor sent the 12 relays and its settlements, nothing else (no relay signed twice).
    expect(caipay.executorTxs).toBe(12 + caipay.settlementTxs)
    expect(caipay.settlementTxs).toBeGreaterThanOrEqual(1)
    expect(caipay.settlementTxs).toBeLessThanOrEqual(12)
  }, 120_000)
})
