import { Keypair } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { solanaJobKinds } from '../../src/server/chains/solana/jobKinds.js'
import { refundJobKinds } from '../../src/server/refunds/jobs.js'
import { confirmedPayment, onChain, type SolanaLive, startSolanaLive, until } from './live.js'

/**
 * Live refunds on the Solana harness (LiteSVM behind real JSON-RPC): SPL transfers from the service's
 * token account, creating the destination's token account when needed (the service pays), before the
 * settlement (which pays the rest) and after it (from the float, pending while short), and exactly once
 * when the first send never reached the chain. Balances are read from the chain.
 */
let live: SolanaLive
beforeAll(async () => {
  live = await startSolanaLive()
})
afterAll(() => live?.close())

const paid = 12_500_000n // USD 12.50 at 1:1, 6 decimals

async function refund(merchantId: string, paymentId: string, body: Record<string, unknown> = {}) {
  const res = await live.t.request({
    method: 'POST',
    url: '/v1/refunds',
    headers: { 'api-key': live.liveKey, 'merchant-id': merchantId },
    payload: { paymentId, ...body },
  })
  expect(res.statusCode, res.body).toBe(201)
  return res.json as { refundId: string }
}

async function waitRefund(merchantId: string, refundId: string, done: (r: any) => boolean) {
  const deadline = Date.now() + 30_000
  for (;;) {
    const res = await live.t.request({
      method: 'GET',
      url: `/v1/refunds/${refundId}`,
      headers: { 'api-key': live.liveKey, 'merchant-id': merchantId },
    })
    if (done(res.json)) return res.json
    if (Date.now() > deadline) throw new Error(`refund ${refundId} still ${res.body}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

/** A payment of USD 12.50 paid by `buyer`, succeeded, its settlement (if any) not yet run. */
async function paidPayment(buyer: Keypair, merchantId: string) {
  const { paymentId } = await confirmedPayment(live, buyer, merchantId)
  const broadcast = live.startRunner({ kinds: [solanaJobKinds.broadcast] })
  await live.waitForPayment(paymentId, merchantId, (p) => p.status === 'succeeded')
  await broadcast.stop()
  return paymentId
}

describe('live Solana refunds', () => {
  it('before the settlement: a partial refund from the collected funds, the settlement pays the rest', async () => {
    const buyer = await live.newBuyer()
    const merchantOwner = Keypair.generate()
    const merchantId = await live.createMerchant(merchantOwner.publicKey)
    const before = await live.balance(buyer.publicKey)
    const paymentId = await paidPayment(buyer, merchantId)
    const made = await refund(merchantId, paymentId, { amount: { unit: 'iso4217/USD', value: '400' } })

    const runner = live.startRunner()
    const done = await waitRefund(merchantId, made.refundId, (r) => r.status === 'succeeded')
    const settled = await live.waitForPayment(paymentId, merchantId, (p) => p.settlement?.successful != null)
    await runner.stop()
    expect(await onChain(live, done.txId)).toBe(true)
    expect(await live.balance(buyer.publicKey)).toBe(before - paid + 4_000_000n)
    expect(await live.balance(merchantOwner.publicKey)).toBe(8_500_000n)
    expect(settled.settlement.successful.txId).toMatch(/^\w{80,90}$/)
  })

  it('after the settlement: from the float to a new account (created, service pays); short, pending until funded', async () => {
    const buyer = await live.newBuyer()
    const merchantId = await live.createMerchant(Keypair.generate().publicKey)
    const paymentId = await paidPayment(buyer, merchantId)
    const runner = live.startRunner()
    await live.waitForPayment(paymentId, merchantId, (p) => p.settlement?.successful != null)
    const float = await live.balance(live.service.publicKey)
    expect(float).toBeLessThan(paid)
    const elsewhere = Keypair.generate()
    const made = await refund(merchantId, paymentId, {
      destination: `${live.caip2}:${elsewhere.publicKey.toBase58()}`,
    })
    const short = await waitRefund(merchantId, made.refundId, (r) => r.failureCode === 'insufficient_funds')
    expect([short.status, short.txId]).toEqual(['pending', undefined])

    // Money collected for another merchant's payment (no settlement) is the float that pays it.
    const unsettled = await live.createMerchant()
    await confirmedPayment(live, await live.newBuyer(), unsettled)
    const done = await waitRefund(merchantId, made.refundId, (r) => r.status === 'succeeded')
    await runner.stop()
    expect(done.failureCode).toBeUndefined()
    expect(await live.balance(elsewhere.publicKey)).toBe(paid)
    expect(await live.balance(live.service.publicKey)).toBe(float)
  })

  it('the first send never reached the chain: the recorded bytes are sent again, once', async () => {
    const buyer = await live.newBuyer()
    const merchantId = await live.createMerchant()
    const paymentId = await paidPayment(buyer, merchantId)
    const before = await live.balance(buyer.publicKey)
    const made = await refund(merchantId, paymentId, { amount: { unit: 'iso4217/USD', value: '300' } })

    live.proxy.fail('sendTransaction', { code: -32005, message: 'Node is unhealthy' })
    const sends = live.proxy.calls('sendTransaction')
    const first = live.startRunner({ kinds: [refundJobKinds.solana] })
    await until(() => live.proxy.calls('sendTransaction') > sends, 'the refused send')
    await first.stop()
    const [recorded] = await live.t.db
      .selectFrom('solana_transactions')
      .selectAll()
      .where('refund_id', '=', made.refundId)
      .execute()
    expect(await onChain(live, recorded!.signature)).toBe(false)
    const executed = live.executed()
    await live.t.db
      .updateTable('jobs')
      .set({ state: 'running', locked_until: new Date(Date.now() - 1000) })
      .where('refund_id', '=', made.refundId)
      .execute()

    live.proxy.fail('sendTransaction', null)
    const second = live.startRunner({ kinds: [refundJobKinds.solana] })
    const done = await waitRefund(merchantId, made.refundId, (r) => r.status === 'succeeded')
    await second.stop()
    expect(done.txId).toBe(recorded!.signature)
    expect(live.executed()).toBe(executed + 1)
    const rows = await live.t.db
      .selectFrom('solana_transactions')
      .select('signature')
      .where('refund_id', '=', made.refundId)
      .execute()
    expect(rows).toHaveLength(1)
    expect(await live.balance(buyer.publicKey)).toBe(before + 3_000_000n)
  })
})
