import { createTransfer, parseURL, type TransferRequestURL } from '@solana/pay'
import { type Keypair, LAMPORTS_PER_SOL } from '@solana/web3.js'
import BigNumber from 'bignumber.js'
import type { KyselyPlugin } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SolanaChain } from '../../src/server/chains/solana/chain.js'
import { scanSolanaTopUps } from '../../src/server/chains/solana/ledger.js'
import { scanPushPayments } from '../../src/server/chains/solana/push.js'
import { tokenAmountFor } from '../../src/server/gateway/quote.js'
import { holderOf } from '../../src/server/ledger/entries.js'
import type { Db } from '../../src/server/store/db.js'
import { airdrop, confirmSignature } from '../solana/index.js'
import { paymentRow, type SolanaLive, startSolanaLive } from './live.js'

/**
 * What the push scan and the top-up scan cost on the chain and in the database (docs/push-payments.md):
 * the collection account is listed once per pass, whatever the number of payments watched, and the top-up
 * scan asks the database once which of its transactions carry a payment's reference key.
 */
let live: SolanaLive
let chain: SolanaChain
beforeAll(async () => {
  live = await startSolanaLive()
  chain = live.t.app.liveChains.solana[0]!
})
afterAll(() => live?.close())

const due = 12_500_000n

async function payPushOption(buyer: Keypair, paymentId: string): Promise<string> {
  const options = await live.gateway(paymentId, 'options', { accounts: [] })
  const push = options.json.options.find((o: { source?: string }) => o.source === 'push')
  const request = parseURL(push.push.url) as TransferRequestURL
  const { connection } = live.validator
  const transaction = await createTransfer(connection, buyer.publicKey, {
    recipient: request.recipient,
    amount: request.amount!,
    splToken: request.splToken!,
    reference: request.reference!,
  })
  transaction.sign(buyer)
  const signature = await connection.sendRawTransaction(transaction.serialize())
  await confirmSignature(connection, signature)
  return signature
}

async function newWallet(): Promise<Keypair> {
  const buyer = await live.newBuyer(100_000_000n)
  await airdrop(live.validator.connection, buyer.publicKey, LAMPORTS_PER_SOL)
  return buyer
}

/** The app's database, counting the statements that read push_references. */
function countingReferenceReads(db: Db): { db: Db; reads: () => number } {
  let reads = 0
  const plugin: KyselyPlugin = {
    transformQuery(args) {
      const text = JSON.stringify(args.node, (_, v) => (typeof v === 'bigint' ? String(v) : v))
      if (text.includes('push_references')) reads++
      return args.node
    },
    transformResult: async (args) => args.result,
  }
  return { db: db.withPlugin(plugin) as Db, reads: () => reads }
}

describe('push scan cost', () => {
  it('lists the collection account once per pass, not each watched reference', async () => {
    const merchantId = await live.createMerchant()
    const payments: string[] = []
    for (let i = 0; i < 6; i++) {
      const { paymentId } = await live.createPayment(merchantId)
      await live.gateway(paymentId, 'options', { accounts: [] })
      payments.push(paymentId)
    }
    const scan = () => scanPushPayments(live.t.db, chain, live.t.app.config, tokenAmountFor)
    // The process's first pass has no slot to start from: it lists each watched reference, once.
    await scan()

    const [first, second] = [await newWallet(), await newWallet()]
    const paid = [await payPushOption(first, payments[1]!), await payPushOption(second, payments[4]!)]
    const listings = live.proxy.calls('getSignaturesForAddress')
    const reads = live.proxy.calls('getTransaction')
    const outcomes = await scan()
    expect(outcomes).toEqual([
      { kind: 'succeeded', received: due, excess: 0n },
      { kind: 'succeeded', received: due, excess: 0n },
    ])
    // One push asset: one listing, one read per new transaction, whatever the number of payments.
    expect(live.proxy.calls('getSignaturesForAddress') - listings).toBe(1)
    expect(live.proxy.calls('getTransaction') - reads).toBe(2)
    expect((await paymentRow(live, payments[1]!)).tx_id).toBe(paid[0])
    expect((await paymentRow(live, payments[4]!)).tx_id).toBe(paid[1])

    // Nothing new: one listing, nothing read.
    const again = live.proxy.calls('getTransaction')
    expect(await scan()).toEqual([])
    expect(live.proxy.calls('getSignaturesForAddress') - listings).toBe(2)
    expect(live.proxy.calls('getTransaction')).toBe(again)
  })

  it('the top-up scan reads the reference keys once per pass, however many transactions it reads', async () => {
    const merchantId = await live.createMerchant()
    const asset = chain.assets[0]!
    const holder = holderOf(live.caip2, live.service.publicKey.toBase58())
    // Everything up to now scanned: only what follows is read below.
    await scanSolanaTopUps(live.t.db, chain, asset)
    for (let i = 0; i < 3; i++) {
      const { paymentId } = await live.createPayment(merchantId)
      await payPushOption(await newWallet(), paymentId)
    }
    // Two top-ups: the operator mints, and someone sends tokens without any reference.
    await live.mintTo(live.service.publicKey, 1_000n)
    const sender = await newWallet()
    const { connection } = live.validator
    const plain = await createTransfer(connection, sender.publicKey, {
      recipient: live.service.publicKey,
      amount: new BigNumber('0.002'),
      splToken: live.mint,
    })
    plain.sign(sender)
    await confirmSignature(connection, await connection.sendRawTransaction(plain.serialize()))
    const counting = countingReferenceReads(live.t.db)
    const reads = live.proxy.calls('getTransaction')
    await scanSolanaTopUps(counting.db, chain, asset)
    // Three pushed transfers, the mint and its idempotent account creation, the plain transfer.
    expect(live.proxy.calls('getTransaction') - reads).toBe(6)
    expect(counting.reads()).toBe(1)
    const credited = await live.t.db
      .selectFrom('ledger_entries')
      .select('amount')
      .where('holder', '=', holder)
      .where('flow', '=', 'topup')
      .orderBy('id')
      .execute()
    // The pushed transfers are payments, never top-ups.
    expect(credited.map((t) => t.amount)).toEqual(['1000', '2000'])
  })
})
