import { type Address, createWalletClient, type Hex, http, parseEventLogs } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testUsdcAbi } from '../../fixtures/token/index.js'
import type { PaymentOption } from '../../src/contract/gateway.js'
import { createPayClient } from '../../src/pay/createPayClient.js'
import {
  anvilPrivateKeys,
  authorizationTypedData,
  deployTestToken,
  mintTestToken,
  signAuthorization,
} from '../anvil.js'
import { type Buyer, createEvmEnv, type EvmEnv, injectFetch, isKind, usdc } from './support.js'

let env: EvmEnv
let buyer: Buyer
beforeAll(async () => {
  env = await createEvmEnv()
  buyer = await env.buyer(2)
  env.startRunner()
})
afterAll(() => env?.close())

async function gaslessOption(paymentId: string, account = buyer.account) {
  const res = await env.gw('POST', paymentId, '/options', { accounts: [account] })
  expect(res.statusCode, res.body).toBe(200)
  const option = res.json.options.find(isKind('eip3009'))
  expect(option, res.body).toBeDefined()
  return option
}

function typedDataOf(option: any) {
  const [, json] = JSON.parse(option.actions[0].walletRpc.params) as [string, string]
  return JSON.parse(json)
}

async function signTyped(signer: Buyer, typed: unknown): Promise<string> {
  return signer.signer.request({
    chainId: env.anvil.caip2,
    method: 'eth_signTypedData_v4',
    params: [signer.address, JSON.stringify(typed)],
  })
}

async function waitSettled(paymentId: string) {
  const deadline = Date.now() + 20_000
  for (;;) {
    const view = await env.merchantView(paymentId)
    if (view.settlement?.successful) return view
    if (Date.now() > deadline)
      throw new Error(`settlement of ${paymentId} still ${JSON.stringify(view.settlement)}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

async function snapshot(...addresses: Address[]) {
  return Promise.all(addresses.map((a) => env.balance(a)))
}

describe('live EVM gasless payment (EIP-3009)', () => {
  it('offers ReceiveWithAuthorization to the collection address, domain read from the token', async () => {
    const { paymentId } = await env.pay('1250')
    const option = await gaslessOption(paymentId)
    expect(option.amount).toMatchObject({ unit: `caip19/${env.asset}`, value: '12500000' })
    const typed = typedDataOf(option)
    expect(typed.primaryType).toBe('ReceiveWithAuthorization')
    expect(typed.domain).toEqual({
      name: 'USD Coin',
      version: '2',
      chainId: env.anvil.chainId,
      verifyingContract: env.token,
    })
    expect(typed.message).toMatchObject({
      from: buyer.address,
      to: env.collection,
      value: '12500000',
      validAfter: '0',
    })
    expect(Number(typed.message.validBefore)).toBeGreaterThanOrEqual(option.expiresAt)
    expect(typed.message.nonce).toMatch(/^0x[0-9a-f]{64}$/)
  })

  it('relays, succeeds with the real hash, and settles to the merchant destination', async () => {
    const { paymentId } = await env.pay('1250')
    const option = await gaslessOption(paymentId)
    const before = await snapshot(buyer.address, env.collection, env.merchant.destination)
    const signature = await buyer.sign(option.actions[0])
    const confirm = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results: [signature] })
    expect(confirm.statusCode, confirm.body).toBe(200)
    expect(confirm.json).toMatchObject({ status: 'processing', isFinal: false })

    const final = await env.waitFinal(paymentId)
    expect(final.status).toBe('succeeded')
    expect(final.txId).toMatch(/^0x[0-9a-f]{64}$/)
    const receipt = await env.publicClient.getTransactionReceipt({ hash: final.txId })
    expect(receipt.status).toBe('success')
    expect(receipt.from.toLowerCase()).toBe(env.collection.toLowerCase())

    const view = await waitSettled(paymentId)
    expect(view.info).toMatchObject({
      txId: final.txId,
      optionAmount: { unit: `caip19/${env.asset}`, value: '12500000' },
    })
    expect(view.settlement.successful.amount).toEqual({ unit: `caip19/${env.asset}` })
    const settlement = await env.publicClient.getTransactionReceipt({ hash: view.settlement.successful.txId })
    const [moved] = parseEventLogs({ abi: testUsdcAbi, eventName: 'Transfer', logs: settlement.logs })
    expect(moved?.args).toEqual({ from: env.collection, to: env.merchant.destination, value: usdc(12.5) })

    const after = await snapshot(buyer.address, env.collection, env.merchant.destination)
    expect(after[0]! - before[0]!).toBe(-usdc(12.5))
    expect(after[1]! - before[1]!).toBe(0n)
    expect(after[2]! - before[2]!).toBe(usdc(12.5))

    // A replayed confirm: the payment is no longer waiting for the buyer; nothing moves again.
    const replay = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results: [signature] })
    expect([replay.statusCode, replay.json.code]).toEqual([409, 'invalid_state'])
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(await snapshot(buyer.address, env.collection, env.merchant.destination)).toEqual(after)
    const relays = await env.t.db
      .selectFrom('evm_transactions')
      .selectAll()
      .where('payment_id', '=', paymentId)
      .execute()
    expect(relays.map((r) => [r.purpose, r.status])).toEqual([
      ['relay', 'succeeded'],
      ['settle', 'succeeded'],
    ])
  })

  it('without a settlement destination the funds stay collected and settlement stays null', async () => {
    const { paymentId } = await env.pay('500', env.bareMerchantId)
    const res = await env.gw('POST', paymentId, '/options', { accounts: [buyer.account] })
    // No destination: the direct transfer (which goes straight to it) is not offered.
    const pulled = res.json.options.filter((o: PaymentOption) => o.source !== 'push')
    expect(pulled.map(isKind('eip3009'))).toEqual([true])
    const option = pulled[0]
    const before = await env.balance(env.collection)
    const confirm = await env.gw('POST', paymentId, '/confirm', {
      optionId: option.id,
      results: [await buyer.sign(option.actions[0])],
    })
    expect(confirm.statusCode, confirm.body).toBe(200)
    expect((await env.waitFinal(paymentId)).status).toBe('succeeded')
    const view = await env.merchantView(paymentId, env.bareMerchantId)
    expect(view.settlement).toBeNull()
    expect((await env.balance(env.collection)) - before).toBe(usdc(5))
  })

  it('pays through the wallet library (createPayClient + evmSigner)', async () => {
    const { paymentId, gatewayUrl } = await env.pay('250')
    const before = await env.balance(env.merchant.destination)
    const client = createPayClient({
      baseUrl: env.t.app.config.publicBaseUrl,
      apiKey: env.walletKey,
      fetch: injectFetch(env),
      signers: [buyer.signer],
      // The service hints seconds between polls; a local chain is final in milliseconds.
      poll: { sleep: () => new Promise((resolve) => setTimeout(resolve, 25)) },
    })
    const result = await client.pay(gatewayUrl, {
      selectOption: (options) => options.find(isKind('eip3009'))!.id,
    })
    expect(result).toMatchObject({ paymentId, status: 'succeeded' })
    await waitSettled(paymentId)
    expect((await env.balance(env.merchant.destination)) - before).toBe(usdc(2.5))
  })
})

describe('rejected gasless payments move no funds', () => {
  async function rejected(paymentId: string, optionId: string, result: string) {
    const before = await snapshot(buyer.address, env.collection)
    const res = await env.gw('POST', paymentId, '/confirm', { optionId, results: [result] })
    expect(res.statusCode, res.body).toBe(400)
    expect(res.json.code).toBe('params_validation')
    expect(res.json.issues).toEqual([{ path: 'results.0', message: expect.stringContaining('results[0]') }])
    expect((await env.gw('GET', paymentId, '/status')).json.status).toBe('requires_action')
    expect(await snapshot(buyer.address, env.collection)).toEqual(before)
  }

  it('a forged signature (another key)', async () => {
    const { paymentId } = await env.pay('100')
    const option = await gaslessOption(paymentId)
    const forger = privateKeyToAccount(anvilPrivateKeys[7])
    await rejected(paymentId, option.id, await signAuthorization(forger, typedDataOf(option)))
  })

  it('a signature over a tampered amount', async () => {
    const { paymentId } = await env.pay('100')
    const option = await gaslessOption(paymentId)
    const typed = typedDataOf(option)
    typed.message.value = '1'
    await rejected(paymentId, option.id, await signTyped(buyer, typed))
  })

  it('a signature for another token', async () => {
    const { paymentId } = await env.pay('100')
    const option = await gaslessOption(paymentId)
    const typed = typedDataOf(option)
    typed.domain.verifyingContract = await deployTestToken(env.anvil.rpcUrl)
    await rejected(paymentId, option.id, await signTyped(buyer, typed))
  })

  it('an authorization whose nonce the buyer already used: the token refuses it, the payment fails', async () => {
    const { paymentId } = await env.pay('100')
    const option = await gaslessOption(paymentId)
    const nonce = typedDataOf(option).message.nonce as Hex
    // The buyer spends the nonce first, on a 1-unit transfer of its own.
    const spent = authorizationTypedData({
      token: env.token,
      chainId: env.anvil.chainId,
      from: buyer.address,
      to: privateKeyToAccount(anvilPrivateKeys[8]).address,
      value: 1n,
      nonce,
    })
    const spentSignature = (await signTyped(buyer, spent)) as Hex
    const wallet = createWalletClient({
      account: privateKeyToAccount(buyer.key),
      transport: http(env.anvil.rpcUrl),
    })
    const hash = await wallet.writeContract({
      chain: null,
      address: env.token,
      abi: testUsdcAbi,
      functionName: 'transferWithAuthorization',
      args: [
        spent.message.from,
        spent.message.to,
        1n,
        0n,
        BigInt(spent.message.validBefore),
        nonce,
        spentSignature,
      ],
    })
    await env.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 25 })

    const before = await snapshot(buyer.address, env.collection)
    const confirm = await env.gw('POST', paymentId, '/confirm', {
      optionId: option.id,
      results: [await buyer.sign(option.actions[0])],
    })
    expect(confirm.statusCode, confirm.body).toBe(200)
    const final = await env.waitFinal(paymentId)
    expect(final).toMatchObject({ status: 'failed', isFinal: true })
    expect(await snapshot(buyer.address, env.collection)).toEqual(before)
    const row = await env.t.db
      .selectFrom('payments')
      .selectAll()
      .where('id', '=', paymentId)
      .executeTakeFirstOrThrow()
    expect([row.failure_code, row.tx_id]).toEqual(['authorization_rejected', null])
    const job = await env.waitJob(paymentId, 'evm.relay')
    expect(JSON.stringify(job.result)).toContain('ERC3009UsedAuthorization')
    // Nothing was broadcast: the token's verdict came from a simulation.
    const sent = await env.t.db
      .selectFrom('evm_transactions')
      .select('id')
      .where('payment_id', '=', paymentId)
      .execute()
    expect(sent).toEqual([])
    expect((await env.merchantView(paymentId)).failureCode ?? null).toBeNull()
  })
})

describe('options follow the buyer balance', () => {
  it('a buyer without enough of the token gets no option for it', async () => {
    const { paymentId } = await env.pay('1250')
    const empty = await env.buyer(6, 0n)
    const short = await env.buyer(9, usdc(5))
    const res = await env.gw('POST', paymentId, '/options', { accounts: [empty.account, short.account] })
    expect(res.statusCode, res.body).toBe(200)
    // Only the push option (a transfer to the payment's deposit address), which needs no balance.
    expect(res.json.options.map((o: PaymentOption) => o.source ?? 'pull')).toEqual(['push'])
    await mintTestToken(env.anvil.rpcUrl, env.token, short.address, usdc(10))
    const again = await env.gw('POST', paymentId, '/options', { accounts: [short.account] })
    const pulled = again.json.options.filter((o: PaymentOption) => o.source !== 'push')
    expect(pulled.map((o: PaymentOption) => [o.account, o.amount.value])).toEqual([
      [short.account, '12500000'],
      [short.account, '12500000'],
    ])
  })
})

/** The wallet library's HTTP client, served in-process by `app.inject`. */
