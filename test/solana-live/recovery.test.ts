import { Keypair } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { solanaJobKinds } from '../../src/server/chains/solana/index.js'
import {
  confirmedPayment,
  onChain as onChainIn,
  paymentRow as paymentRowIn,
  type SolanaLive,
  startSolanaLive,
  until,
} from './live.js'

const amount = 12_500_000n

let live: SolanaLive

beforeAll(async () => {
  live = await startSolanaLive()
})

afterAll(async () => {
  await live?.close()
})

const onChain = (signature: string) => onChainIn(live, signature)
const paymentRow = (paymentId: string) => paymentRowIn(live, paymentId)

/**
 * A confirmed payment whose broadcast the node refused (so it never reached the chain), with the runner
 * that tried it stopped: the transaction is recorded, and the payment waits in `processing`. `executed`
 * is the cluster's count before that broadcast, and the node still refuses sends.
 */
async function firstSendRefused(buyer: Keypair, merchantId: string) {
  const confirmed = await confirmedPayment(live, buyer, merchantId)
  const executed = live.executed()
  live.proxy.fail('sendTransaction', { code: -32005, message: 'Node is unhealthy' })
  const sends = live.proxy.calls('sendTransaction')
  const first = live.startRunner()
  await until(() => live.proxy.calls('sendTransaction') > sends, 'the failed send')
  await first.stop()
  expect(await onChain(confirmed.signature)).toBe(false)
  expect((await paymentRow(confirmed.paymentId)).status).toBe('processing')
  return { ...confirmed, executed }
}

describe('broadcast job across restarts', () => {
  it('a runner restarted between broadcast and confirmation finishes the payment once', async () => {
    const buyer = await live.newBuyer()
    const merchantId = await live.createMerchant()
    const before = await live.balance(buyer.publicKey)
    const { paymentId, signature } = await confirmedPayment(live, buyer, merchantId)
    const sends = live.proxy.calls('sendTransaction')
    const executed = live.executed()

    // The node stops answering status queries: the first runner sends, then waits in vain.
    live.proxy.hold('getSignatureStatuses')
    const first = live.startRunner()
    await until(() => live.proxy.calls('sendTransaction') === sends + 1, 'the broadcast')
    await until(() => onChain(signature), 'the transaction to land')
    await until(() => live.proxy.held() > 0, 'the status query to hang')
    const stopping = first.stop()
    live.proxy.cutHeld()
    await stopping
    expect((await paymentRow(paymentId)).status).toBe('processing')
    expect(await live.balance(buyer.publicKey)).toBe(before - amount)

    live.proxy.release('getSignatureStatuses')
    const second = live.startRunner()
    const paid = await live.waitForPayment(paymentId, merchantId, (p) => p.status !== 'processing')
    await second.stop()
    expect(paid.status).toBe('succeeded')
    expect(paid.info.txId).toBe(signature)
    // Found on chain by its signature: not sent again.
    expect(live.proxy.calls('sendTransaction')).toBe(sends + 1)
    expect(live.executed()).toBe(executed + 1)
    expect(await live.balance(buyer.publicKey)).toBe(before - amount)
  })

  it('sends the recorded bytes again when the first send never reached the chain', async () => {
    const buyer = await live.newBuyer()
    const merchantId = await live.createMerchant()
    const before = await live.balance(buyer.publicKey)
    const { paymentId, signature, executed } = await firstSendRefused(buyer, merchantId)

    live.proxy.fail('sendTransaction', null)
    const second = live.startRunner()
    const paid = await live.waitForPayment(paymentId, merchantId, (p) => p.status !== 'processing')
    await second.stop()
    expect(paid.status).toBe('succeeded')
    expect(paid.info.txId).toBe(signature)
    expect(live.executed()).toBe(executed + 1)
    expect(await live.balance(buyer.publicKey)).toBe(before - amount)
  })

  it('fails the payment when the unsent transaction can no longer land, and moves nothing', async () => {
    const buyer = await live.newBuyer()
    const merchantId = await live.createMerchant()
    const before = await live.balance(buyer.publicKey)
    const { paymentId, signature, executed } = await firstSendRefused(buyer, merchantId)
    await live.validator.expireBlockhash()
    live.proxy.fail('sendTransaction', null)

    const resent = live.proxy.calls('sendTransaction')
    const second = live.startRunner()
    const ended = await live.waitForPayment(paymentId, merchantId, (p) => p.status !== 'processing')
    await second.stop()
    expect(ended.status).toBe('failed')
    expect(ended.info).toBeNull()
    // Its blockhash had expired: not sent again, and nothing landed.
    expect(live.proxy.calls('sendTransaction')).toBe(resent)
    expect(await onChain(signature)).toBe(false)
    expect(live.executed()).toBe(executed)
    expect(await live.balance(buyer.publicKey)).toBe(before)
    const recorded = await live.t.db
      .selectFrom('solana_transactions')
      .select(['state', 'error'])
      .where('signature', '=', signature)
      .executeTakeFirstOrThrow()
    expect(recorded.state).toBe('dropped')
  })
})

describe('settlement job across restarts', () => {
  it('settles exactly once when the runner is restarted while the transfer confirms', async () => {
    const buyer = await live.newBuyer()
    const merchantOwner = Keypair.generate()
    const merchantId = await live.createMerchant(merchantOwner.publicKey)
    const { paymentId } = await confirmedPayment(live, buyer, merchantId)

    const payer = live.startRunner({ kinds: [solanaJobKinds.broadcast] })
    await live.waitForPayment(paymentId, merchantId, (p) => p.status === 'succeeded')
    await payer.stop()
    const pending = await live.waitForPayment(paymentId, merchantId, () => true)
    expect(pending.settlement).toEqual({ successful: null })

    const sends = live.proxy.calls('sendTransaction')
    const executed = live.executed()
    live.proxy.hold('getSignatureStatuses')
    const first = live.startRunner({ kinds: [solanaJobKinds.settle] })
    await until(() => live.proxy.calls('sendTransaction') === sends + 1, 'the settlement broadcast')
    await until(
      async () => (await live.balance(merchantOwner.publicKey)) === amount,
      'the settlement to land',
    )
    await until(() => live.proxy.held() > 0, 'the status query to hang')
    const stopping = first.stop()
    live.proxy.cutHeld()
    await stopping
    expect((await live.waitForPayment(paymentId, merchantId, () => true)).settlement.successful).toBeNull()

    live.proxy.release('getSignatureStatuses')
    const second = live.startRunner({ kinds: [solanaJobKinds.settle] })
    const settled = await live.waitForPayment(paymentId, merchantId, (p) => p.settlement?.successful != null)
    await second.stop()
    const recorded = await live.t.db
      .selectFrom('solana_transactions')
      .selectAll()
      .where('payment_id', '=', paymentId)
      .where('purpose', '=', 'settlement')
      .execute()
    expect(recorded).toHaveLength(1)
    expect(settled.settlement.successful.txId).toBe(recorded[0]!.signature)
    expect(live.proxy.calls('sendTransaction')).toBe(sends + 1)
    expect(live.executed()).toBe(executed + 1)
    expect(await live.balance(merchantOwner.publicKey)).toBe(amount)
  })
})

describe('settlement batches', () => {
  it('payments that succeed together settle in ONE transfer of their sum, recorded as each payment’s settlement', async () => {
    const merchantOwner = Keypair.generate()
    const merchantId = await live.createMerchant(merchantOwner.publicKey)
    const buyers = [await live.newBuyer(), await live.newBuyer(), await live.newBuyer()]
    const sends = live.proxy.calls('sendTransaction')
    const executed = live.executed()
    const payments = []
    for (const buyer of buyers) payments.push(await confirmedPayment(live, buyer, merchantId))
    // Sent by the confirms themselves, as soon as each committed: no job runner runs yet.
    await until(() => live.proxy.calls('sendTransaction') === sends + 3, 'the confirms’ own sends')

    const runner = live.startRunner()
    const settled = await Promise.all(
      payments.map((p) =>
        live.waitForPayment(p.paymentId, merchantId, (view) => view.settlement?.successful != null),
      ),
    )
    await runner.stop()
    const txIds = new Set(settled.map((view) => view.settlement.successful.txId))
    expect(txIds.size).toBe(1)
    expect(await live.balance(merchantOwner.publicKey)).toBe(3n * amount)
    const recorded = await live.t.db
      .selectFrom('solana_transactions')
      .select(['signature', 'payment_id', 'state'])
      .where(
        'payment_id',
        'in',
        payments.map((p) => p.paymentId),
      )
      .where('purpose', '=', 'settlement')
      .execute()
    expect(recorded).toEqual([expect.objectContaining({ signature: [...txIds][0], state: 'landed' })])
    // Three payments (sent at their confirms) and one settlement, each sent once.
    expect(live.proxy.calls('sendTransaction')).toBe(sends + 4)
    expect(live.executed()).toBe(executed + 4)
  })
})
