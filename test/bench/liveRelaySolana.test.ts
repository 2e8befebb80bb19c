import { describe, expect, it } from 'vitest'
import { formatLiveSolana, runLiveSolana } from '../../bench/cases/liveRelaySolana.js'

/**
 * The live Solana benchmark as a black box, small: its own litesvm cluster (a slot every 400 ms), mint
 * and buyers, `caipay serve` as shipped (bin/caipay.js, defaults, embedded PostgreSQL), 20 payers at
 * once, and the one-fee-payer ceiling in the same run. Bounds are loose (CI shares its cores); the
 * full-size figures are in docs/performance.md.
 */
describe('live Solana benchmark, small', () => {
  it('20 payers against the CLI server: every payment succeeds and settles, money moves exactly once, the ratio to the ceiling is measured', async () => {
    const result = await runLiveSolana({ payers: 20 })
    console.info(formatLiveSolana(result))
    expect(result.caipay.failed).toBe(0)
    expect(result.caipay.movedExactlyOnce).toBe(true)
    expect(result.ceiling.paymentsPerSecond).toBeGreaterThan(0)
    expect(result.ratio).toBeGreaterThan(0)
    // Settlements batched per destination and interval: 20 payments in a few transfers, not 20.
    expect(result.caipay.settlementTxsPerPayment).toBeLessThanOrEqual(0.25)
    // Statuses read in batches by the chain's watcher, not one call per transaction per poll: at most
    // one call per payment and settlement, and some call carried several signatures.
    expect(result.caipay.statusCalls).toBeLessThanOrEqual(2 * result.payers)
    expect(result.caipay.signaturesPerStatusCall.max).toBeGreaterThan(1)
  }, 180_000)
})
