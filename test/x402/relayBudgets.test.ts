/**
 * The relay guard's budgets and fee bumps against hostile ERC-1271 payers on Anvil (no cool-down here,
 * so the budgets alone bound them): one payer's reverts exhaust that payer's budget long before its
 * key's, and the key's honest payers still pay; a relay stuck in the pool is bumped only as it is sent,
 * its payment's one reservation raised to the bumped worst case before the replacement is signed.
 */
import { type Abi, type Address, type Hex, parseEther, parseGwei, parseTransaction, toHex } from 'viem'
import { describe, expect, it } from 'vitest'
import artifacts from '../../fixtures/hostile/artifacts.json' with { type: 'json' }
import { mintTestToken } from '../anvil.js'
import { anvilRpc } from '../evm/payers.js'
import { usdc } from '../evm/support.js'
import { until } from '../until.js'
import { hostileRelaySuite } from './hostileRelay.js'

const flagGated = artifacts.FlagGatedAccount as unknown as { abi: Abi; bytecode: Hex }
const perPayer = parseEther('0.0005')
const suite = hostileRelaySuite({
  chainConfig: { feeBumpAfterMs: 1000 },
  config: {
    relays: {
      payerCooldownSeconds: 0,
      gasBudget: { windowSeconds: 3600, perCredential: '0.01', perPayer: '0.0005' },
    },
  },
})
const { attacker, post, relays, settleHeld } = suite
const hostileBody = (from: Address) => suite.authorizationBody(from)

async function deployFlagGated(): Promise<Address> {
  const hash = await attacker().deployContract({ ...flagGated, args: [] } as never)
  const account = (await suite.env.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 25 }))
    .contractAddress!
  await mintTestToken(suite.env.anvil.rpcUrl, suite.env.token, account, usdc(1))
  return account
}

const reservations = () =>
  suite.env.t.db.selectFrom('executor_gas_charges').selectAll().where('state', '=', 'reserved').execute()

/** The account's flag lowered in place (its storage slot 0), without a transaction: the pool stays as it is. */
const lowerFlag = (account: Address) =>
  anvilRpc(suite.env.anvil.rpcUrl, 'anvil_setStorageAt', [
    account,
    toHex(0, { size: 32 }),
    toHex(0, { size: 32 }),
  ])

describe('relay budgets and fee bumps under hostile payers', () => {
  it("one payer's reverts exhaust that payer's budget first: refused payer_gas_budget_exhausted with nothing signed, while its key's honest payers still pay", async () => {
    const account = await deployFlagGated()
    const before = await suite.env.publicClient.getBalance({ address: suite.env.collection })
    let reverted = 0
    let refusal: Record<string, unknown> | undefined
    for (let attempt = 0; attempt < 20 && !refusal; attempt++) {
      await anvilRpc(suite.env.anvil.rpcUrl, 'anvil_setStorageAt', [
        account,
        toHex(0, { size: 32 }),
        toHex(1, { size: 32 }),
      ])
      const { settled } = await settleHeld(hostileBody(account), async () => {
        await attacker().writeContract({
          address: account,
          abi: flagGated.abi,
          functionName: 'setValid',
          args: [false],
          maxFeePerGas: parseGwei('500'),
          maxPriorityFeePerGas: parseGwei('400'),
        } as never)
      })
      if (settled.json.errorMessage === 'The payment failed (relay_reverted).') reverted += 1
      else refusal = settled.json
    }
    expect(reverted).toBeGreaterThanOrEqual(1)
    expect(refusal).toMatchObject({
      success: false,
      errorReason: 'payer_gas_budget_exhausted',
      transaction: '',
    })
    const spent = before - (await suite.env.publicClient.getBalance({ address: suite.env.collection }))
    expect(spent).toBeLessThanOrEqual(perPayer)
    console.info(
      `one payer: ${reverted} reverted relays cost the executor ${spent} wei (per-payer budget ${perPayer})`,
    )

    const sent = (await relays()).length
    const verified = await post('verify', hostileBody(account))
    expect(verified.json).toMatchObject({ isValid: false, invalidReason: 'payer_gas_budget_exhausted' })
    expect((await relays()).length).toBe(sent)

    // The same key, an honest buyer: its merchant's gateway is not locked by the attacker.
    const buyer = await suite.env.buyer(3, usdc(1))
    const honest = await post('settle', await suite.honestBody(buyer.key))
    expect(honest.json).toMatchObject({ success: true, payer: buyer.address })
  }, 180_000)

  it("a relay stuck in the pool is bumped with its one reservation raised to the bumped worst case; the revert settles that reservation to the send's cost", async () => {
    const account = await deployFlagGated()
    const { settled, sent: relay } = await settleHeld(
      hostileBody(account),
      async ({ payment_id: paymentId }) => {
        const ofPayment = async () => (await relays()).filter((r) => r.payment_id === paymentId)
        // The sweep replaces it after feeBumpAfterMs: the reservation is the newest send's worst case.
        const bumped = await until(
          async () => {
            const rows = await ofPayment()
            return rows.length >= 2 ? rows : undefined
          },
          'a fee bump',
          20_000,
        )
        const newest = parseTransaction(bumped.at(-1)!.raw as Hex)
        const oldest = parseTransaction(bumped[0]!.raw as Hex)
        expect(newest.maxFeePerGas!).toBeGreaterThan(oldest.maxFeePerGas!)
        const held = await until(
          async () => {
            const rows = (await reservations()).filter((r) => r.payment_id === paymentId)
            const latest = parseTransaction((await ofPayment()).at(-1)!.raw as Hex)
            return rows.length === 1 && BigInt(rows[0]!.amount) === latest.gas! * latest.maxFeePerGas!
              ? rows
              : undefined
          },
          'the raised reservation',
          20_000,
        )
        expect(held).toHaveLength(1)
        await lowerFlag(account)
      },
    )
    expect(relay).toBeTruthy()
    expect(settled.json).toMatchObject({
      success: false,
      errorMessage: 'The payment failed (relay_reverted).',
    })
    const charges = await suite.env.t.db
      .selectFrom('executor_gas_charges')
      .selectAll()
      .where('payment_id', '=', relay!.payment_id)
      .execute()
    const mined = (await relays()).filter(
      (r) => r.payment_id === relay!.payment_id && r.status === 'reverted',
    )
    expect(mined).toHaveLength(1)
    const receipt = await suite.env.publicClient.getTransactionReceipt({ hash: mined[0]!.hash as Hex })
    expect(charges.map((c) => [c.state, BigInt(c.amount)])).toEqual([
      ['spent', receipt.gasUsed * receipt.effectiveGasPrice],
    ])
  }, 120_000)
})
