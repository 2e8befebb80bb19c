import { Keypair } from '@solana/web3.js'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { holderOf } from '../../src/server/ledger/entries.js'
import { confirmedPayment, type SolanaLive, startSolanaLive } from './live.js'

/**
 * Manual capture on the Solana harness (LiteSVM behind real JSON-RPC), docs/capture.md: the money held in
 * the service's token account (the ledger's authorized account) until a capture settles the captured part
 * to the merchant and refunds the rest, or a void or the expiry refunds it all; racing captures and voids
 * move it once. Balances are read from the chain; the ledger's book at the service's account matches.
 */
let live: SolanaLive
beforeAll(async () => {
  live = await startSolanaLive()
})
afterAll(() => live?.close())

const paid = 12_500_000n // USD 12.50 at 1:1, 6 decimals

const post = (merchantId: string, url: string, payload?: unknown) =>
  live.t.request({
    method: 'POST',
    url,
    headers: { 'api-key': live.liveKey, 'merchant-id': merchantId },
    ...(payload ? { payload: payload as Record<string, unknown> } : {}),
  })

/** A manual-capture payment of USD 12.50 paid by `buyer` and held. */
async function heldPayment(buyer: Keypair, merchantId: string, extra: Record<string, unknown> = {}) {
  const { paymentId } = await confirmedPayment(live, buyer, merchantId, { capture: 'manual', ...extra })
  await live.waitForPayment(paymentId, merchantId, (p) => p.capture?.status === 'authorized')
  return paymentId
}

async function refundsDone(paymentId: string): Promise<void> {
  const deadline = Date.now() + 30_000
  for (;;) {
    const rows = await live.t.db
      .selectFrom('refunds')
      .select('status')
      .where('payment_id', '=', paymentId)
      .execute()
    if (rows.length > 0 && rows.every((r) => r.status === 'succeeded')) return
    if (Date.now() > deadline) throw new Error(`refunds of ${paymentId}: ${JSON.stringify(rows)}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** The ledger's book at the service's token account is the chain's balance there, to the unit. */
async function expectLedgerIsTheChain(): Promise<void> {
  const holder = holderOf(live.caip2, live.service.publicKey.toBase58())
  const { rows } = await sql<{ total: string }>`
    SELECT coalesce(sum(balance), 0)::text AS total FROM ledger_accounts WHERE holder = ${holder}`.execute(
    live.t.db,
  )
  expect(BigInt(rows[0]!.total)).toBe(await live.balance(live.service.publicKey))
}

describe('manual capture on Solana', () => {
  it('authorize -> partial capture, authorize -> full capture, authorize -> void', async () => {
    const runner = live.startRunner()
    const buyer = await live.newBuyer()
    const owner = Keypair.generate()
    const merchantId = await live.createMerchant(owner.publicKey)
    const start = await live.balance(buyer.publicKey)
    const service = await live.balance(live.service.publicKey)

    const partial = await heldPayment(buyer, merchantId)
    expect(await live.balance(live.service.publicKey)).toBe(service + paid)
    await expectLedgerIsTheChain()
    const res = await post(merchantId, `/v1/payments/${partial}/capture`, {
      amount: { unit: 'iso4217/USD', value: '1000' },
    })
    expect(res.statusCode, res.body).toBe(200)
    await live.waitForPayment(partial, merchantId, (p) => p.settlement?.successful != null)
    await refundsDone(partial)
    expect(await live.balance(owner.publicKey)).toBe(10_000_000n)
    expect(await live.balance(buyer.publicKey)).toBe(start - 10_000_000n)

    const full = await heldPayment(buyer, merchantId)
    expect((await post(merchantId, `/v1/payments/${full}/capture`)).statusCode).toBe(200)
    await live.waitForPayment(full, merchantId, (p) => p.settlement?.successful != null)
    expect(await live.balance(owner.publicKey)).toBe(10_000_000n + paid)

    const voided = await heldPayment(buyer, merchantId)
    expect((await post(merchantId, `/v1/payments/${voided}/void`)).statusCode).toBe(200)
    await refundsDone(voided)
    expect(await live.balance(buyer.publicKey)).toBe(start - 10_000_000n - paid)
    expect(await live.balance(live.service.publicKey)).toBe(service)
    await runner.stop()
    await expectLedgerIsTheChain()
  })

  it('expiry at captureBy, and 20 racing captures and voids: one wins, the money moves once', async () => {
    const runner = live.startRunner()
    const buyer = await live.newBuyer()
    const owner = Keypair.generate()
    const merchantId = await live.createMerchant(owner.publicKey)
    const start = await live.balance(buyer.publicKey)
    const now = Math.floor(Date.now() / 1000)
    const expiring = await heldPayment(buyer, merchantId, { expiresAt: now + 8, captureBy: now + 9 })
    await live.waitForPayment(expiring, merchantId, (p) => p.capture?.status === 'expired')
    await refundsDone(expiring)
    expect(await live.balance(buyer.publicKey)).toBe(start)

    const raced = await heldPayment(buyer, merchantId)
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        post(merchantId, `/v1/payments/${raced}/${i % 2 === 0 ? 'capture' : 'void'}`),
      ),
    )
    const won = answers.filter((a) => a.statusCode === 200)
    expect(won).toHaveLength(1)
    if (won[0]!.json.capture.status === 'captured') {
      await live.waitForPayment(raced, merchantId, (p) => p.settlement?.successful != null)
      expect(await live.balance(owner.publicKey)).toBe(paid)
      expect(await live.balance(buyer.publicKey)).toBe(start - paid)
    } else {
      await refundsDone(raced)
      expect(await live.balance(owner.publicKey)).toBe(0n)
      expect(await live.balance(buyer.publicKey)).toBe(start)
    }
    await runner.stop()
    await expectLedgerIsTheChain()
  })
})
