import { createWalletClient, type Hash, http, keccak256, toHex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testUsdcAbi } from '../../fixtures/token/index.js'
import { deployTestToken, mintTestToken } from '../anvil.js'
import { type Buyer, createEvmEnv, type EvmEnv, fastRuntime, isKind, usdc } from './support.js'

let env: EvmEnv
let buyer: Buyer
beforeAll(async () => {
  env = await createEvmEnv()
  buyer = await env.buyer(3)
  // Short waits so a made-up hash fails within the test; the app's own handlers wait minutes for one.
  env.startRunner(fastRuntime(env, { missingTransactionGraceMs: 0, receiptTimeoutMs: 200 }).jobHandlers)
})
afterAll(() => env?.close())

async function directOption(paymentId: string) {
  const res = await env.gw('POST', paymentId, '/options', { accounts: [buyer.account] })
  expect(res.statusCode, res.body).toBe(200)
  const option = res.json.options.find(isKind('transfer'))
  expect(option, res.body).toBeDefined()
  return option
}

/** The buyer's own ERC-20 transfer, outside any payment. */
async function transfer(token: `0x${string}`, to: `0x${string}`, amount: bigint): Promise<Hash> {
  const wallet = createWalletClient({
    account: privateKeyToAccount(buyer.key),
    transport: http(env.anvil.rpcUrl),
  })
  const hash = await wallet.writeContract({
    chain: null,
    address: token,
    abi: testUsdcAbi,
    functionName: 'transfer',
    args: [to, amount],
  })
  await env.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 25 })
  return hash
}

describe('live EVM direct payment (ERC-20 transfer to the merchant destination)', () => {
  it('offers eth_sendTransaction of transfer(destination, amount) from the buyer', async () => {
    const { paymentId } = await env.pay('1250')
    const option = await directOption(paymentId)
    const [tx] = JSON.parse(option.actions[0].walletRpc.params)
    expect(tx).toMatchObject({
      from: buyer.address,
      to: env.token,
      value: '0x0',
      chainId: toHex(env.anvil.chainId),
    })
    const decoded = buyer.signer.inspect({
      chainId: env.anvil.caip2,
      method: 'eth_sendTransaction',
      params: JSON.parse(option.actions[0].walletRpc.params),
    })
    expect(decoded.transfers).toEqual([
      { asset: env.asset, amount: usdc(12.5), to: `${env.anvil.caip2}:${env.merchant.destination}` },
    ])
  })

  it('succeeds on the buyer transaction; the funds go straight to the merchant; no settlement', async () => {
    const { paymentId } = await env.pay('1250')
    const option = await directOption(paymentId)
    const before = await Promise.all(
      [buyer.address, env.collection, env.merchant.destination].map((a) => env.balance(a)),
    )
    const hash = await buyer.sign(option.actions[0])
    expect(hash).toMatch(/^0x[0-9a-f]{64}$/)
    const confirm = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results: [hash] })
    expect(confirm.statusCode, confirm.body).toBe(200)
    const final = await env.waitFinal(paymentId)
    expect(final).toMatchObject({ status: 'succeeded', txId: hash })
    const view = await env.merchantView(paymentId)
    expect(view.info).toMatchObject({ txId: hash, optionAmount: { value: '12500000' } })
    expect(view.settlement).toBeNull()
    const after = await Promise.all(
      [buyer.address, env.collection, env.merchant.destination].map((a) => env.balance(a)),
    )
    expect([after[0]! - before[0]!, after[1]! - before[1]!, after[2]! - before[2]!]).toEqual([
      -usdc(12.5),
      0n,
      usdc(12.5),
    ])

    // The same transaction cannot pay a second payment.
    const second = await env.pay('1250')
    const other = await directOption(second.paymentId)
    const reuse = await env.gw('POST', second.paymentId, '/confirm', { optionId: other.id, results: [hash] })
    expect([reuse.statusCode, reuse.json.code]).toEqual([400, 'params_validation'])
    expect(reuse.json.issues[0].path).toBe('results.0')
    expect((await env.gw('GET', second.paymentId, '/status')).json.status).toBe('requires_action')
  })

  it('accepts the confirm of a transfer the wallet already sent after its quote expired', async () => {
    const { paymentId } = await env.pay('1250')
    const option = await directOption(paymentId)
    const hash = await buyer.sign(option.actions[0])
    // The funds have moved: a late confirm must not strand them (the payment itself is still open).
    env.t.advanceTime((option.expiresAt + 1) * 1000 - env.t.app.now().getTime())
    const confirm = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results: [hash] })
    expect(confirm.statusCode, confirm.body).toBe(200)
    expect(await env.waitFinal(paymentId)).toMatchObject({ status: 'succeeded', txId: hash })
  })

  it('is not offered when the merchant has no settlement destination for the asset', async () => {
    const { paymentId } = await env.pay('1250', env.bareMerchantId)
    const res = await env.gw('POST', paymentId, '/options', { accounts: [buyer.account] })
    expect(res.json.options.some(isKind('transfer'))).toBe(false)
    expect(res.json.options.some(isKind('eip3009'))).toBe(true)
  })
})

describe('a transaction that does not pay the payment fails it', () => {
  async function failsWith(hash: Hash, code: string) {
    const { paymentId } = await env.pay('1250')
    const option = await directOption(paymentId)
    const before = await env.balance(env.merchant.destination)
    const confirm = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results: [hash] })
    expect(confirm.statusCode, confirm.body).toBe(200)
    expect(await env.waitFinal(paymentId)).toMatchObject({ status: 'failed', isFinal: true })
    const row = await env.t.db
      .selectFrom('payments')
      .selectAll()
      .where('id', '=', paymentId)
      .executeTakeFirstOrThrow()
    expect([row.failure_code, row.tx_id]).toEqual([code, null])
    expect(await env.balance(env.merchant.destination)).toBe(before)
  }

  it('an unrelated transfer (another recipient)', async () => {
    const stranger = privateKeyToAccount(keccak256(toHex('stranger'))).address
    await failsWith(await transfer(env.token, stranger, usdc(12.5)), 'transfer_missing')
  })

  it('a transfer of another amount to the right destination', async () => {
    // Sent before the payment exists, and of the wrong amount: both disqualify it.
    await failsWith(await transfer(env.token, env.merchant.destination, usdc(1)), 'transfer_missing')
  })

  it('the right amount in another token', async () => {
    const other = await deployTestToken(env.anvil.rpcUrl)
    await mintTestToken(env.anvil.rpcUrl, other, buyer.address, usdc(20))
    await failsWith(await transfer(other, env.merchant.destination, usdc(12.5)), 'wrong_contract')
  })

  it('a hash the chain has never seen', async () => {
    await failsWith(keccak256(toHex('no such transaction')), 'transaction_not_found')
  })
})
