import { describe, expect, it } from 'vitest'
import { formatLiveRelay, runLiveRelay } from '../../bench/cases/liveRelay.js'

/**
 * The live relay benchmark as a black box, small: its own Anvil (a block a second), token and buyers,
 * `caipay serve` as shipped (bin/caipay.js, defaults, embedded PostgreSQL), 20 payers at once, and the
 * one-key ceiling in the same run. Bounds are loose (CI shares its cores); the full-size figures are in
 * docs/performance.md.
 */
describe('live relay benchmark, small', () => {
  it('20 gasless payers against the CLI server: every payment succeeds and settles, money moves exactly once, the ratio to the ceiling is measured', async () => {
    const result = await runLiveRelay({ payers: 20 })
    console.info(formatLiveRelay(result))
    expect(result.caipay.failed).toBe(0)
    expect(result.caipay.movedExactlyOnce).toBe(true)
    expect(result.ceiling.paymentsPerSecond).toBeGreaterThan(0)
    expect(result.ratio).toBeGreaterThan(0)
    // Held reads: each payer asks at least once after its confirm, and not once per poll interval.
    expect(result.caipay.statusRequestsPerPayment).toBeGreaterThanOrEqual(1)
    expect(result.caipay.statusRequestsPerPayment).toBeLessThan(4)
    // Settlements batched per destination and asset: the 20 succeed within a few blocks, well inside
    // one default interval (5 s), so one or two batches pay them all.
    expect(result.caipay.settlementTxsPerPayment).toBeLessThanOrEqual(0.1)
    // Not one relay per block (the old pipeline's 4 slots): 20 relays land in a few blocks.
    expect(result.caipay.relayBlocks).toBeLessThanOrEqual(6)
    expect(result.caipay.blocksToSucceeded.p50).toBeLessThanOrEqual(6)
  }, 180_000)
})
