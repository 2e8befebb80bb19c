import { encodeFunctionData } from 'viem'
import { type JobHandler, RetryLater } from '../../jobs/runner.js'
import { loadPayment, settlePayment } from '../../payments/lifecycle.js'
import { fixSettlementAmount } from '../../refunds/settlement.js'
import { eip3009Abi } from './abi.js'
import type { SettlePayload } from './outcome.js'
import { chainOf, type JobSettings, relayerOf } from './relay.js'
import { retryWhileInFlight, sendAndWait, sendOnce, setTxStatus } from './transactions.js'
import { estimateExecutorTransfer, hasTransfer } from './transfers.js'

/**
 * After a gasless payment: transfers the collected amount (less the configured fee) from the collection
 * address to the merchant's settlement destination, exactly once (sendOnce), and records the transaction
 * as the payment's settlement. A reverted settlement is retried with a new transaction; giving up leaves
 * the settlement pending (the funds stay collected) for an operator.
 */
export function settleJob(settings: JobSettings): JobHandler {
  return {
    maxAttempts: 10,
    async run(job, ctx) {
      const payload = job.payload as SettlePayload
      const chain = chainOf(settings, payload.chain)
      const asset = chain.asset(payload.asset)
      if (!asset) throw new Error(`Asset ${payload.asset} is not configured on ${payload.chain}.`)
      const payment = await loadPayment(ctx.db, job.payment_id)
      if (payment.settlement_status !== 'pending') return { skipped: payment.settlement_status }
      // Less the refunds already paid from the collected funds; fixed before the first signature.
      const amount = await fixSettlementAmount(ctx.db, job.payment_id, BigInt(payload.amount), ctx.now())
      if (amount === 0n) {
        await settlePayment(ctx.db, { paymentId: job.payment_id, txId: null, assetId: asset.id, value: 0n })
        return { refunded: true }
      }
      const args = [payload.destination, amount] as const
      const relayer = relayerOf(settings, chain)
      const send = async () => {
        const { hash } = await sendOnce({
          db: ctx.db,
          chain,
          sender: relayer.sender,
          paymentId: job.payment_id,
          purpose: 'settle',
          to: asset.token,
          data: encodeFunctionData({ abi: eip3009Abi, functionName: 'transfer', args }),
          estimateGas: () => estimateExecutorTransfer(chain, asset.token, args, 'settlement'),
        })
        return hash
      }
      const release = await relayer.sender.slot()
      const { hash, receipt } = await sendAndWait(
        relayer.watcher,
        { paymentId: job.payment_id, purpose: 'settle' },
        send,
        { timeoutMs: settings.receiptTimeoutMs, signal: ctx.signal, idle: ctx.idle },
      )
        .catch(async (error: unknown) => {
          throw await retryWhileInFlight(ctx.db, job.payment_id, 'settle', error)
        })
        .finally(release)
      if (!receipt) throw new RetryLater(`Settlement transaction ${hash} has no receipt yet.`)
      const expected = {
        token: asset.token,
        from: chain.executor.address,
        to: payload.destination,
        value: args[1],
      }
      if (!hasTransfer(receipt, expected)) {
        await setTxStatus(ctx.db, hash, 'reverted')
        throw new Error(
          `Settlement transaction ${hash} did not transfer the amount; retrying with a new one.`,
        )
      }
      await setTxStatus(ctx.db, hash, 'succeeded')
      await settlePayment(ctx.db, {
        paymentId: job.payment_id,
        txId: hash,
        assetId: asset.id,
        value: amount,
      })
      ctx.log.info({ paymentId: job.payment_id, hash, amount: String(amount) }, 'Settled live EVM payment')
      return { hash }
    },
    async onGiveUp(job, error, ctx) {
      ctx.log.error(
        { paymentId: job.payment_id, error: String(error) },
        'Settlement gave up; the funds stay at the collection address and the settlement stays pending',
      )
    },
  }
}
