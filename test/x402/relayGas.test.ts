/**
 * Hostile payers against caipay's x402 facilitator on Anvil, gas read from the executor's balance:
 * ERC-1271 accounts valid only where a simulation runs (gas price 0), or valid in every simulation and
 * flipped ahead of the relay in its block; a flood of such accounts, each with its own code; and the
 * gateway's confirm for a payer cooled down there.
 */
import { randomBytes } from 'node:crypto'
import { ExactEvmScheme as ExactEvmClient } from '@x402/evm/exact/client'
import {
  type Abi,
  type Address,
  createWalletClient,
  getAddress,
  type Hex,
  http,
  parseGwei,
  toHex,
} from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import artifacts from '../../fixtures/hostile/artifacts.json' with { type: 'json' }
import { anvilChain, anvilControl, anvilPrivateKeys, mintTestToken } from '../anvil.js'
import { createEvmEnv, type EvmEnv, isKind, usdc } from '../evm/support.js'
import { facilitatorBody, facilitatorPost } from './support.js'

type HostileName = keyof typeof artifacts
const artifact = (name: HostileName) => artifacts[name] as unknown as { abi: Abi; bytecode: Hex }

let env: EvmEnv
const price = usdc(0.01)
/** The flood's budget: wei one credential's failed relays may cost per window. */
const budgetWei = 300_000_000_000_000n
const post = facilitatorPost(
  () => env.t,
  () => env.liveKey,
)

beforeAll(async () => {
  env = await createEvmEnv({
    config: {
      relays: { payerCooldownSeconds: 600, gasBudget: { windowSeconds: 3600, perCredential: '0.0003' } },
    },
  })
  env.startRunner()
}, 60_000)

afterAll(async () => {
  await env?.close()
})

function wallet(key: Hex) {
  return createWalletClient({
    chain: anvilChain(env.anvil.chainId, env.anvil.rpcUrl),
    transport: http(env.anvil.rpcUrl),
    account: privateKeyToAccount(key),
  })
}

/** The attacker: deploys its accounts and flips them. */
const attacker = () => wallet(anvilPrivateKeys[6])

/** A hostile account of `name`, deployed and funded with the token. */
async function deployHostile(name: HostileName, args: readonly unknown[] = []): Promise<Address> {
  const { abi, bytecode } = artifact(name)
  const hash = await attacker().deployContract({ abi, bytecode, args } as never)
  const receipt = await env.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 25 })
  const account = receipt.contractAddress!
  await mintTestToken(env.anvil.rpcUrl, env.token, account, usdc(1))
  return account
}

async function setValid(account: Address, valid: boolean, fees: Record<string, bigint> = {}): Promise<Hex> {
  return attacker().writeContract({
    address: account,
    abi: artifact('FlagGatedAccount').abi,
    functionName: 'setValid',
    args: [valid],
    ...fees,
  } as never)
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

/** A payload from a contract account: any signature bytes, the account's ERC-1271 answer decides. */
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

/** An honest payer's payload (the published client's). */
async function honestBody(key: Hex) {
  const created = await new ExactEvmClient(privateKeyToAccount(key)).createPaymentPayload(
    2,
    requirements() as never,
  )
  return facilitatorBody(
    { x402Version: 2, accepted: requirements(), payload: created.payload },
    requirements() as never,
  )
}

const executorBalance = () => env.publicClient.getBalance({ address: env.collection })

function relays() {
  return env.t.db
    .selectFrom('evm_transactions')
    .selectAll()
    .where('purpose', '=', 'relay')
    .orderBy('id')
    .execute()
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

/**
 * Settles `body` with mining held; once the executor's relay is in the pool, the attacker lowers the
 * account's flag with a higher tip, so both land in one block, the flip first: every simulation before
 * the send passed, the relay reverts. A settle refused before any send just answers.
 */
async function settleFrontRun(account: Address, body: unknown, key = env.liveKey) {
  const control = anvilControl(env.anvil.rpcUrl)
  const known = new Set((await relays()).map((r) => r.hash))
  await control.setAutomine(false)
  try {
    let answered = false
    const settled = post('settle', body, key).finally(() => {
      answered = true
    })
    const relay = await until('a relay in the pool, or the answer', async () => {
      if (answered) return null
      const fresh = (await relays()).find((r) => !known.has(r.hash))
      return fresh && (await control.pending()).includes(fresh.hash as Hex) ? fresh : undefined
    })
    if (relay) {
      await setValid(account, false, {
        maxFeePerGas: parseGwei('500'),
        maxPriorityFeePerGas: parseGwei('400'),
      })
      await control.mine(1)
    }
    return { settled: await settled, relay }
  } finally {
    await control.setAutomine(true)
  }
}

describe('hostile ERC-1271 payers against the x402 facilitator', () => {
  it('a payer valid only at gas price 0 (what eth_call runs at) is refused by the simulation of exactly what would be sent: nothing sent, the executor spends nothing', async () => {
    const account = await deployHostile('GasPriceGatedAccount')
    const body = hostileBody(account)
    const before = await executorBalance()
    const sent = (await relays()).length

    const verified = await post('verify', body)
    expect(verified.json).toMatchObject({
      isValid: false,
      invalidReason: 'invalid_exact_evm_transaction_simulation_failed',
      payer: getAddress(account),
    })
    const settled = await post('settle', body)
    expect(settled.json).toMatchObject({ success: false, transaction: '' })

    expect(await executorBalance()).toBe(before)
    expect((await relays()).length).toBe(sent)
    expect(await env.balance(account)).toBe(usdc(1))
  })

  it('a payer valid in every simulation and flipped ahead of the relay in its block: exactly one revert, the payment fails relay_reverted, the payer and every account of its code are cooled down', async () => {
    const account = await deployHostile('FlagGatedAccount')
    const clone = await deployHostile('FlagGatedAccount')
    const before = await executorBalance()
    const { settled, relay } = await settleFrontRun(account, hostileBody(account))
    expect(relay).toBeTruthy()
    expect(settled.json).toMatchObject({
      success: false,
      errorReason: 'invalid_exact_evm_transaction_failed',
      errorMessage: 'The payment failed (relay_reverted).',
    })
    const receipt = await env.publicClient.getTransactionReceipt({ hash: relay!.hash as Hex })
    expect(receipt.status).toBe('reverted')
    // Not relayed again: one transaction for the payment, and no later one.
    await new Promise((resolve) => setTimeout(resolve, 500))
    const ofPayment = (await relays()).filter((r) => r.payment_id === relay!.payment_id)
    expect(ofPayment.map((r) => r.status)).toEqual(['reverted'])
    const spent = before - (await executorBalance())
    expect(spent).toBe(receipt.gasUsed * receipt.effectiveGasPrice)
    console.info(`one hostile request (flag flipped in the relay's block): executor spent ${spent} wei`)

    // The attacker re-arms it and tries again; a copy of its code at another address too.
    await setValid(account, true)
    const sent = (await relays()).length
    const afterRevert = await executorBalance()
    for (const payer of [account, clone]) {
      const body = hostileBody(payer)
      const verified = await post('verify', body)
      expect(verified.json).toMatchObject({
        isValid: false,
        invalidReason: 'payer_cooling_down',
        payer: getAddress(payer),
      })
      expect(verified.json.invalidMessage).toMatch(/reverted on chain after passing its simulation/)
      expect((await post('settle', body)).json).toMatchObject({
        success: false,
        errorReason: 'payer_cooling_down',
        transaction: '',
      })
    }
    expect((await relays()).length).toBe(sent)
    expect(await executorBalance()).toBe(afterRevert)
    const cooled = await env.t.db.selectFrom('payer_cooldowns').selectAll().execute()
    expect(cooled.map((c) => c.kind).sort()).toEqual(['address', 'code_hash'])
    expect(cooled.every((c) => c.until.getTime() > Date.now() + 590_000)).toBe(true)
  }, 60_000)

  it("the gateway's confirm refuses a cooled-down payer with 429 rate_limited before the payment moves", async () => {
    const [cooled] = await env.t.db
      .selectFrom('payer_cooldowns')
      .select('subject')
      .where('kind', '=', 'address')
      .execute()
    expect(cooled).toBeDefined()
    const account = `${env.anvil.caip2}:${cooled!.subject}`
    const { paymentId } = await env.pay('100')
    const options = await env.gw('POST', paymentId, '/options', { accounts: [account] })
    expect(options.statusCode, options.body).toBe(200)
    const option = options.json.options.find(isKind('eip3009'))
    expect(option, options.body).toBeDefined()
    const sent = (await relays()).length
    const confirm = await env.gw('POST', paymentId, '/confirm', {
      optionId: option.id,
      results: [`0x${'ab'.repeat(65)}`],
    })
    expect(confirm.statusCode, confirm.body).toBe(429)
    expect(confirm.json).toMatchObject({ code: 'rate_limited' })
    expect(confirm.json.message).toMatch(/refused until/)
    expect((await env.gw('GET', paymentId, '/status')).json.status).toBe('requires_action')
    expect((await relays()).length).toBe(sent)
  })

  it("a flood of accounts each with its own code (no cool-down shared) is bounded by the credential's budget: past it settle answers executor_gas_budget_exhausted and sends nothing; another key's honest payer still pays", async () => {
    const { apiKey: floodKey } = await env.t.createKey('live')
    // Deployed first: blocks mined between the refusal and the rest of the flood would lower the fees,
    // and with them what a send may cost at worst (what the budget must still have room for).
    const rest: Address[] = []
    for (let variant = 100; variant < 103; variant++)
      rest.push(await deployHostile('VariantFlagGatedAccount', [BigInt(variant)]))
    const before = await executorBalance()
    let reverted = 0
    let refusal: Record<string, unknown> | undefined
    for (let variant = 1; variant <= 30 && !refusal; variant++) {
      const account = await deployHostile('VariantFlagGatedAccount', [BigInt(variant)])
      const { settled } = await settleFrontRun(account, hostileBody(account), floodKey)
      if (settled.json.errorMessage === 'The payment failed (relay_reverted).') reverted += 1
      else refusal = settled.json
    }
    expect(reverted).toBeGreaterThanOrEqual(1)
    expect(refusal).toMatchObject({
      success: false,
      errorReason: 'executor_gas_budget_exhausted',
      transaction: '',
    })
    const spent = before - (await executorBalance())
    expect(spent).toBeLessThanOrEqual(budgetWei)
    console.info(`flood: ${reverted} reverted relays cost the executor ${spent} wei (budget ${budgetWei})`)

    // Past the budget: more of the flood sends nothing at all.
    const sent = (await relays()).length
    const exhausted = await executorBalance()
    for (const account of rest) {
      const verified = await post('verify', hostileBody(account), floodKey)
      expect(verified.json).toMatchObject({ isValid: false, invalidReason: 'executor_gas_budget_exhausted' })
      expect((await post('settle', hostileBody(account), floodKey)).json).toMatchObject({
        success: false,
        errorReason: 'executor_gas_budget_exhausted',
      })
    }
    expect((await relays()).length).toBe(sent)
    expect(await executorBalance()).toBe(exhausted)

    // The budget is the flooding key's: the partner's other key settles an honest payer.
    const buyer = await env.buyer(3, usdc(1))
    const honest = await post('settle', await honestBody(buyer.key))
    expect(honest.json).toMatchObject({ success: true, payer: buyer.address })
  }, 120_000)
})
