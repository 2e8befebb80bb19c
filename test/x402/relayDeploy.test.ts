/**
 * A hostile ERC-6492 factory against caipay's x402 facilitator on Anvil, gas read from the executor's
 * balance: the relay job deploys an undeployed payer's account through an allow-listed factory before
 * its relay, and that deployment goes through the relay's guard (simulated as sent, reserved, charged on
 * a revert, the payer cooled down). One factory deploys only at gas price 0 (what every simulation but
 * the as-sent one runs at); the other deploys in every simulation and is closed by the attacker ahead of
 * the deployment in its block.
 */
import { randomBytes } from 'node:crypto'
import {
  type Abi,
  type Address,
  encodeFunctionData,
  getAddress,
  type Hex,
  parseGwei,
  serializeErc6492Signature,
  toHex,
} from 'viem'
import { describe, expect, it } from 'vitest'
import artifacts from '../../fixtures/hostile/artifacts.json' with { type: 'json' }
import { mintTestToken } from '../anvil.js'
import { anvilRpc } from '../evm/payers.js'
import { usdc } from '../evm/support.js'
import { hostileRelaySuite } from './hostileRelay.js'

const factoryArtifact = artifacts.GatedAccountFactory as unknown as { abi: Abi; bytecode: Hex }
/** Where the factory's runtime code is put: the operator allow-lists this address. */
const factory = getAddress('0x00000000000000000000000000000000000e6492')

const suite = hostileRelaySuite({
  chainConfig: { eip6492Factories: [factory] },
  config: {
    relays: { payerCooldownSeconds: 600, gasBudget: { windowSeconds: 3600, perCredential: '0.0003' } },
  },
  async setup(env) {
    const hash = await attacker().deployContract({ ...factoryArtifact, args: [] } as never)
    const built = (await env.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 25 }))
      .contractAddress!
    await anvilRpc(env.anvil.rpcUrl, 'anvil_setCode', [
      factory,
      await env.publicClient.getCode({ address: built }),
    ])
  },
})
const { attacker, post, settleHeld } = suite
/** Every transaction the executor's key signed: the sender signs only as it records. */
const signed = () => suite.executorTransactions()

/** An undeployed account of the factory (funded with the token) and its ERC-6492 payload. */
async function undeployedPayer(create: 'createAccount' | 'createAccountAtGasPriceZero', salt: Hex) {
  const from = (await suite.env.publicClient.readContract({
    address: factory,
    abi: factoryArtifact.abi,
    functionName: 'accountAddress',
    args: [salt],
  })) as Address
  await mintTestToken(suite.env.anvil.rpcUrl, suite.env.token, from, usdc(1))
  const body = () =>
    suite.authorizationBody(
      from,
      serializeErc6492Signature({
        address: factory,
        data: encodeFunctionData({ abi: factoryArtifact.abi, functionName: create, args: [salt] }),
        signature: `0x${'ab'.repeat(65)}`,
      }),
    )
  return { from, body }
}

const executorBalance = () => suite.env.publicClient.getBalance({ address: suite.env.collection })
const executorNonce = () =>
  suite.env.publicClient.getTransactionCount({ address: suite.env.collection, blockTag: 'pending' })
describe('a hostile ERC-6492 factory against the relay', () => {
  it('a deployment valid only at gas price 0 is refused by its simulation as sent: the key signs nothing, the executor spends nothing', async () => {
    const { from, body } = await undeployedPayer('createAccountAtGasPriceZero', toHex(randomBytes(32)))
    const [balance, nonce, before] = [await executorBalance(), await executorNonce(), (await signed()).length]
    const settled = await post('settle', body())
    expect(settled.json).toMatchObject({ success: false, transaction: '' })
    expect((await signed()).length).toBe(before)
    expect(await executorNonce()).toBe(nonce)
    expect(await executorBalance()).toBe(balance)
    expect(await suite.env.publicClient.getCode({ address: from })).toBeUndefined()
    const [payment] = await suite.env.t.db
      .selectFrom('x402_payments')
      .innerJoin('payments', 'payments.id', 'x402_payments.payment_id')
      .select(['payments.status', 'payments.failure_code'])
      .where('x402_payments.payer', '=', getAddress(from))
      .execute()
    // Refused at verify (the factory's answer in simulation) or by the job's as-sent simulation.
    if (payment) expect(payment).toMatchObject({ status: 'failed', failure_code: 'deployment_refused' })
    expect(await suite.env.t.db.selectFrom('executor_gas_charges').selectAll().execute()).toEqual([])
  })

  it('a deployment closed ahead of it in its block reverts once: the loss is that one send, charged to the payer and the key, and the payer is cooled down', async () => {
    const salt = toHex(randomBytes(32))
    const { from, body } = await undeployedPayer('createAccount', salt)
    const before = await executorBalance()
    const { settled, sent: deploy } = await settleHeld(body(), async (sent) => {
      expect(sent.purpose).toBe('deploy')
      await attacker().writeContract({
        address: factory,
        abi: factoryArtifact.abi,
        functionName: 'setClosed',
        args: [true],
        maxFeePerGas: parseGwei('500'),
        maxPriorityFeePerGas: parseGwei('400'),
      } as never)
    })
    if (!deploy) throw new Error(`No deployment was sent: ${settled.body}`)
    expect(settled.json).toMatchObject({
      success: false,
      errorMessage: 'The payment failed (deployment_refused).',
    })
    const receipt = await suite.env.publicClient.getTransactionReceipt({ hash: deploy.hash as Hex })
    expect(receipt.status).toBe('reverted')
    const cost = receipt.gasUsed * receipt.effectiveGasPrice
    await new Promise((resolve) => setTimeout(resolve, 500))
    const ofPayment = (await signed()).filter((r) => r.payment_id === deploy.payment_id)
    expect(ofPayment.map((r) => [r.purpose, r.status])).toEqual([['deploy', 'reverted']])
    expect(before - (await executorBalance())).toBe(cost)
    const charges = await suite.env.t.db.selectFrom('executor_gas_charges').selectAll().execute()
    expect(charges.map((c) => [c.state, BigInt(c.amount), c.payer])).toEqual([
      ['spent', cost, from.toLowerCase()],
    ])
    console.info(`hostile ERC-6492 factory: one deployment reverted on chain, executor spent ${cost} wei`)

    // The attacker opens the factory again and retries the same account: refused, nothing signed.
    await attacker().writeContract({
      address: factory,
      abi: factoryArtifact.abi,
      functionName: 'setClosed',
      args: [false],
    } as never)
    const [balance, nonce, count] = [await executorBalance(), await executorNonce(), (await signed()).length]
    const verified = await post('verify', body())
    expect(verified.json).toMatchObject({ isValid: false, invalidReason: 'payer_cooling_down' })
    expect(verified.json.invalidMessage).toMatch(
      /deployment .* reverted on chain after passing its simulation/,
    )
    expect((await post('settle', body())).json).toMatchObject({
      success: false,
      errorReason: 'payer_cooling_down',
      transaction: '',
    })
    expect((await signed()).length).toBe(count)
    expect(await executorNonce()).toBe(nonce)
    expect(await executorBalance()).toBe(balance)
  }, 60_000)
})
