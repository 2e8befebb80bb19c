import { sql } from 'kysely'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { statementsOf } from '../../../test/gateway/support.js'
import { createTestDatabase, type TestDatabase } from '../../../test/postgres.js'
import {
  type CooldownSubject,
  coolDownPayer,
  GasBudgetExhausted,
  guardRefusal,
  PayerCoolingDown,
  type RelayGuardSettings,
  recordLandedSend,
  relayGuardOrRaise,
  relayGuardRaised,
  reserveExecutorFee,
  reserveExecutorFees,
  settleGasCharge,
} from './relayGuards.js'

let pg: TestDatabase
const chainId = 'eip155:31337'
const settings: RelayGuardSettings = {
  cooldownMs: 600_000,
  windowMs: 3_600_000,
  budget: () => 1_000n,
  payerBudget: () => 300n,
}
const payer = (name: string) => [{ subject: name, kind: 'address' as const }]
const reserve = (paymentId: string, amount: bigint, who = 'payer-a', credentialId = 'key-1') =>
  reserveExecutorFee(pg.db, settings, { chainId, paymentId, credentialId, subjects: payer(who), amount })

function charges() {
  return pg.db
    .selectFrom('executor_gas_charges')
    .select(['payment_id', 'state', 'amount', 'payer'])
    .orderBy('id')
    .execute()
    .then((rows) => rows.map((r) => ({ ...r, amount: BigInt(r.amount) })))
}

beforeAll(async () => {
  pg = await createTestDatabase()
})

afterAll(async () => {
  await pg?.drop()
})

beforeEach(async () => {
  await pg.db.deleteFrom('executor_gas_charges').execute()
  await pg.db.deleteFrom('payer_cooldowns').execute()
})

describe('executor fee reservations', () => {
  it('a payment holds one reservation: re-sends keep it, a fee bump raises it, a landed deployment stays in it, the end settles it to what the sends cost', async () => {
    await reserve('p1', 100n)
    await reserve('p1', 100n)
    await reserve('p1', 80n)
    expect(await charges()).toEqual([{ payment_id: 'p1', state: 'reserved', amount: 100n, payer: 'payer-a' }])
    await reserve('p1', 150n)
    expect((await charges()).map((c) => c.amount)).toEqual([150n])
    // A deployment that landed for 60, then its relay's worst case of 100: 160 held.
    await recordLandedSend(pg.db, { chainId, paymentId: 'p1', cost: 60n })
    await reserve('p1', 100n)
    expect((await charges()).map((c) => c.amount)).toEqual([160n])
    const charged = await settleGasCharge(pg.db, {
      chainId,
      credentialId: 'key-1',
      paymentId: 'p1',
      spent: 40n,
    })
    expect(charged).toBe(100n)
    expect(await charges()).toEqual([{ payment_id: 'p1', state: 'spent', amount: 100n, payer: 'payer-a' }])
    // Settled again (a run that stopped before failing the payment): charged once.
    expect(
      await settleGasCharge(pg.db, { chainId, credentialId: 'key-1', paymentId: 'p1', spent: 40n }),
    ).toBe(100n)
    expect(await charges()).toHaveLength(1)
  })

  it('a payment that paid gives its reservation back; one that failed without costing anything too', async () => {
    await reserve('paid', 100n)
    await reserve('refused', 100n)
    await settleGasCharge(pg.db, { chainId, credentialId: 'key-1', paymentId: 'paid' })
    expect(
      await settleGasCharge(pg.db, { chainId, credentialId: 'key-1', paymentId: 'refused', spent: 0n }),
    ).toBe(0n)
    expect(await charges()).toEqual([])
  })

  it('a fee bump past the budget is refused and leaves the reservation as it was', async () => {
    await reserve('p1', 250n)
    await expect(reserve('p1', 350n)).rejects.toBeInstanceOf(GasBudgetExhausted)
    expect((await charges()).map((c) => c.amount)).toEqual([250n])
  })

  it("one payer's failures lock out that payer first: the credential's other payers still send", async () => {
    await reserve('a1', 200n)
    await settleGasCharge(pg.db, { chainId, credentialId: 'key-1', paymentId: 'a1', spent: 200n })
    const refused = await reserve('a2', 150n).catch((error) => error)
    expect(refused).toBeInstanceOf(GasBudgetExhausted)
    expect(refused.scope).toBe('payer')
    expect(refused.message).toMatch(/This payer's executor fee budget/)
    const verdict = await guardRefusal(pg.db, settings, {
      chainId,
      subjects: payer('payer-a'),
      credentialId: 'key-1',
      needed: 150n,
    })
    expect(verdict).toMatchObject({ scope: 'payer' })
    await reserve('b1', 150n, 'payer-b')
    expect(
      await guardRefusal(pg.db, settings, { chainId, subjects: payer('payer-b'), credentialId: 'key-1' }),
    ).toBe(undefined)
  })

  it('a cooled-down payer is refused before any reservation', async () => {
    await coolDownPayer(pg.db, {
      chainId,
      subjects: payer('payer-a'),
      settings,
      reason: 'its relay reverted',
      paymentId: 'earlier',
    })
    await expect(reserve('p1', 10n)).rejects.toBeInstanceOf(PayerCoolingDown)
    expect(await charges()).toEqual([])
  })

  it('sends racing on many connections never reserve past either budget', async () => {
    // 20 payers under one credential (budget 1000): 10 reservations of 100 fit.
    const byCredential = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => reserve(`c${i}`, 100n, `payer-${i}`)),
    )
    expect(byCredential.filter((r) => r.status === 'fulfilled')).toHaveLength(10)
    expect((await charges()).reduce((sum, c) => sum + c.amount, 0n)).toBe(1_000n)
    await pg.db.deleteFrom('executor_gas_charges').execute()
    // One payer under 20 credentials (payer budget 300): 3 fit.
    const byPayer = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => reserve(`p${i}`, 100n, 'payer-x', `key-${i}`)),
    )
    expect(byPayer.filter((r) => r.status === 'fulfilled')).toHaveLength(3)
    for (const r of byPayer) if (r.status === 'rejected') expect(r.reason).toMatchObject({ scope: 'payer' })
    expect((await charges()).reduce((sum, c) => sum + c.amount, 0n)).toBe(300n)
  })

  it('each check is one statement: the guard before a signature, the refusal at verify and confirm, the settlement', async () => {
    const guard = await statementsOf(() => reserve('p1', 100n))
    expect(guard.statements).toHaveLength(1)
    const verdict = await statementsOf(() =>
      guardRefusal(pg.db, settings, { chainId, subjects: payer('payer-a'), credentialId: 'key-1' }),
    )
    expect(verdict.statements).toHaveLength(1)
    const settled = await statementsOf(() =>
      settleGasCharge(pg.db, { chainId, credentialId: 'key-1', paymentId: 'p1', spent: 5n }),
    )
    expect(settled.statements).toHaveLength(1)
  })

  it("a group's reservations in one statement (the EVM sender's): each send's verdict is the single guard's, in order, a refused one reserving nothing", async () => {
    await coolDownPayer(pg.db, {
      chainId,
      subjects: payer('payer-c'),
      settings,
      reason: 'its relay reverted',
      paymentId: 'earlier',
    })
    const group = [
      { paymentId: 'g1', who: 'payer-a', amount: 200n },
      { paymentId: 'g2', who: 'payer-a', amount: 200n },
      { paymentId: 'g3', who: 'payer-b', amount: 250n },
      { paymentId: 'g4', who: 'payer-c', amount: 10n },
      { paymentId: 'g5', who: 'payer-d', amount: 300n },
      { paymentId: 'g6', who: 'payer-e', amount: 300n },
    ]
    const reservations = group.map(({ paymentId, who, amount }) => ({
      paymentId,
      credentialId: 'key-1',
      subjects: payer(who),
      amount,
      guards: settings,
    }))
    const { result: verdicts, statements } = await statementsOf(() =>
      reserveExecutorFees(pg.db, chainId, reservations),
    )
    expect(statements).toHaveLength(1)
    const grouped = await charges()
    // The same sends one by one, from the same start.
    await pg.db.deleteFrom('executor_gas_charges').execute()
    const single: unknown[] = []
    for (const { paymentId, who, amount } of group)
      single.push(await reserve(paymentId, amount, who).catch((error: Error) => error))
    expect(verdicts.map(String)).toEqual(single.map(String))
    expect(verdicts.map((v) => v?.constructor)).toEqual([
      undefined,
      GasBudgetExhausted, // payer-a's 300 spent by g1
      undefined,
      PayerCoolingDown,
      undefined, // the credential's 1000: 200 + 250 + 300 so far
      GasBudgetExhausted, // 1050 past it
    ])
    expect((verdicts[5] as GasBudgetExhausted).scope).toBe('credential')
    expect(grouped).toEqual(await charges())
    expect(grouped.map((c) => c.payment_id)).toEqual(['g1', 'g3', 'g5'])
    expect(await reserveExecutorFees(pg.db, chainId, [])).toEqual([])
  })
})

describe('the confirm guard in a statement (relayGuardOrRaise, migration 037)', () => {
  /** The raising form's verdict, as the confirm's statement would meet it: undefined when it passed. */
  async function raisingVerdict(input: Parameters<typeof relayGuardOrRaise>[1]) {
    const { check } = relayGuardOrRaise(settings, input)
    try {
      const { rows } = await sql<{ allowed: boolean }>`SELECT ${check} AS allowed`.execute(pg.db)
      expect(rows[0]!.allowed).toBe(true)
      return undefined
    } catch (error) {
      const refusal = relayGuardRaised(error, settings, input)
      if (!refusal) throw error
      return refusal
    }
  }

  it("refuses exactly when guardRefusal does, with its words: cool-downs (address, code hash), the payer's budget, then the credential's", async () => {
    const now = new Date()
    const cases: { who: string; subjects: CooldownSubject[]; credentialId: string }[] = []
    const subjectsOf = (who: string): CooldownSubject[] => [
      { subject: who, kind: 'address' },
      { subject: `code-of-${who}`, kind: 'code_hash' },
    ]
    // Allowed: nothing recorded for this payer or credential.
    cases.push({ who: 'fresh', subjects: subjectsOf('fresh'), credentialId: 'key-fresh' })
    // Cooled down by address, and another by its code hash.
    await coolDownPayer(pg.db, {
      chainId,
      subjects: payer('cooled'),
      settings,
      reason: 'reverted',
      paymentId: 'x1',
    })
    cases.push({ who: 'cooled', subjects: subjectsOf('cooled'), credentialId: 'key-fresh' })
    await coolDownPayer(pg.db, {
      chainId,
      subjects: [{ subject: 'code-of-copied', kind: 'code_hash' }],
      settings,
      reason: 'its copy reverted',
      paymentId: 'x2',
    })
    cases.push({ who: 'copied', subjects: subjectsOf('copied'), credentialId: 'key-fresh' })
    // The payer's budget spent (300), the credential's not.
    await reserve('spent-payer', 300n, 'spender', 'key-2')
    cases.push({ who: 'spender', subjects: subjectsOf('spender'), credentialId: 'key-2' })
    // The credential's budget spent (1,000) by other payers; this payer has used nothing.
    for (const [i, who] of ['b1', 'b2', 'b3', 'b4'].entries())
      await reserve(`spent-key-${i}`, 250n, who, 'key-3')
    cases.push({ who: 'other', subjects: subjectsOf('other'), credentialId: 'key-3' })
    // A payer close to its budget (299 of 300) is still allowed: nothing is needed at confirm.
    await reserve('almost', 299n, 'almost', 'key-4')
    cases.push({ who: 'almost', subjects: subjectsOf('almost'), credentialId: 'key-4' })

    const verdicts = []
    for (const c of cases) {
      const input = { chainId, subjects: c.subjects, credentialId: c.credentialId }
      const read = await guardRefusal(pg.db, settings, { ...input, now })
      const raised = await raisingVerdict({ ...input, now })
      expect([c.who, raised?.constructor, raised?.message]).toEqual([c.who, read?.constructor, read?.message])
      verdicts.push(read?.constructor.name ?? 'allowed')
    }
    expect(verdicts).toEqual([
      'allowed',
      'PayerCoolingDown',
      'PayerCoolingDown',
      'GasBudgetExhausted',
      'GasBudgetExhausted',
      'allowed',
    ])
  })

  it('is not its own round trip and takes no lock: the expression of a statement, nothing written', async () => {
    const before = await charges()
    const { statements } = await statementsOf(() =>
      raisingVerdict({ chainId, subjects: payer('quiet'), credentialId: 'key-q', now: new Date() }),
    )
    expect(statements).toHaveLength(1)
    expect(await charges()).toEqual(before)
    // Another CP429 (a fee reservation's) is not the guard's.
    expect(
      relayGuardRaised({ code: 'CP429', detail: '{"refusal":"budget"}' }, settings, {
        chainId,
        subjects: [],
      }),
    ).toBe(undefined)
  })
})
