import { createTransferCheckedInstruction, getAssociatedTokenAddressSync } from '@solana/spl-token'
import { Keypair, sendAndConfirmTransaction, Transaction } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SolanaChain } from '../../src/server/chains/solana/chain.js'
import { solanaJobKinds } from '../../src/server/chains/solana/jobKinds.js'
import { reconcileSolanaChain } from '../../src/server/chains/solana/ledger.js'
import { holderOf } from '../../src/server/ledger/entries.js'
import { acknowledgeDifference, listDifferences } from '../../src/server/ledger/reconcile.js'
import { confirmedPayment, type SolanaLive, startSolanaLive, until } from './live.js'

/**
 * The ledger on the Solana harness: what arrives at the service's token account that no payment explains
 * (an operator's top-up, read from the transaction's token balance changes) is credited as unallocated
 * and pays a refund that waited for the float; reconciliation finds money gone behind the ledger and
 * stops settlements until an operator acknowledges it.
 */
let live: SolanaLive
let chain: SolanaChain
let holder: string
beforeAll(async () => {
  live = await startSolanaLive()
  chain = live.t.app.liveChains.solana[0]!
  holder = holderOf(live.caip2, live.service.publicKey.toBase58())
})
afterAll(() => live?.close())

const paid = 12_500_000n // USD 12.50 at 1:1, 6 decimals

async function balance(kind: string, owner = ''): Promise<bigint> {
  const row = await live.t.db
    .selectFrom('ledger_accounts')
    .select('balance')
    .where('holder', '=', holder)
    .where('kind', '=', kind as never)
    .where('owner', '=', owner)
    .executeTakeFirst()
  return BigInt(row?.balance ?? 0)
}

async function readRefund(merchantId: string, refundId: string) {
  const res = await live.t.request({
    method: 'GET',
    url: `/v1/refunds/${refundId}`,
    headers: { 'api-key': live.liveKey, 'merchant-id': merchantId },
  })
  expect(res.statusCode, res.body).toBe(200)
  return res.json
}

// biome-ignore lint/suspicious/noExplicitAny: JSON bodies, checked by assertions
type Json = any

async function waitRefund(merchantId: string, refundId: string, done: (r: Json) => boolean) {
  const deadline = Date.now() + 30_000
  for (;;) {
    const refund = await readRefund(merchantId, refundId)
    if (done(refund)) return refund
    if (Date.now() > deadline) throw new Error(`refund ${refundId} still ${JSON.stringify(refund)}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

const refundTransactions = (refundId: string) =>
  live.t.db.selectFrom('solana_transactions').select('signature').where('refund_id', '=', refundId).execute()

describe('the ledger on Solana', () => {
  it('a refund after settlement with an empty float waits (insufficient_funds), sends nothing, and is paid once a top-up is minted', async () => {
    const buyer = await live.newBuyer()
    const merchantId = await live.createMerchant(Keypair.generate().publicKey)
    const { paymentId } = await confirmedPayment(live, buyer, merchantId)
    const runner = live.startRunner()
    await live.waitForPayment(paymentId, merchantId, (p) => p.settlement?.successful != null)
    const before = await live.balance(buyer.publicKey)
    const made = await live.t.request({
      method: 'POST',
      url: '/v1/refunds',
      headers: { 'api-key': live.liveKey, 'merchant-id': merchantId },
      payload: { paymentId },
    })
    expect(made.statusCode, made.body).toBe(201)
    const refundId: string = made.json.refundId
    const short = await waitRefund(merchantId, refundId, (r) => r.failureCode === 'insufficient_funds')
    expect([short.status, short.txId]).toEqual(['pending', undefined])
    // Give the job a few more tries: still nothing signed.
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(await refundTransactions(refundId)).toEqual([])

    await live.mintTo(live.service.publicKey, paid)
    const done = await waitRefund(merchantId, refundId, (r) => r.status === 'succeeded')
    await runner.stop()
    expect(done.failureCode).toBeUndefined()
    expect(await refundTransactions(refundId)).toEqual([{ signature: done.txId }])
    expect(await live.balance(buyer.publicKey)).toBe(before + paid)
    const topUps = await live.t.db
      .selectFrom('ledger_entries')
      .select(['debit_kind', 'credit_kind', 'amount', 'tx_id'])
      .where('holder', '=', holder)
      .where('flow', '=', 'topup')
      .execute()
    expect(topUps).toEqual([
      { debit_kind: 'world', credit_kind: 'unallocated', amount: String(paid), tx_id: expect.any(String) },
    ])
    const reserved = await live.t.db
      .selectFrom('ledger_entries')
      .select(['flow', 'debit_kind', 'credit_kind', 'amount'])
      .where('refund_id', '=', refundId)
      .orderBy('id')
      .execute()
    expect(reserved).toEqual([
      { flow: 'refund.reserved', debit_kind: 'unallocated', credit_kind: 'refunds', amount: String(paid) },
      { flow: 'refund.succeeded', debit_kind: 'refunds', credit_kind: 'world', amount: String(paid) },
    ])
    expect(await balance('unallocated')).toBe(0n)
    // Read again: each top-up is credited once.
    await reconcileSolanaChain(live.t.db, chain)
    expect(await balance('unallocated')).toBe(0n)
    expect(await listDifferences(live.t.db, { open: true })).toEqual([])
  })

  it('reconciliation: money gone behind the ledger stops settlements until acknowledged', async () => {
    // The harness keeps one blockhash: a new one, or this mint repeats the last one's bytes exactly.
    await live.validator.expireBlockhash()
    await live.mintTo(live.service.publicKey, 1n)
    await reconcileSolanaChain(live.t.db, chain)
    expect(await listDifferences(live.t.db, { open: true })).toEqual([])
    expect(await balance('unallocated')).toBe(1n)

    // The service key moves that unit out with no record: the ledger holds one more than the chain.
    const thief = Keypair.generate()
    await live.mintTo(thief.publicKey, 1n)
    const { blockhash, lastValidBlockHeight } = await live.validator.connection.getLatestBlockhash()
    const withdrawal = new Transaction({
      feePayer: live.service.publicKey,
      blockhash,
      lastValidBlockHeight,
    }).add(
      createTransferCheckedInstruction(
        getAssociatedTokenAddressSync(live.mint, live.service.publicKey, true),
        live.mint,
        getAssociatedTokenAddressSync(live.mint, thief.publicKey, true),
        live.service.publicKey,
        1n,
        6,
      ),
    )
    await sendAndConfirmTransaction(live.validator.connection, withdrawal, [live.service])
    await reconcileSolanaChain(live.t.db, chain, undefined, { recheckMs: 50 })
    const [difference] = await listDifferences(live.t.db, { open: true })
    expect(difference).toMatchObject({ holder, difference: '-1' })
    expect(await balance('unallocated')).toBe(1n)

    const merchantId = await live.createMerchant(Keypair.generate().publicKey)
    const { paymentId } = await confirmedPayment(live, await live.newBuyer(), merchantId)
    const runner = live.startRunner()
    const held = await until(async () => {
      const job = await live.t.db
        .selectFrom('jobs')
        .select('last_error')
        .where('kind', '=', solanaJobKinds.settle)
        .where('payment_id', '=', paymentId)
        .executeTakeFirst()
      return job?.last_error?.includes('caipay ledger ack') ?? false
    }, 'the settlement held by the difference')
    expect(held).toBe(true)
    const settlements = await live.t.db
      .selectFrom('solana_transactions')
      .select('signature')
      .where('payment_id', '=', paymentId)
      .where('purpose', '=', 'settlement')
      .execute()
    expect(settlements).toEqual([])

    expect(
      await acknowledgeDifference(live.t.db, {
        id: difference!.id,
        note: 'test withdrawal',
        now: new Date(),
      }),
    ).toMatchObject({ id: difference!.id })
    await live.waitForPayment(paymentId, merchantId, (p) => p.settlement?.successful != null)
    await runner.stop()
    await reconcileSolanaChain(live.t.db, chain, undefined, { recheckMs: 50 })
    expect(await listDifferences(live.t.db, { open: true })).toEqual([])
    expect(await live.balance(live.service.publicKey)).toBe(0n)
  })
})
