import { type JobHandler, RetryLater } from '../../jobs/runner.js'
import { loadPayment, succeedPayment } from '../../payments/lifecycle.js'
import { failPayment, type VerifyTransferPayload } from './outcome.js'
import { chainOf, type JobSettings } from './relay.js'
import { isKnownTransaction, waitForReceipt } from './transactions.js'
import { hasTransfer, same } from './transfers.js'

export interface VerifyTransferSettings extends JobSettings {
  /** A hash the node has never seen fails the payment after this long (ms since confirm). */
  missingTransactionGraceMs: number
}

/**
 * Direct payments: the buyer broadcast an ERC-20 transfer itself; the payment succeeds only on a mined,
 * successful transaction to the token that moved exactly the amount from the buyer to the merchant's
 * destination, mined after the quote. Anything else (another token, another transfer, a made-up hash)
 * fails the payment; nothing is sent by the service, so there is nothing to do twice.
 */
export function verifyTransferJob(settings: VerifyTransferSettings): JobHandler {
  return {
    async run(job, ctx) {
      const payload = job.payload as VerifyTransferPayload
      const chain = chainOf(settings, payload.chain)
      const payment = await loadPayment(ctx.db, job.payment_id)
      if (payment.status !== 'processing') return { skipped: payment.status }
      const fail = (code: Parameters<typeof failPayment>[2], reason: string) =>
        failPayment(ctx, job.payment_id, code, reason)

      const receipt = await waitForReceipt(chain, payload.hash, {
        timeoutMs: settings.receiptTimeoutMs,
        signal: ctx.signal,
      })
      if (!receipt) {
        const known = await isKnownTransaction(chain, payload.hash)
        if (!known && Date.now() - job.created_at.getTime() > settings.missingTransactionGraceMs) {
          return fail('transaction_not_found', `Transaction ${payload.hash} is unknown to the node.`)
        }
        throw new RetryLater(`Transaction ${payload.hash} is not mined yet.`)
      }
      const asset = chain.asset(payload.asset)
      if (receipt.status !== 'success')
        return fail('transaction_reverted', `Transaction ${payload.hash} reverted.`)
      if (!asset || !same(receipt.to, asset.token)) {
        return fail(
          'wrong_contract',
          `Transaction ${payload.hash} called ${receipt.to}, not the token ${asset?.token}.`,
        )
      }
      const expected = {
        token: asset.token,
        from: payload.from,
        to: payload.to,
        value: BigInt(payload.value),
      }
      if (!hasTransfer(receipt, expected)) {
        return fail(
          'transfer_missing',
          `Transaction ${payload.hash} has no Transfer of ${payload.value} from ${payload.from} to ${payload.to}.`,
        )
      }
      const block = await chain.publicClient.getBlock({ blockNumber: receipt.blockNumber })
      if (block.timestamp < BigInt(payload.notBefore)) {
        return fail('transfer_predates_quote', `Transaction ${payload.hash} was mined before the quote.`)
      }
      await succeedPayment(ctx.db, { paymentId: job.payment_id, txId: receipt.transactionHash })
      ctx.log.info({ paymentId: job.payment_id, hash: receipt.transactionHash }, 'Live EVM payment succeeded')
      return { hash: receipt.transactionHash }
    },
    async onGiveUp(job, error, ctx) {
      await failPayment(
        ctx,
        job.payment_id,
        'chain_unavailable',
        `Cannot check the transfer: ${String(error)}`,
      )
    },
  }
}
