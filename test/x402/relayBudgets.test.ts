/**
 * The relay guard's budgets and fee bumps against hostile ERC-1271 payers on Anvil (no cool-down here,
 * so the budgets alone bound them): one payer's reverts exhaust that payer's budget long before its
 * key's, and the key's honest payers still pay; a relay stuck in the pool is bumped only as it is sent,
 * its payment's one reservation raised to the bumped worst case before the replacement is signed.
 */
import { randomBytes } from 'node:crypto'
import { ExactEvmScheme as ExactEvmClient } from '@x402/evm/exact/client'
import {
  type Abi,
  type Address,
  createWalletClient,
  type Hex,
  http,
  parseEther,
  parseGwei,
  parseTransaction,
  toHex,
} from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import artifacts from '../../fixtures/hostile/artifacts.json' with { type: 'json' }
import { anvilChain, anvilControl, anvilPrivateKeys, mintTestToken } from '../anvil.js'
import { anvilRpc } from '../evm/payers.js'
import { createEvmEnv, type EvmEnv, usdc } from '../evm/support.js'
import { facilitatorBody, facilitatorPost } from './support.js'

const flagGated = artifacts.FlagGatedAccount as unknown as { abi: Abi; bytecode: Hex }
const perPayer = parseEther('0.0005')
let env: EvmEnv
const price = usdc(0.01)
const post = facilitatorPost(
  () => env.t,
  () => env.liveKey,
)

beforeAll(async () => {
  env = await createEvmEnv({
    chainConfig: { feeBumpAfterMs: 1000 },
    config: {
      relays: {
        payerCooldownSeconds: 0,
        gasBudget: { windowSeconds: 3600, perCredential: '0.01', perPayer: '0.0005' },
      },
    },
  })
  env.startRunner()
}, 60_000)

afterAll(async () => {
  await env?.close()
})

function attacker() {
  return createWalletClient({
    chain: anvilChain(env.anvil.chainId, env.anvil.rpcUrl),
    transport: http(env.anvil.rpcUrl),
    account: privateKeyToAccount(anvilPrivateKeys[6]),
  })
}

async function deployFlagGated(): Promise<Address> {
  const hash = await attacker().deployContract({ ...flagGated, args: [] } as never)
  const account = (await env.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 25 }))
    .contractAddress!
  await mintTestToken(env.anvil.rpcUrl, env.token, account, usdc(1))
  return account
}

function requirements() {
  return {
    scheme: 'exact',
    network: env.anvil.caip2 as `${string}:${string}`,
    amount: price.toString(),
    asset: env.token,
    payTo: env.merchant.destination,
    maxTimeoutSeconds: 60,
    extra: { name: 'USD Coin', version: '2' },
  }
}

function hostileBody(from: Address) {
  const payload = {
    x402Version: 2,
    accepted: requirements(),
    payload: {
      authorization: {
        from,
        to: env.merchant.destination,
        value: price.toString(),
        validAfter: '0',
        validBefore: String(Math.floor(Date.now() / 1000) + 600),
        nonce: toHex(randomBytes(32)),
      },
      signature: `0x${'ab'.repeat(65)}`,
    },
  }
  return facilitatorBody(payload, requirements() as never)
}

const relays = () =>
  env.t.db.selectFrom('evm_transactions').selectAll().where('purpose', '=', 'relay').orderBy('id').execute()
const reservations = () =>
  env.t.db.selectFrom('executor_gas_charges').selectAll().where('state', '=', 'reserved').execute()

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

/** The account's flag lowered in place (its storage slot 0), without a transaction: the pool stays as it is. */
const lowerFlag = (account: Address) =>
  anvilRpc(env.anvil.rpcUrl, 'anvil_setStorageAt', [account, toHex(0, { size: 32 }), toHex(0, { size: 32 })])

/** Settles with mining held; the relay's first transaction in the pool is handed to `meanwhile`, then mined. */
async function settleHeld(body: unknown, meanwhile: (relayHash: Hex, paymentId: string) => Promise<void>) {
  const control = anvilControl(env.anvil.rpcUrl)
  const known = new Set((await relays()).map((r) => r.hash))
  await control.setAutomine(false)
  try {
    let answered = false
    const settled = post('settle', body).finally(() => {
      answered = true
    })
    const relay = await until('a relay in the pool, or the answer', async () => {
      if (answered) return null
      const fresh = (await relays()).find((r) => !known.has(r.hash))
      return fresh && (await control.pending()).includes(fresh.hash as Hex) ? fresh : undefined
    })
    if (relay) {
      await meanwhile(relay.hash as Hex, relay.payment_id)
      await control.mine(1)
    }
    return { settled: await settled, relay }
  } finally {
    await control.setAutomine(true)
  }
}

describe('relay budgets and fee bumps under hostile payers', () => {
  it("one payer's reverts exhaust that payer's budget first: refused payer_gas_budget_exhausted with nothing signed, while its key's honest payers still pay", async () => {
    const account = await deployFlagGated()
    const before = await env.publicClient.getBalance({ address: env.collection })
    let reverted = 0
    let refusal: Record<string, unknown> | undefined
    for (let attempt = 0; attempt < 20 && !refusal; attempt++) {
      await anvilRpc(env.anvil.rpcUrl, 'anvil_setStorageAt', [
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
    const spent = before - (await env.publicClient.getBalance({ address: env.collection }))
    expect(spent).toBeLessThanOrEqual(perPayer)
    console.info(
      `one payer: ${reverted} reverted relays cost the executor ${spent} wei (per-payer budget ${perPayer})`,
    )

    const sent = (await relays()).length
    const verified = await post('verify', hostileBody(account))
    expect(verified.json).toMatchObject({ isValid: false, invalidReason: 'payer_gas_budget_exhausted' })
    expect((await relays()).length).toBe(sent)

    // The same key, an honest buyer: its merchant's gateway is not locked by the attacker.
    const buyer = await env.buyer(3, usdc(1))
    const created = await new ExactEvmClient(privateKeyToAccount(buyer.key)).createPaymentPayload(
      2,
      requirements() as never,
    )
    const honest = await post(
      'settle',
      facilitatorBody(
        { x402Version: 2, accepted: requirements(), payload: created.payload },
        requirements() as never,
      ),
    )
    expect(honest.json).toMatchObject({ success: true, payer: buyer.address })
  }, 180_000)

  it("a relay stuck in the pool is bumped with its one reservation raised to the bumped worst case; the revert settles that reservation to the send's cost", async () => {
    const account = await deployFlagGated()
    const { settled, relay } = await settleHeld(hostileBody(account), async (_hash, paymentId) => {
      const ofPayment = async () => (await relays()).filter((r) => r.payment_id === paymentId)
      // The sweep replaces it after feeBumpAfterMs: the reservation is the newest send's worst case.
      const bumped = await until('a fee bump', async () => {
        const rows = await ofPayment()
        return rows.length >= 2 ? rows : undefined
      })
      const newest = parseTransaction(bumped.at(-1)!.raw as Hex)
      const oldest = parseTransaction(bumped[0]!.raw as Hex)
      expect(newest.maxFeePerGas!).toBeGreaterThan(oldest.maxFeePerGas!)
      const held = await until('the raised reservation', async () => {
        const rows = (await reservations()).filter((r) => r.payment_id === paymentId)
        const latest = parseTransaction((await ofPayment()).at(-1)!.raw as Hex)
        return rows.length === 1 && BigInt(rows[0]!.amount) === latest.gas! * latest.maxFeePerGas!
          ? rows
          : undefined
      })
      expect(held).toHaveLength(1)
      await lowerFlag(account)
    })
    expect(relay).toBeTruthy()
    expect(settled.json).toMatchObject({
      success: false,
      errorMessage: 'The payment failed (relay_reverted).',
    })
    const charges = await env.t.db
      .selectFrom('executor_gas_charges')
      .selectAll()
      .where('payment_id', '=', relay!.payment_id)
      .execute()
    const mined = (await relays()).filter(
      (r) => r.payment_id === relay!.payment_id && r.status === 'reverted',
    )
    expect(mined).toHaveLength(1)
    const receipt = await env.publicClient.getTransactionReceipt({ hash: mined[0]!.hash as Hex })
    expect(charges.map((c) => [c.state, BigInt(c.amount)])).toEqual([
      ['spent', receipt.gasUsed * receipt.effectiveGasPrice],
    ])
  }, 120_000)
})
