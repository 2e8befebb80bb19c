import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type AnvilInstance, startAnvil } from '../anvil.js'
import { runEvmCampaign } from './evm.js'
import { campaign } from './random.js'

// Issue 27: mutants of an honest ERC-20 transfer, judged by the guard and executed on Anvil from the
// wallet's key. Seeds and counts are printed.

let anvil: AnvilInstance
beforeAll(async () => {
  anvil = await startAnvil()
})
afterAll(() => anvil?.stop())

describe('EVM calldata guard vs Anvil', () => {
  it('refuses every mutant that executes with an effect beyond the option', {
    timeout: 600_000,
  }, async () => {
    const { seed, count } = campaign(60, 1500)
    const run = await runEvmCampaign(anvil.rpcUrl, anvil.chainId, seed, count)
    const caught = run.verdicts.filter((v) => !v.accepted && v.harm.length > 0).length
    const nftMoves = run.verdicts.filter((v) => v.harm.includes('the wallet’s NFT moved')).length
    console.info(
      `evm differential: seed ${seed}, ${run.verdicts.length} mutants, ${run.verdicts.filter((v) => v.accepted).length} accepted, ` +
        `${caught} harmful ones refused (${nftMoves} moved the wallet’s ERC-721), ${run.violations.length} violations`,
    )
    expect(run.violations, JSON.stringify(run.violations, null, 1)).toEqual([])
    expect(caught).toBeGreaterThan(0)
    expect(nftMoves).toBeGreaterThan(0)
  })
})
