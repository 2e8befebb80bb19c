import { type Hex, parseTransaction } from 'viem'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { reconcileEvmChain } from '../../src/server/chains/evm/ledger.js'
import type { ServerConfig } from '../../src/server/config.js'
import type { JobRunner } from '../../src/server/jobs/runner.js'
import { listDifferences } from '../../src/server/ledger/reconcile.js'
import { type AnvilControl, anvilControl } from '../anvil.js'
import { until } from '../until.js'
import { confirmGasless, createEvmEnv, type EvmEnv, fastRuntime, relayRows, usdc } from './support.js'

/**
 * One payer's relay left below the market fee, its fee bump refused by that payer's budget, must not
 * hold up the executor key: every later nonce (an honest payer's relay) waits behind it. The bump is
 * replaced with a cancellation (docs/security-model.md, "Fee bumps"): the key moves on, the honest
 * payment lands, the stuck one fails with its authorization unused.
 */
describe('a fee bump refused by the payer budget', () => {
  let env: EvmEnv
  let control: AnvilControl
  let runner: JobRunner | undefined
  beforeAll(async () => {
    env = await createEvmEnv()
    control = anvilControl(env.anvil.rpcUrl)
  })
  afterAll(async () => {
    await runner?.stop()
    await control?.setAutomine(true)
    await env?.close()
  })

  it('cancels the stuck relay so the key moves on: the honest payment behind it lands, the ledger reconciles', async () => {
    const abusive = await env.buyer(2, usdc(50))
    const honest = await env.buyer(3, usdc(50))
    const [abusiveBefore, honestBefore] = [
      await env.balance(abusive.address),
      await env.balance(honest.address),
    ]
    const config = env.t.app.config
    const chains = Object.fromEntries(
      Object.entries(config.chains).map(([caip2, chain]) => [caip2, { ...chain, feeBumpAfterMs: 1_000 }]),
    )
    const runtime = fastRuntime(env, {
      config: { ...config, chains } as ServerConfig,
      receiptTimeoutMs: 1_000,
    })
    await control.setAutomine(false)
    const stuck = await confirmGasless(env, abusive)
    runner = env.startRunner(runtime.jobHandlers)
    const [relay] = await until(async () => {
      const rows = await relayRows(env, stuck.paymentId)
      return rows.length > 0 ? rows : undefined
    }, 'the abusive payer relay')
    const behind = await confirmGasless(env, honest)
    const [next] = await until(async () => {
      const rows = await relayRows(env, behind.paymentId)
      return rows.length > 0 ? rows : undefined
    }, 'the honest payer relay')
    expect(BigInt(next!.nonce)).toBe(BigInt(relay!.nonce) + 1n)

    // The abusive payer has spent its budget this window (its other failed sends): no bump of its relay fits.
    const reservation = await env.t.db
      .selectFrom('executor_gas_charges')
      .select(['payer', 'credential_id', 'chain_id'])
      .where('payment_id', '=', stuck.paymentId)
      .where('state', '=', 'reserved')
      .executeTakeFirstOrThrow()
    const now = new Date()
    await env.t.db
      .insertInto('executor_gas_charges')
      .values({
        ...reservation,
        payment_id: 'pay_earlier_failed_sends',
        state: 'spent',
        amount: (10n ** 16n).toString(),
        created_at: now,
        updated_at: now,
      } as never)
      .execute()
    // The market fee jumps past both relays' caps: the next block leaves them out.
    const maxFee = parseTransaction(relay!.raw as Hex).maxFeePerGas!
    await control.setNextBaseFee(maxFee * 4n)
    await control.mine(1)
    await control.setAutomine(true)

    const honestFinal = await env.waitFinal(behind.paymentId, 30_000)
    expect(honestFinal.status).toBe('succeeded')
    const stuckFinal = await env.waitFinal(stuck.paymentId, 30_000)
    expect(stuckFinal).toMatchObject({ status: 'failed' })
    const failure = await env.t.db
      .selectFrom('payments')
      .select('failure_code')
      .where('id', '=', stuck.paymentId)
      .executeTakeFirstOrThrow()
    // Failed with the refusal that caused the cancellation (the abusive payer's spent budget), not as a
    // relay that merely never landed.
    expect(failure.failure_code).toBe('payer_gas_budget_exhausted')

    // The cancellation took the stuck relay's nonce: a 0-value self-transfer of the executor, mined.
    const cancels = await env.t.db
      .selectFrom('evm_transactions')
      .selectAll()
      .where('payment_id', '=', stuck.paymentId)
      .where('purpose', '=', 'cancel')
      .execute()
    const mined = cancels.filter((row) => row.status === 'succeeded')
    expect(mined).toHaveLength(1)
    expect(mined[0]).toMatchObject({
      step: 'relay',
      nonce: relay!.nonce,
      cancel_code: 'payer_gas_budget_exhausted',
    })
    const tx = await env.publicClient.getTransaction({ hash: mined[0]!.hash as Hex })
    expect(tx.to?.toLowerCase()).toBe(env.collection.toLowerCase())
    expect(tx.value).toBe(0n)
    expect(tx.maxFeePerGas!).toBeGreaterThan(maxFee)
    expect((await relayRows(env, stuck.paymentId)).map((row) => row.status)).toEqual(['dropped'])

    // Balances from the chain: the honest payer paid once, the abusive one kept its money.
    expect(await env.balance(honest.address)).toBe(honestBefore - usdc(10))
    expect(await env.balance(abusive.address)).toBe(abusiveBefore)
    await env.waitSettled(behind.paymentId)
    await reconcileEvmChain(env.t.db, runtime.chains[0]!)
    expect(await listDifferences(env.t.db, { open: true })).toEqual([])
  }, 90_000)
})
