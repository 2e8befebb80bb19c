/**
 * Hostile payers against caipay's x402 facilitator on Anvil, gas read from the executor's balance:
 * ERC-1271 accounts valid only where a simulation runs (gas price 0), or valid in every simulation and
 * flipped ahead of the relay in its block; a flood of such accounts, each with its own code; and the
 * gateway's confirm for a payer cooled down there.
 */
import { type Abi, type Address, getAddress, type Hex, parseGwei } from 'viem'
import { describe, expect, it } from 'vitest'
import artifacts from '../../fixtures/hostile/artifacts.json' with { type: 'json' }
import { mintTestToken } from '../anvil.js'
import { isKind, usdc } from '../evm/support.js'
import { hostileRelaySuite } from './hostileRelay.js'

type HostileName = keyof typeof artifacts
const artifact = (name: HostileName) => artifacts[name] as unknown as { abi: Abi; bytecode: Hex }

/** The flood's budget: wei one credential's failed relays may cost per window. */
const budgetWei = 300_000_000_000_000n
const suite = hostileRelaySuite({
  config: {
    relays: { payerCooldownSeconds: 600, gasBudget: { windowSeconds: 3600, perCredential: '0.0003' } },
  },
})
const { attacker, post, relays, settleHeld, honestBody } = suite
const hostileBody = (from: Address) => suite.authorizationBody(from)

/** A hostile account of `name`, deployed and funded with the token. */
async function deployHostile(name: HostileName, args: readonly unknown[] = []): Promise<Address> {
  const { abi, bytecode } = artifact(name)
  const hash = await attacker().deployContract({ abi, bytecode, args } as never)
  const receipt = await suite.env.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 25 })
  const account = receipt.contractAddress!
  await mintTestToken(suite.env.anvil.rpcUrl, suite.env.token, account, usdc(1))
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

const executorBalance = () => suite.env.publicClient.getBalance({ address: suite.env.collection })

/**
 * Settles `body` with mining held; once the executor's relay is in the pool, the attacker lowers the
 * account's flag with a higher tip, so both land in one block, the flip first: every simulation before
 * the send passed, the relay reverts. A settle refused before any send just answers.
 */
function settleFrontRun(account: Address, body: unknown, key = suite.env.liveKey) {
  const flip = async () => {
    await setValid(account, false, { maxFeePerGas: parseGwei('500'), maxPriorityFeePerGas: parseGwei('400') })
  }
  return settleHeld(body, flip, { key }).then(({ settled, sent }) => ({ settled, relay: sent }))
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
    expect(await suite.env.balance(account)).toBe(usdc(1))
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
    const receipt = await suite.env.publicClient.getTransactionReceipt({ hash: relay!.hash as Hex })
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
    const cooled = await suite.env.t.db.selectFrom('payer_cooldowns').selectAll().execute()
    expect(cooled.map((c) => c.kind).sort()).toEqual(['address', 'code_hash'])
    expect(cooled.every((c) => c.until.getTime() > Date.now() + 590_000)).toBe(true)
  }, 60_000)

  it("the gateway's confirm refuses a cooled-down payer with 429 rate_limited before the payment moves", async () => {
    const [cooled] = await suite.env.t.db
      .selectFrom('payer_cooldowns')
      .select('subject')
      .where('kind', '=', 'address')
      .execute()
    expect(cooled).toBeDefined()
    const account = `${suite.env.anvil.caip2}:${cooled!.subject}`
    const { paymentId } = await suite.env.pay('100')
    const options = await suite.env.gw('POST', paymentId, '/options', { accounts: [account] })
    expect(options.statusCode, options.body).toBe(200)
    const option = options.json.options.find(isKind('eip3009'))
    expect(option, options.body).toBeDefined()
    const sent = (await relays()).length
    const confirm = await suite.env.gw('POST', paymentId, '/confirm', {
      optionId: option.id,
      results: [`0x${'ab'.repeat(65)}`],
    })
    expect(confirm.statusCode, confirm.body).toBe(429)
    expect(confirm.json).toMatchObject({ code: 'rate_limited' })
    expect(confirm.json.message).toMatch(/refused until/)
    expect((await suite.env.gw('GET', paymentId, '/status')).json.status).toBe('requires_action')
    expect((await relays()).length).toBe(sent)
  })

  it("a flood of accounts each with its own code (no cool-down shared) is bounded by the credential's budget: past it settle answers executor_gas_budget_exhausted and sends nothing; another key's honest payer still pays", async () => {
    const { apiKey: floodKey } = await suite.env.t.createKey('live')
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
    const buyer = await suite.env.buyer(3, usdc(1))
    const honest = await post('settle', await honestBody(buyer.key))
    expect(honest.json).toMatchObject({ success: true, payer: buyer.address })
  }, 120_000)
})
