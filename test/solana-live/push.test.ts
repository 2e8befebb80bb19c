import {
  createTransfer,
  findReference,
  parseURL,
  type TransferRequestURL,
  validateTransfer,
} from '@solana/pay'
import { Keypair, LAMPORTS_PER_SOL, PublicKey } from '@solana/web3.js'
import BigNumber from 'bignumber.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SolanaChain } from '../../src/server/chains/solana/chain.js'
import { reconcileSolanaChain } from '../../src/server/chains/solana/ledger.js'
import { scanPushPayments } from '../../src/server/chains/solana/push.js'
import { tokenAmountFor } from '../../src/server/gateway/quote.js'
import { holderOf } from '../../src/server/ledger/entries.js'
import { listDifferences } from '../../src/server/ledger/reconcile.js'
import { assignDeposit, depositRefundJobKind, refundDeposit } from '../../src/server/payments/deposits.js'
import { depositsOf, expectEachSentBackOnce } from '../deposits.js'
import { airdrop, confirmSignature } from '../solana/index.js'
import { paymentRow, type SolanaLive, startSolanaLive } from './live.js'

/**
 * Push payments on the litesvm cluster (docs/push-payments.md): the buyer is an independent wallet that
 * knows only the transfer request URL, and pays it with @solana/pay's own parseURL + createTransfer;
 * caipay's scan must find and validate the same transfer @solana/pay's findReference/validateTransfer do,
 * and every mismatch ends where the docs say, with the ledger agreeing with the chain.
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

// biome-ignore lint/suspicious/noExplicitAny: JSON bodies, checked by assertions
type Json = any

const due = 12_500_000n // USD 12.50 at 1:1, 6 decimals

async function pushOption(paymentId: string): Promise<Json> {
  const options = await live.gateway(paymentId, 'options', { accounts: [] })
  expect(options.statusCode, options.body).toBe(200)
  const push = options.json.options.filter((o: Json) => o.source === 'push')
  expect(push).toHaveLength(1)
  return push[0]
}

/** A funded wallet (SOL for its fee, tokens to send). */
async function wallet(tokens = 100_000_000n): Promise<Keypair> {
  const buyer = await live.newBuyer(tokens)
  await airdrop(live.validator.connection, buyer.publicKey, LAMPORTS_PER_SOL)
  return buyer
}

/** What a Solana Pay wallet does with a scanned URL: parse, build the transfer, sign, send, confirm. */
async function payUrl(buyer: Keypair, url: string, amount?: BigNumber): Promise<string> {
  const { connection } = live.validator
  const request = parseURL(url) as TransferRequestURL
  const transaction = await createTransfer(connection, buyer.publicKey, {
    recipient: request.recipient,
    amount: amount ?? request.amount!,
    ...(request.splToken ? { splToken: request.splToken } : {}),
    ...(request.reference ? { reference: request.reference } : {}),
    ...(request.memo ? { memo: request.memo } : {}),
  })
  transaction.sign(buyer)
  const signature = await connection.sendRawTransaction(transaction.serialize())
  await confirmSignature(connection, signature)
  return signature
}

async function merchantPayment(merchantId: string, paymentId: string): Promise<Json> {
  const res = await live.t.request({
    method: 'GET',
    url: `/v1/payments/${paymentId}`,
    headers: { 'api-key': live.liveKey, 'merchant-id': merchantId },
  })
  expect(res.statusCode, res.body).toBe(200)
  return res.json
}

async function ledgerBalance(kind: string, owner: string): Promise<bigint> {
  const row = await live.t.db
    .selectFrom('ledger_accounts')
    .select('balance')
    .where('holder', '=', holder)
    .where('kind', '=', kind as never)
    .where('owner', '=', owner)
    .executeTakeFirst()
  return BigInt(row?.balance ?? 0)
}

const scan = (now?: Date) => scanPushPayments(live.t.db, chain, live.t.app.config, tokenAmountFor, now)

describe('Solana Pay transfer requests', () => {
  it('offers one push option per payment, under one reference stable across options calls', async () => {
    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    const first = await pushOption(paymentId)
    const again = await pushOption(paymentId)
    expect(first).toMatchObject({ source: 'push', actions: [], etaS: 0 })
    expect(again.push.reference).toBe(first.push.reference)
    const parsed = parseURL(first.push.url) as TransferRequestURL
    expect(parsed.recipient.toBase58()).toBe(live.service.publicKey.toBase58())
    expect(parsed.splToken?.toBase58()).toBe(live.mint.toBase58())
    expect(parsed.amount?.toString()).toBe('12.5')
    expect(parsed.reference?.map((r) => r.toBase58())).toEqual([first.push.reference])
    expect(parsed.label).toBe('Solana Shop')
    expect(first.push.amount).toBe(due.toString())
    // A wallet that advertises an account gets its pull option and the same push option.
    const buyer = await wallet()
    const withAccount = await live.gateway(paymentId, 'options', {
      accounts: [`${live.caip2}:${buyer.publicKey.toBase58()}`],
    })
    const sources = withAccount.json.options.map((o: Json) => o.source ?? 'pull')
    expect(sources).toEqual(['pull', 'push'])
  })

  it('finds the transfer @solana/pay finds, succeeds and settles it with its ledger entries', async () => {
    const settleTo = Keypair.generate().publicKey
    const merchantId = await live.createMerchant(settleTo)
    const { paymentId } = await live.createPayment(merchantId)
    const option = await pushOption(paymentId)
    const buyer = await wallet()
    const before = await live.balance(live.service.publicKey)
    const signature = await payUrl(buyer, option.push.url)
    const { connection } = live.validator
    const reference = new PublicKey(option.push.reference)
    const found = await findReference(connection, reference, { finality: 'confirmed' })
    expect(found.signature).toBe(signature)
    const request = parseURL(option.push.url) as TransferRequestURL
    await validateTransfer(connection, found.signature, {
      recipient: request.recipient,
      amount: new BigNumber(request.amount!),
      splToken: request.splToken!,
      reference,
    })
    const landedSlot = found.slot
    const outcomes = await scan()
    expect(outcomes).toEqual([{ kind: 'succeeded', received: due, excess: 0n }])
    const seenSlot = await connection.getSlot('confirmed')
    console.info(`push payment: transfer at slot ${landedSlot}, succeeded by slot ${seenSlot}`)
    const row = await paymentRow(live, paymentId)
    expect(row).toMatchObject({ status: 'succeeded', source: 'push', tx_id: signature })
    expect(row.buyer).toBe(`${live.caip2}:${buyer.publicKey.toBase58()}`)
    expect(await live.balance(live.service.publicKey)).toBe(before + due)
    const shown = await merchantPayment(merchantId, paymentId)
    expect(shown).toMatchObject({ status: 'succeeded', source: 'push', info: { txId: signature } })
    expect(shown.received).toEqual([{ asset: live.asset, value: due.toString() }])
    // Scanning again finds nothing new: each transfer applies once.
    expect(await scan()).toEqual([])
    const runner = live.startRunner()
    await live.waitForPayment(paymentId, merchantId, (p) => p.settlement?.successful !== null)
    await runner.stop()
    expect(await live.balance(settleTo)).toBe(due)
    const entries = await live.t.db
      .selectFrom('ledger_entries')
      .select(['flow', 'debit_kind', 'credit_kind', 'amount'])
      .where('payment_id', '=', paymentId)
      .execute()
    expect(entries).toContainEqual({
      flow: 'payment.collected',
      debit_kind: 'world',
      credit_kind: 'collected',
      amount: due.toString(),
    })
  })
})

describe('what real senders get wrong', () => {
  it('underpaid: stays open showing what arrived, and completes when the rest arrives', async () => {
    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    const option = await pushOption(paymentId)
    const buyer = await wallet()
    await payUrl(buyer, option.push.url, new BigNumber('5'))
    expect(await scan()).toEqual([{ kind: 'pending', received: 5_000_000n, due }])
    const open = await merchantPayment(merchantId, paymentId)
    expect(open.status).toBe('requires_action')
    expect(open.received).toEqual([{ asset: live.asset, value: '5000000' }])
    // In flight for reconciliation: the chain holds it, the ledger will once the payment completes.
    await reconcileSolanaChain(live.t.db, chain, undefined, { recheckMs: 10 })
    expect(await listDifferences(live.t.db, { open: true })).toEqual([])
    const rest = await payUrl(buyer, option.push.url, new BigNumber('7.5'))
    expect(await scan()).toEqual([{ kind: 'succeeded', received: due, excess: 0n }])
    expect(await paymentRow(live, paymentId)).toMatchObject({ status: 'succeeded', tx_id: rest })
    // No settlement destination: the partner's float holds it.
    await reconcileSolanaChain(live.t.db, chain, undefined, { recheckMs: 10 })
    expect(await listDifferences(live.t.db, { open: true })).toEqual([])
  })

  it('underpaid at expiry, push.underpaid "hold" (the default): what arrived becomes a deposit the operator sees', async () => {
    expect(live.t.app.config.push.underpaid).toBe('hold')
    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    const option = await pushOption(paymentId)
    const buyer = await wallet()
    await payUrl(buyer, option.push.url, new BigNumber('2'))
    expect(await scan()).toEqual([{ kind: 'pending', received: 2_000_000n, due }])
    const row = await paymentRow(live, paymentId)
    expect(await scan(new Date(row.expires_at.getTime() + 1000))).toEqual([])
    const deposits = await depositsOf(live.t.db, paymentId)
    expect(deposits).toMatchObject([
      {
        reason: 'underpaid',
        status: 'held',
        amount: '2000000',
        sender: `${live.caip2}:${buyer.publicKey.toBase58()}`,
      },
    ])
    expect(await ledgerBalance('deposits', live.t.partnerId)).toBeGreaterThanOrEqual(2_000_000n)
    const listed = await live.t.request({
      method: 'GET',
      url: '/v1/deposits?status=held',
      headers: { 'api-key': live.liveKey },
    })
    expect(listed.json.deposits).toContainEqual(
      expect.objectContaining({ depositId: deposits[0]!.id, reason: 'underpaid', status: 'held' }),
    )
  })

  it('underpaid at expiry, push.underpaid "refund": each sender gets its part back at once, through the ledger', async () => {
    const refunding = {
      ...live.t.app.config,
      push: { ...live.t.app.config.push, underpaid: 'refund' as const },
    }
    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    const option = await pushOption(paymentId)
    const first = await wallet()
    const second = await wallet()
    const startFirst = await live.balance(first.publicKey)
    const startSecond = await live.balance(second.publicKey)
    await payUrl(first, option.push.url, new BigNumber('2'))
    await payUrl(second, option.push.url, new BigNumber('3'))
    expect(await scanPushPayments(live.t.db, chain, refunding, tokenAmountFor)).toHaveLength(2)
    // Its time runs out (the refund job runs on the real clock).
    await live.t.db
      .updateTable('payments')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('id', '=', paymentId)
      .execute()
    // One transaction makes each deposit, books it and queues its refund: a second pass makes nothing.
    await scanPushPayments(live.t.db, chain, refunding, tokenAmountFor)
    await scanPushPayments(live.t.db, chain, refunding, tokenAmountFor)
    const made = await depositsOf(live.t.db, paymentId)
    expect(made.map((d) => [d.reason, d.status, d.sender, d.amount]).sort()).toEqual(
      [
        ['underpaid', 'refunding', `${live.caip2}:${first.publicKey.toBase58()}`, '2000000'],
        ['underpaid', 'refunding', `${live.caip2}:${second.publicKey.toBase58()}`, '3000000'],
      ].sort(),
    )
    const runner = live.startRunner()
    const deadline = Date.now() + 20_000
    const statuses = async () =>
      (
        await live.t.db.selectFrom('deposits').select('status').where('payment_id', '=', paymentId).execute()
      ).map((d) => d.status)
    while ((await statuses()).some((status) => status !== 'refunded')) {
      if (Date.now() > deadline) throw new Error('the underpaid deposits were not refunded')
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    await runner.stop()
    // Balances read from the chain: each sender has its part back.
    expect(await live.balance(first.publicKey)).toBe(startFirst)
    expect(await live.balance(second.publicKey)).toBe(startSecond)
    await expectEachSentBackOnce(live.t.db, paymentId, 2)
    await reconcileSolanaChain(live.t.db, chain, undefined, { recheckMs: 10 })
    expect(await listDifferences(live.t.db, { open: true })).toEqual([])
  })

  it('overpaid: succeeds, and by default the excess settles to the merchant', async () => {
    const settleTo = Keypair.generate().publicKey
    const merchantId = await live.createMerchant(settleTo)
    const { paymentId } = await live.createPayment(merchantId)
    const option = await pushOption(paymentId)
    await payUrl(await wallet(), option.push.url, new BigNumber('20'))
    expect(await scan()).toEqual([{ kind: 'succeeded', received: 20_000_000n, excess: 7_500_000n }])
    const runner = live.startRunner()
    await live.waitForPayment(paymentId, merchantId, (p) => p.settlement?.successful !== null)
    await runner.stop()
    expect(await live.balance(settleTo)).toBe(20_000_000n)
  })

  it('paid twice and paid late: each is a deposit, booked in the ledger, the chain agreeing', async () => {
    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    const option = await pushOption(paymentId)
    const buyer = await wallet()
    await payUrl(buyer, option.push.url)
    expect((await scan())[0]).toMatchObject({ kind: 'succeeded' })
    // Someone else (or the same wallet later) pays the same request again.
    const twice = await payUrl(await wallet(), option.push.url)
    expect(await scan()).toEqual([{ kind: 'deposit', depositId: expect.any(String), reason: 'duplicate' }])

    const late = await live.createPayment(merchantId)
    const lateOption = await pushOption(late.paymentId)
    const cancelled = await live.t.request({
      method: 'POST',
      url: `/v1/payments/${late.paymentId}/cancel`,
      headers: { 'api-key': live.liveKey, 'merchant-id': merchantId },
    })
    expect(cancelled.statusCode, cancelled.body).toBe(200)
    await payUrl(buyer, lateOption.push.url)
    expect(await scan()).toEqual([{ kind: 'deposit', depositId: expect.any(String), reason: 'late' }])

    const deposits = await live.t.db
      .selectFrom('deposits')
      .select(['reason', 'amount', 'tx_ids'])
      .where('payment_id', 'in', [paymentId, late.paymentId])
      .orderBy('created_at')
      .execute()
    expect(deposits).toEqual([
      { reason: 'duplicate', amount: due.toString(), tx_ids: [twice] },
      { reason: 'late', amount: due.toString(), tx_ids: [expect.any(String)] },
    ])
    await reconcileSolanaChain(live.t.db, chain, undefined, { recheckMs: 10 })
    expect(await listDifferences(live.t.db, { open: true })).toEqual([])
  })

  it('overpaid with push.overpaid "refund": succeeds with the price, and the excess goes back to the sender', async () => {
    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    const option = await pushOption(paymentId)
    const buyer = await wallet()
    const start = await live.balance(buyer.publicKey)
    await payUrl(buyer, option.push.url, new BigNumber('15'))
    const refunding = {
      ...live.t.app.config,
      push: { ...live.t.app.config.push, overpaid: 'refund' as const },
    }
    const [outcome] = await scanPushPayments(live.t.db, chain, refunding, tokenAmountFor)
    expect(outcome).toMatchObject({ kind: 'succeeded', received: 15_000_000n, excess: 2_500_000n })
    const row = await paymentRow(live, paymentId)
    expect(row.option_amount).toMatchObject({ value: due.toString() })
    const runner = live.startRunner()
    const deadline = Date.now() + 20_000
    while ((await depositOf(paymentId)).status !== 'refunded') {
      if (Date.now() > deadline) throw new Error('the excess was not refunded')
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    await runner.stop()
    expect(await live.balance(buyer.publicKey)).toBe(start - due)
    await reconcileSolanaChain(live.t.db, chain, undefined, { recheckMs: 10 })
    expect(await listDifferences(live.t.db, { open: true })).toEqual([])
  })
})

async function depositOf(paymentId: string) {
  return live.t.db
    .selectFrom('deposits')
    .selectAll()
    .where('payment_id', '=', paymentId)
    .executeTakeFirstOrThrow()
}

describe('deposits', () => {
  it('are listed to their partner, refunded to their sender or assigned to the float, through the ledger', async () => {
    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    const option = await pushOption(paymentId)
    await payUrl(await wallet(), option.push.url)
    await scan()
    const sender = await wallet()
    const senderStart = await live.balance(sender.publicKey)
    await payUrl(sender, option.push.url)
    const [duplicate] = await scan()
    expect(duplicate).toMatchObject({ kind: 'deposit', reason: 'duplicate' })
    const depositId = (duplicate as { depositId: string }).depositId

    const listed = await live.t.request({
      method: 'GET',
      url: '/v1/deposits?status=held',
      headers: { 'api-key': live.liveKey },
    })
    expect(listed.statusCode, listed.body).toBe(200)
    expect(listed.json.deposits).toContainEqual(
      expect.objectContaining({
        depositId,
        paymentId,
        merchantId,
        reason: 'duplicate',
        status: 'held',
        sender: `${live.caip2}:${sender.publicKey.toBase58()}`,
        amount: expect.objectContaining({ unit: `caip19/${live.asset}`, value: due.toString() }),
      }),
    )
    // Another partner's key sees none of them.
    const other = await live.t.createKey('live', undefined, await live.t.createPartner())
    const foreign = await live.t.request({
      method: 'GET',
      url: '/v1/deposits',
      headers: { 'api-key': other.apiKey },
    })
    expect(foreign.json.deposits).toEqual([])

    const held = await ledgerBalance('deposits', live.t.partnerId)
    await refundDeposit(live.t.db, {
      id: depositId,
      jobKind: depositRefundJobKind(live.caip2),
      now: new Date(),
    })
    await expect(assignDeposit(live.t.db, { id: depositId, now: new Date() })).rejects.toMatchObject({
      code: 'invalid_state',
    })
    const runner = live.startRunner()
    const deadline = Date.now() + 20_000
    const depositStatus = async () =>
      (
        await live.t.db
          .selectFrom('deposits')
          .select('status')
          .where('id', '=', depositId)
          .executeTakeFirstOrThrow()
      ).status
    while ((await depositStatus()) !== 'refunded') {
      if (Date.now() > deadline) throw new Error('the deposit was not refunded')
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    await runner.stop()
    expect(await live.balance(sender.publicKey)).toBe(senderStart)
    expect(await ledgerBalance('deposits', live.t.partnerId)).toBe(held - due)

    // A late payment's deposit kept as the partner's float.
    const late = await live.createPayment(merchantId)
    const lateOption = await pushOption(late.paymentId)
    await live.t.request({
      method: 'POST',
      url: `/v1/payments/${late.paymentId}/cancel`,
      headers: { 'api-key': live.liveKey, 'merchant-id': merchantId },
    })
    await payUrl(await wallet(), lateOption.push.url)
    const [lateOutcome] = await scan()
    const floatBefore = await ledgerBalance('float', live.t.partnerId)
    const assigned = await assignDeposit(live.t.db, {
      id: (lateOutcome as { depositId: string }).depositId,
      now: new Date(),
    })
    expect(assigned.status).toBe('assigned')
    expect(await ledgerBalance('float', live.t.partnerId)).toBe(floatBefore + due)
    await reconcileSolanaChain(live.t.db, chain, undefined, { recheckMs: 10 })
    expect(await listDifferences(live.t.db, { open: true })).toEqual([])
  })
})
