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
  createWalletClient,
  encodeFunctionData,
  getAddress,
  type Hex,
  http,
  parseGwei,
  serializeErc6492Signature,
  toHex,
} from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import artifacts from '../../fixtures/hostile/artifacts.json' with { type: 'json' }
import { anvilChain, anvilControl, anvilPrivateKeys, mintTestToken } from '../anvil.js'
import { anvilRpc } from '../evm/payers.js'
import { createEvmEnv, type EvmEnv, usdc } from '../evm/support.js'
import { facilitatorBody, facilitatorPost } from './support.js'

const factoryArtifact = artifacts.GatedAccountFactory as unknown as { abi: Abi; bytecode: Hex }
/** Where the factory's runtime code is put: the operator allow-lists this address. */
const factory = getAddress('0x00000000000000000000000000000000000e6492')

let env: EvmEnv
const price = usdc(0.01)
const post = facilitatorPost(
  () => env.t,
  () => env.liveKey,
)

beforeAll(async () => {
  env = await createEvmEnv({
    chainConfig: { eip6492Factories: [factory] },
    config: {
      relays: { payerCooldownSeconds: 600, gasBudget: { windowSeconds: 3600, perCredential: '0.0003' } },
    },
  })
  const deployer = attacker()
  const hash = await deployer.deployContract({ ...factoryArtifact, args: [] } as never)
  const built = (await env.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 25 }))
    .contractAddress!
  await anvilRpc(env.anvil.rpcUrl, 'anvil_setCode', [
    factory,
    await env.publicClient.getCode({ address: built }),
  ])
  env.startRunner()
}, 60_000)

afterAll(async () => {
  await env?.close()
})

/** The attacker: funds its accounts, closes the factory. */
function attacker() {
  return createWalletClient({
    chain: anvilChain(env.anvil.chainId, env.anvil.rpcUrl),
    transport: http(env.anvil.rpcUrl),
    account: privateKeyToAccount(anvilPrivateKeys[6]),
  })
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

/** An undeployed account of the factory (funded with the token) and its ERC-6492 payload. */
async function undeployedPayer(create: 'createAccount' | 'createAccountAtGasPriceZero', salt: Hex) {
  const from = (await env.publicClient.readContract({
    address: factory,
    abi: factoryArtifact.abi,
    functionName: 'accountAddress',
    args: [salt],
  })) as Address
  await mintTestToken(env.anvil.rpcUrl, env.token, from, usdc(1))
  const body = () => {
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
        signature: serializeErc6492Signature({
          address: factory,
          data: encodeFunctionData({ abi: factoryArtifact.abi, functionName: create, args: [salt] }),
          signature: `0x${'ab'.repeat(65)}`,
        }),
      },
    }
    return facilitatorBody(payload, requirements() as never)
  }
  return { from, body }
}

const executorBalance = () => env.publicClient.getBalance({ address: env.collection })
const executorNonce = () =>
  env.publicClient.getTransactionCount({ address: env.collection, blockTag: 'pending' })
/** Every transaction the executor's key signed: the sender signs only as it records. */
const signed = () => env.t.db.selectFrom('evm_transactions').selectAll().orderBy('id').execute()

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

describe('a hostile ERC-6492 factory against the relay', () => {
  it('a deployment valid only at gas price 0 is refused by its simulation as sent: the key signs nothing, the executor spends nothing', async () => {
    const { from, body } = await undeployedPayer('createAccountAtGasPriceZero', toHex(randomBytes(32)))
    const [balance, nonce, before] = [await executorBalance(), await executorNonce(), (await signed()).length]
    const settled = await post('settle', body())
    expect(settled.json).toMatchObject({ success: false, transaction: '' })
    expect((await signed()).length).toBe(before)
    expect(await executorNonce()).toBe(nonce)
    expect(await executorBalance()).toBe(balance)
    expect(await env.publicClient.getCode({ address: from })).toBeUndefined()
    const [payment] = await env.t.db
      .selectFrom('x402_payments')
      .innerJoin('payments', 'payments.id', 'x402_payments.payment_id')
      .select(['payments.status', 'payments.failure_code'])
      .where('x402_payments.payer', '=', getAddress(from))
      .execute()
    // Refused at verify (the factory's answer in simulation) or by the job's as-sent simulation.
    if (payment) expect(payment).toMatchObject({ status: 'failed', failure_code: 'deployment_refused' })
    expect(await env.t.db.selectFrom('executor_gas_charges').selectAll().execute()).toEqual([])
  })

  it('a deployment closed ahead of it in its block reverts once: the loss is that one send, charged to the payer and the key, and the payer is cooled down', async () => {
    const salt = toHex(randomBytes(32))
    const { from, body } = await undeployedPayer('createAccount', salt)
    const control = anvilControl(env.anvil.rpcUrl)
    const known = new Set((await signed()).map((r) => r.hash))
    const before = await executorBalance()
    await control.setAutomine(false)
    let deploy: Awaited<ReturnType<typeof signed>>[number]
    let settled: Awaited<ReturnType<typeof post>>
    try {
      const answer = post('settle', body())
      deploy = await until('the deployment in the pool', async () => {
        const fresh = (await signed()).find((r) => !known.has(r.hash))
        return fresh && (await control.pending()).includes(fresh.hash as Hex) ? fresh : undefined
      })
      expect(deploy.purpose).toBe('deploy')
      await attacker().writeContract({
        address: factory,
        abi: factoryArtifact.abi,
        functionName: 'setClosed',
        args: [true],
        maxFeePerGas: parseGwei('500'),
        maxPriorityFeePerGas: parseGwei('400'),
      } as never)
      await control.mine(1)
      settled = await answer
    } finally {
      await control.setAutomine(true)
    }
    expect(settled.json).toMatchObject({
      success: false,
      errorMessage: 'The payment failed (deployment_refused).',
    })
    const receipt = await env.publicClient.getTransactionReceipt({ hash: deploy.hash as Hex })
    expect(receipt.status).toBe('reverted')
    const cost = receipt.gasUsed * receipt.effectiveGasPrice
    await new Promise((resolve) => setTimeout(resolve, 500))
    const ofPayment = (await signed()).filter((r) => r.payment_id === deploy.payment_id)
    expect(ofPayment.map((r) => [r.purpose, r.status])).toEqual([['deploy', 'reverted']])
    expect(before - (await executorBalance())).toBe(cost)
    const charges = await env.t.db.selectFrom('executor_gas_charges').selectAll().execute()
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
