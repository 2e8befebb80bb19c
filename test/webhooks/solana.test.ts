import { Keypair } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { confirmedPayment, type SolanaLive, startSolanaLive } from '../solana-live/live.js'
import { type Subscription, subscribeReceiver } from './receiver.js'

/**
 * A live Solana payment on the harness (litesvm behind a real JSON-RPC) produces created, processing,
 * succeeded (the buyer's transaction signature) and settled (the settlement signature and amount).
 */

let live: SolanaLive
let hooks: Subscription

beforeAll(async () => {
  live = await startSolanaLive({ config: { webhooks: { allowPrivateUrls: true } } })
  live.startRunner()
  hooks = await subscribeReceiver(live.t, live.liveKey)
})
afterAll(async () => {
  await hooks?.close()
  await live?.close()
})

describe('webhooks of a live Solana payment', () => {
  it('created, processing, succeeded (signature), settled (settlement signature, amount)', async () => {
    const merchant = Keypair.generate().publicKey
    const merchantId = await live.createMerchant(merchant)
    const buyer = await live.newBuyer()
    const { paymentId, signature } = await confirmedPayment(live, buyer, merchantId)
    const view = await live.waitForPayment(paymentId, merchantId, (p) => p.settlement?.successful)
    const events = await hooks.eventsOf(paymentId, 4)
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
