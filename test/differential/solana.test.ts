import { describe, expect, it } from 'vitest'
import { campaign } from './random.js'
import regressions from './regressions.json' with { type: 'json' }
import { runSolanaCampaign, type SolanaCampaign } from './solana.js'

// Issue 27: mutants of an honest Solana payment, judged by the guard and executed in LiteSVM. Seeds
// and counts are printed; a mutant that ever broke the property is kept in regressions.json (the
// three there broke the decoder before issue 27, run with seed 27).

function report(name: string, run: SolanaCampaign) {
  const executed = run.verdicts.filter((v) => v.executed)
  const caught = executed.filter((v) => !v.accepted && v.harm.length > 0)
  console.info(
    `${name}: seed ${run.seed}, ${run.verdicts.length} mutants, ${run.verdicts.filter((v) => v.accepted).length} accepted, ` +
      `${executed.length} executed in LiteSVM, ${caught.length} harmful ones refused, ${run.violations.length} violations`,
  )
  return caught.length
}

describe('Solana guard vs LiteSVM', () => {
  it('refuses every mutant LiteSVM executes with an effect beyond the option', {
    timeout: 600_000,
  }, async () => {
    const { seed, count } = campaign(150, 3000)
    const run = await runSolanaCampaign(seed, count)
    const caught = report('solana differential', run)
    expect(run.violations, JSON.stringify(run.violations, null, 1)).toEqual([])
    // The generator must reach harm the guard refuses, or it proves nothing.
    expect(caught).toBeGreaterThan(0)
  })

  it('replays the kept regression mutants', { timeout: 120_000 }, async () => {
    for (const { seed, index } of regressions.solana) {
      const run = await runSolanaCampaign(seed, index + 1, [index])
      expect(run.violations, JSON.stringify(run.violations)).toEqual([])
    }
  })
})
