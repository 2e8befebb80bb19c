import { createWalletClient, erc20Abi, http } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { reconcileEvmChain } from '../../src/server/chains/evm/ledger.js'
import { anvilChain, anvilPrivateKeys, mintTestToken } from '../anvil.js'
import { type Buyer, confirmGasless, createEvmEnv, type EvmEnv } from '../evm/support.js'
import { headers } from '../server/helpers.js'
import { sample, sampleSum } from '../server/prometheus.js'
import { type Receiver, type Subscription, startReceiver, subscribeReceiver } from '../webhooks/receiver.js'

/**
 * The metrics of money in motion, against a live payment on Anvil and real webhook deliveries: blocks
 * from send to final for the relay and the settlement, delivery attempts by outcome (one endpoint
 * answering 200, one answering 500), and the ledger's readings (a refund waiting for float, an operator's
 * top-up, a reconciliation difference made by moving tokens behind the ledger's back).
 */
let env: EvmEnv
let buyer: Buyer
let hooks: Subscription
let failing: Receiver
let paymentId: string
beforeAll(async () => {
  env = await createEvmEnv({ config: { webhooks: { allowPrivateUrls: true } } })
  buyer = await env.buyer(2)
  hooks = await subscribeReceiver(env.t, env.liveKey)
  failing = await startReceiver()
  failing.respond = () => 500
  const res = await env.t.request({
    method: 'POST',
    url: '/v1/webhook-endpoints',
    headers: headers(env.liveKey),
    payload: { url: failing.url },
  })
  expect(res.statusCode, res.body).toBe(201)
  env.startRunner()
}, 60_000)
afterAll(async () => {
  await hooks?.close()
  await failing?.close()
  await env?.close()
})

async function scrape(): Promise<string> {
  const res = await env.t.app.inject({ method: 'GET', url: '/metrics' })
  expect(res.statusCode).toBe(200)
  return res.body
}

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await read()
    if (done(value)) return value
    if (Date.now() > deadline) throw new Error(`still ${JSON.stringify(value)}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const attempts = (text: string, outcome: string) =>
  sample(text, 'caipay_webhook_delivery_attempts_total', { outcome }) ?? 0

describe('metrics of a live payment, its webhooks and the ledger', () => {
  it('blocks from send to final (relay, settle) and webhook attempts by outcome', {
    timeout: 90_000,
  }, async () => {
    const chain = env.anvil.caip2
    const before = await scrape()
    const headBefore = await env.publicClient.getBlockNumber({ cacheTime: 0 })
    paymentId = (await confirmGasless(env, buyer, '1000')).paymentId
    expect((await env.waitFinal(paymentId)).status).toBe('succeeded')
    await env.waitSettled(paymentId)
    const blocksMined = Number((await env.publicClient.getBlockNumber({ cacheTime: 0 })) - headBefore)

    const after = await scrape()
    for (const purpose of ['relay', 'settle']) {
      const labels = { chain, purpose }
      const count = (text: string) =>
        sample(text, 'caipay_transaction_send_to_final_blocks_count', labels) ?? 0
      const sum = (text: string) => sample(text, 'caipay_transaction_send_to_final_blocks_sum', labels) ?? 0
      expect(count(after) - count(before), purpose).toBe(1)
      // Anvil mines each transaction in a block of its own, final at one confirmation: at most the
      // blocks mined meanwhile (0 when the step's first look found it final already).
      const blocks = sum(after) - sum(before)
      expect(blocks, purpose).toBeGreaterThanOrEqual(0)
      expect(blocks, purpose).toBeLessThanOrEqual(blocksMined)
    }

    // Four events (created, processing, succeeded, settled) to each endpoint: the good one took each at
    // the first attempt; every request the failing one answered 500 is an attempt to retry.
    await hooks.eventsOf(paymentId, 4)
    await failing.waitFor(4)
    // A delivery is counted once its attempt is recorded, a moment after the receiver answered it.
    const delta = (text: string, outcome: string) => attempts(text, outcome) - attempts(before, outcome)
    const counted = await until(
      async () => ({ text: await scrape(), failed: failing.received.length }),
      ({ text, failed }) => delta(text, 'delivered') === 4 && delta(text, 'retrying') === failed,
    )
    expect(hooks.receiver.received).toHaveLength(4)
    expect(counted.failed).toBeGreaterThanOrEqual(4)
    expect(delta(counted.text, 'gave_up')).toBe(0)
  })

  it('pending refunds, unallocated top-ups and a reconciliation difference, in whole tokens', {
    timeout: 90_000,
  }, async () => {
    const chain = env.anvil.caip2
    const labels = { chain, asset: env.asset }
    // Settled, so a refund is paid from float, and there is none: it waits, pending.
    const res = await env.t.request({
      method: 'POST',
      url: '/v1/refunds',
      headers: headers(env.liveKey, env.merchant.id),
      payload: { paymentId },
    })
    expect(res.statusCode, res.body).toBe(201)
    expect(res.json.status).toBe('pending')
    let text = await scrape()
    expect(sample(text, 'caipay_refunds_pending_amount', labels)).toBe(10)
    expect(sample(text, 'caipay_ledger_reconciliation_difference', labels)).toBeUndefined()

    // The operator tops up one minor unit (unallocated, too little for the refund); then the collection
    // key moves it out with no record: the chain holds one unit less than the ledger explains.
    const evmChain = env.t.app.liveChains.evm[0]!
    await mintTestToken(env.anvil.rpcUrl, env.token, env.collection, 1n)
    await reconcileEvmChain(env.t.db, evmChain)
    text = await scrape()
    expect(sample(text, 'caipay_ledger_unallocated_amount', labels)).toBe(0.000001)
    expect(sample(text, 'caipay_ledger_reconciliation_difference', labels)).toBeUndefined()
    const executor = createWalletClient({
      account: privateKeyToAccount(anvilPrivateKeys[1]),
      chain: anvilChain(env.anvil.chainId, env.anvil.rpcUrl),
      transport: http(env.anvil.rpcUrl),
    })
    const hash = await executor.writeContract({
      address: env.token,
      abi: erc20Abi,
      functionName: 'transfer',
      args: [buyer.address, 1n],
    })
    await env.publicClient.waitForTransactionReceipt({ hash })
    await reconcileEvmChain(env.t.db, evmChain)
    text = await scrape()
    expect(
      sample(text, 'caipay_ledger_reconciliation_difference', {
        ...labels,
        address: env.collection.toLowerCase(),
      }),
    ).toBe(-0.000001)
    expect(sample(text, 'caipay_refunds_pending_amount', labels)).toBe(10)
    // Summed over partners and merchants: no partner, merchant or payment id in any of them.
    for (const name of [
      'caipay_refunds_pending_amount',
      'caipay_ledger_unallocated_amount',
      'caipay_ledger_reconciliation_difference',
    ])
      for (const line of text.split('\n').filter((l) => l.startsWith(name)))
        expect(line).not.toMatch(new RegExp(`${env.merchant.id}|${paymentId}|partner`))
    expect(sampleSum(text, 'caipay_ledger_float_amount')).toBe(0)
  })
})
