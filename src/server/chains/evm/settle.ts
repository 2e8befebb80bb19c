import { encodeFunctionData, type Hash } from 'viem'
import { type JobHandler, type JobRunContext, RetryLater } from '../../jobs/runner.js'
import { holderOf } from '../../ledger/entries.js'
import { assertSendsAllowed } from '../../ledger/reconcile.js'
import { loadPayment } from '../../payments/lifecycle.js'
import { closeSettlementBatch, finishSettlementBatch } from '../../payments/settlementBatches.js'
import { addSettlementItem, type SettlementBatchPayload } from '../../payments/settlementItems.js'
import { inTransaction } from '../../store/db.js'
import type { JobRow } from '../../store/schema.js'
import { eip3009Abi } from './abi.js'
import { evmJobKinds, type SettlePayload } from './outcome.js'
import { chainOf, type JobSettings, relayerOf } from './relay.js'
import { retryWhileInFlight, sendAndWait, sendOnce, setTxStatus } from './transactions.js'
import { estimateExecutorTransfer, hasTransfer } from './transfers.js'

/**
 * A settlement batch, once its interval is over: closes it (what it pays is fixed, less refunds), then
 * transfers the sum from the collection address to the merchant's settlement destination in ONE ERC-20
 * transfer, exactly once (sendOnce, under the batch's first payment), and records that transaction as
 * every item's settlement. A reverted transfer is retried with a new transaction; giving up leaves the
 * settlements pending (the funds stay collected) for an operator.
 */
export function settleJob(settings: JobSettings): JobHandler {
  return {
    maxAttempts: 10,
    async run(job, ctx) {
      const batchId = await batchOf(job, ctx)
      if (batchId === undefined) return { joined: 'an open batch' }
      const batch = await closeSettlementBatch(ctx.db, batchId, {
        assetId: (caip2, asset) => chainOf(settings, caip2).asset(asset)?.id ?? asset,
        now: ctx.now(),
      })
      if (batch.status === 'succeeded') return { batchId, settled: batch.txId ?? 'nothing left to send' }
      const chain = chainOf(settings, batch.chain)
      const asset = chain.asset(batch.asset)
      if (!asset) throw new Error(`Asset ${batch.asset} is not configured on ${batch.chain}.`)
      const destination = batch.destination as `0x${string}`
      const args = [destination, batch.amount] as const
      const relayer = relayerOf(settings, chain)
      const send = async (): Promise<Hash> => {
        const { hash } = await sendOnce({
          db: ctx.db,
          chain,
          sender: relayer.sender,
          paymentId: batch.paymentId,
          purpose: 'settle',
          fence: ctx.fence,
          to: asset.token,
          data: encodeFunctionData({ abi: eip3009Abi, functionName: 'transfer', args }),
          estimateGas: async () => {
            // A new transaction only: none is signed while reconciliation holds the collection address.
            await assertSendsAllowed(ctx.db, holderOf(chain.caip2, chain.executor.address))
            return estimateExecutorTransfer(chain, asset.token, args, 'settlement')
          },
        })
        return hash
      }
      const release = await relayer.sender.slot()
      const { hash, receipt } = await sendAndWait(
        relayer.watcher,
        { paymentId: batch.paymentId, purpose: 'settle' },
        send,
        { timeoutMs: settings.receiptTimeoutMs, signal: ctx.signal, idle: ctx.idle },
      )
        .catch(async (error: unknown) => {
          throw await retryWhileInFlight(ctx.db, batch.paymentId, 'settle', error)
        })
        .finally(release)
      if (!receipt) throw new RetryLater(`Settlement transaction ${hash} has no receipt yet.`)
      const expected = {
        token: asset.token,
        from: chain.executor.address,
        to: destination,
        value: batch.amount,
      }
      if (!hasTransfer(receipt, expected)) {
        await setTxStatus(ctx.db, hash, 'reverted')
        throw new Error(
          `Settlement transaction ${hash} did not transfer the amount; retrying with a new one.`,
        )
      }
      await setTxStatus(ctx.db, hash, 'succeeded')
      await finishSettlementBatch(ctx.db, batch, { txId: hash, assetId: asset.id, now: ctx.now() })
      ctx.log.info(
        { batchId, hash, amount: String(batch.amount), payments: batch.paymentIds.length },
        'Settled a batch of live EVM payments',
      )
      return { batchId, hash, payments: batch.paymentIds.length }
    },
    async onGiveUp(job, error, ctx) {
      ctx.log.error(
        { paymentId: job.payment_id, error: String(error) },
        'Settlement gave up; the funds stay at the collection address and the settlements stay pending',
      )
    },
  }
}

/**
 * The batch a settlement job pays. A job queued before batches (one payment's whole settlement in its
 * payload) adds its payment as an item first, once: it pays the batch it opened at once, or leaves its
 * item to the open batch it joined (undefined).
 */
async function batchOf(job: JobRow, ctx: JobRunContext): Promise<string | undefined> {
  const payload = job.payload as SettlementBatchPayload | SettlePayload
  if ('batchId' in payload) return payload.batchId
  return inTransaction(ctx.db, async (trx) => {
    const payment = await loadPayment(trx, job.payment_id)
    const item = await trx
      .selectFrom('settlement_items')
      .select('batch_id')
      .where('payment_id', '=', job.payment_id)
      .executeTakeFirst()
    const batch = await trx
      .selectFrom('settlement_batches')
      .select('id')
      .where('payment_id', '=', job.payment_id)
      .executeTakeFirst()
    if (batch) return String(batch.id)
    if (item || payment.settlement_status !== 'pending') return undefined
    const added = await addSettlementItem(trx, {
      paymentId: job.payment_id,
      chain: payload.chain,
      asset: payload.asset,
      destination: payload.destination,
      amount: BigInt(payload.amount),
      intervalMs: 0,
      jobKind: evmJobKinds.settle,
      now: ctx.now(),
    })
    return added.opened ? added.batchId : undefined
  })
}
