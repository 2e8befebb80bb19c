import { Keypair } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startWebhookDispatcher, type WebhookDispatcher } from '../../src/server/webhooks/dispatch.js'
import { headers } from '../server/helpers.js'
import { confirmedPayment, type SolanaLive, startSolanaLive } from '../solana-live/live.js'
import { type Receiver, startReceiver, verifyWithStandardWebhooks } from './receiver.js'

/**
 * A live Solana payment on the harness (litesvm behind a real JSON-RPC) produces created, processing,
 * succeeded (the buyer's transaction signature) and settled (the settlement signature and amount).
 */

let live: SolanaLive
let receiver: Receiver
let secret: string
let dispatcher: WebhookDispatcher

beforeAll(async () => {
  live = await startSolanaLive({ config: { webhooks: { allowPrivateUrls: true } } })
  live.startRunner()
  dispatcher = startWebhookDispatcher({ db: live.t.db, listenUrl: live.t.databaseUrl, intervalMs: 50 })
  receiver = await startReceiver()
  const res = await live.t.request({
    method: 'POST',
    url: '/v1/webhook-endpoints',
    headers: headers(live.liveKey),
    payload: { url: receiver.url },
  })
  expect(res.statusCode, res.body).toBe(201)
  secret = res.json.secret
})
afterAll(async () => {
  await dispatcher?.stop()
  await receiver?.close()
  await live?.close()
})

describe('webhooks of a live Solana payment', () => {
  it('created, processing, succeeded (signature), settled (settlement signature, amount)', async () => {
    const merchant = Keypair.generate().publicKey
    const merchantId = await live.createMerchant(merchant)
    const buyer = await live.newBuyer()
    const { paymentId, signature } = await confirmedPayment(live, buyer, merchantId)
    const view = await live.waitForPayment(paymentId, merchantId, (p) => p.settlement?.successful)
    const deadline = Date.now() + 20_000
    while (receiver.received.filter((x) => x.event.data.payment_id === paymentId).length < 4) {
      if (Date.now() > deadline) throw new Error('events did not arrive')
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    const events = receiver.received
      .filter((x) => x.event.data.payment_id === paymentId)
      .map((x) => verifyWithStandardWebhooks(secret, x))
      .sort((a, b) => a.data.payment_state_version - b.data.payment_state_version)
    expect(events.map((e) => [e.type, e.data.payment_state_version])).toEqual([
      ['payment.created', 0],
      ['payment.processing', 1],
      ['payment.succeeded', 2],
      ['payment.settled', 3],
    ])
    const amount = { unit: `caip19/${live.asset}`, value: view.info.optionAmount.value }
    const processing = {
      processing_at: expect.any(String),
      option_amount: amount,
      fee: null,
      settlement_amount: amount,
      buyer_caip10: `${live.caip2}:${buyer.publicKey.toBase58()}`,
      chain_caip2: live.caip2,
    }
    for (const e of events) {
      expect(e.data).toMatchObject({
        payment_id: paymentId,
        merchant_id: merchantId,
        live: true,
        failed: null,
      })
    }
    expect(events[1]!.data).toMatchObject({ status: 'processing', processing })
    expect(events[2]!.data).toMatchObject({
      status: 'succeeded',
      processing,
      success: { succeeded_at: expect.any(String), tx_id: signature },
      settled: null,
    })
    expect(events[3]!.data).toMatchObject({
      settled: { settled_at: expect.any(String), tx_id: view.settlement.successful.txId, amount },
    })
  })
})
