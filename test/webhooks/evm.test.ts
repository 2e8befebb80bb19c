import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Buyer, createEvmEnv, type EvmEnv, isKind } from '../evm/support.js'
import { type Subscription, subscribeReceiver } from './receiver.js'

/**
 * Live EVM payments on Anvil produce their webhook events: gasless (created, processing, succeeded with
 * the relay hash, settled with the settlement hash and amount) and direct (no settlement step). The
 * receiver is on loopback, so the operator opt-in for private URLs is on.
 */

let env: EvmEnv
let buyer: Buyer
let hooks: Subscription

beforeAll(async () => {
  env = await createEvmEnv({ config: { webhooks: { allowPrivateUrls: true } } })
  buyer = await env.buyer(2)
  env.startRunner()
  hooks = await subscribeReceiver(env.t, env.liveKey)
})
afterAll(async () => {
  await hooks?.close()
  await env?.close()
})

async function confirm(paymentId: string, kind: 'eip3009' | 'transfer') {
  const options = await env.gw('POST', paymentId, '/options', { accounts: [buyer.account] })
  const option = options.json.options.find(isKind(kind))
  const result = await buyer.sign(option.actions[0])
  const res = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results: [result] })
  expect(res.json.status, res.body).toBe('processing')
  return option
}

describe('webhooks of live EVM payments', () => {
  it('gasless: created, processing, succeeded (relay hash), settled (settlement hash, amount)', async () => {
    const { paymentId } = await env.pay('1250')
    const option = await confirm(paymentId, 'eip3009')
    const events = await hooks.eventsOf(paymentId, 4)
    const view = await env.merchantView(paymentId)
    expect(events.map((e) => [e.type, e.data.payment_state_version])).toEqual([
      ['payment.created', 0],
      ['payment.processing', 1],
      ['payment.succeeded', 2],
      ['payment.settled', 3],
    ])
    const amount = { unit: `caip19/${env.asset}`, value: '12500000' }
    expect(option.amount).toMatchObject(amount)
    const processing = {
      processing_at: expect.any(String),
      option_amount: amount,
      fee: null,
      settlement_amount: amount,
      buyer_caip10: buyer.account,
      chain_caip2: env.anvil.caip2,
    }
    for (const e of events) {
      expect(e.data).toMatchObject({
        payment_id: paymentId,
        merchant_id: env.merchant.id,
        live: true,
        amount: { unit: 'iso4217/USD', value: '1250' },
        failed: null,
        cancelled: null,
        expired: null,
      })
    }
    expect(events[1]!.data).toMatchObject({ status: 'processing', processing, success: null })
    expect(events[2]!.data).toMatchObject({
      status: 'succeeded',
      processing,
      success: { succeeded_at: expect.any(String), tx_id: view.info.txId },
      settled: null,
    })
    expect(view.info.txId).toMatch(/^0x[0-9a-f]{64}$/)
    expect(events[3]!.data).toMatchObject({
      status: 'succeeded',
      settled: { settled_at: expect.any(String), tx_id: view.settlement.successful.txId, amount },
    })
  })

  it('direct transfer: created, processing, succeeded with the buyer transaction; no settlement step', async () => {
    const { paymentId } = await env.pay('300')
    await confirm(paymentId, 'transfer')
    const final = await env.waitFinal(paymentId)
    const events = await hooks.eventsOf(paymentId, 3)
    expect(events.map((e) => [e.type, e.data.payment_state_version])).toEqual([
      ['payment.created', 0],
      ['payment.processing', 1],
      ['payment.succeeded', 2],
    ])
    expect(events[2]!.data).toMatchObject({ live: true, success: { tx_id: final.txId }, settled: null })
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(hooks.receiver.received.filter((x) => x.event.data.payment_id === paymentId)).toHaveLength(3)
  })
})
