import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type AnvilInstance, startAnvil } from '../anvil.js'
import { campaign } from './random.js'
import { runTypedCampaign } from './typed.js'

// Issue 27: mutants of EIP-3009 and EIP-2612 typed data, judged by the guard; every accepted one is
// signed with a real key and executed on Anvil. Seeds and counts are printed.

let anvil: AnvilInstance
beforeAll(async () => {
  anvil = await startAnvil()
})
afterAll(() => anvil?.stop())

describe('EIP-712 typed data guard vs Anvil', () => {
  it('signs no mutant whose execution moves more than the option', { timeout: 600_000 }, async () => {
    const { seed, count } = campaign(80, 2000)
    const run = await runTypedCampaign(anvil.rpcUrl, anvil.chainId, seed, count)
    const accepted = run.verdicts.filter((v) => v.accepted)
    const caught = run.verdicts.filter((v) => !v.accepted && v.harm.length > 0).length
    console.info(
      `typed-data differential: seed ${seed}, ${run.verdicts.length} mutants, ${accepted.length} accepted, ` +
        `${accepted.filter((v) => v.executed.length > 0).length} executed on Anvil, ` +
        `${caught} refused ones harmful when signed as sent, ${run.violations.length} violations`,
    )
    expect(run.violations, JSON.stringify(run.violations, null, 1)).toEqual([])
    // The generator is worth something only if honest-looking mutants get through and execute.
    expect(accepted.some((v) => v.executed.length > 0)).toBe(true)
    expect(caught).toBeGreaterThan(0)
  })
})
