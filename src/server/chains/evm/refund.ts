import { encodeFunctionData, getAddress } from 'viem'
import { parseAccountId } from '../../../caip/caip.js'
import { type JobHandler, RetryLater } from '../../jobs/runner.js'
import { holderOf } from '../../ledger/entries.js'
import { assertSendsAllowed } from '../../ledger/reconcile.js'
import { reserveRefund } from '../../ledger/refunds.js'
import { failRefund, loadRefund, noteRefundShortfall, succeedRefund } from '../../refunds/finish.js'
import { eip3009Abi } from './abi.js'
import { scanEvmTopUps } from './ledger.js'
import { chainOf, type JobSettings, relayerOf } from './relay.js'
import { sendOnce, sendStepAndWait, setTxStatus } from './transactions.js'
import { estimateExecutorTransfer, hasTransfer } from './transfers.js'

/** The ledger holds less for the refund than it sends: wait for the float. */
class FloatShort extends RetryLater {}

/**
 * A live EVM refund: an ERC-20 `transfer` of the refund's amount of the paid asset from the collection
 * address (the executor) to the refund's destination, through the same sender and watcher as relays and
 * settlements (recorded before it is sent, one nonce, found again after a crash, fee-bumped by the
 * sweep). Before a new transaction is signed the ledger reserves its amount (ledger/refunds.ts): from the
 * payment's collected funds, or from the float; short, the refund stays pending with
 * `insufficient_funds` and is tried again until funded. Nor is one signed while reconciliation holds
 * the collection address. It succeeds only on a mined receipt whose
 * Transfer log moves exactly that amount to the destination.
 */
export function refundJob(settings: JobSettings): JobHandler {
  return {
    maxAttempts: 10,
    retryDelayMs: (attempts) => Math.min(10_000, 250 * 2 ** attempts),
    async run(job, ctx) {
      if (!job.refund_id) throw new Error(`Job ${job.id} has no refund.`)
      const refund = await loadRefund(ctx.db, job.refund_id)
      if (refund.status !== 'pending') return { skipped: refund.status }
      if (!refund.asset || !refund.asset_value || !refund.destination)
        throw new Error(`Refund ${refund.id} has no asset, amount or destination to send.`)
      const destination = parseAccountId(refund.destination)
      const chain = chainOf(settings, destination.chainId)
      const asset = chain.asset(refund.asset)
      if (!asset) throw new Error(`Asset ${refund.asset} is not configured on ${chain.caip2}.`)
      const args = [getAddress(destination.address), BigInt(refund.asset_value)] as const
      const relayer = relayerOf(settings, chain)
      const step = { paymentId: refund.payment_id, purpose: 'refund' as const, refundId: refund.id }
      const send = async () => {
        const { hash } = await sendOnce({
          db: ctx.db,
          chain,
          sender: relayer.sender,
          ...step,
          fence: ctx.fence,
          to: asset.token,
          data: encodeFunctionData({ abi: eip3009Abi, functionName: 'transfer', args }),
          estimateGas: async () => {
            // Only a new transaction gets here: the ledger decides whether the service holds the
            // amount for this refund, never the address's whole balance (other payments' money).
            const holder = holderOf(chain.caip2, chain.executor.address)
            await assertSendsAllowed(ctx.db, holder)
            const reserve = () =>
              reserveRefund(
                ctx.db,
                { ...refund, asset: asset.id, asset_value: refund.asset_value! },
                holder,
                ctx.now(),
              )
            let reserved = await reserve()
            if (reserved === 'short') {
              await scanEvmTopUps(ctx.db, chain, asset)
              reserved = await reserve()
            }
            if (reserved === 'short') {
              await noteRefundShortfall(ctx.db, refund.id, true, ctx.now())
              throw new FloatShort(
                `The ledger holds less than ${args[1]} of ${asset.id} for refund ${refund.id} in its partner's float ` +
                  'or the unallocated top-ups; it waits until the float is funded.',
              )
            }
            return estimateExecutorTransfer(chain, asset.token, args, 'refund')
          },
        })
        return hash
      }
      const { hash, receipt } = await sendStepAndWait(ctx.db, relayer.sender, relayer.watcher, step, send, {
        timeoutMs: settings.receiptTimeoutMs,
        signal: ctx.signal,
        idle: ctx.idle,
      })
      const expected = { token: asset.token, from: chain.executor.address, to: args[0], value: args[1] }
      if (!hasTransfer(receipt, expected)) {
        await setTxStatus(ctx.db, hash, 'reverted')
        throw new Error(`Refund transaction ${hash} did not transfer the amount; retrying with a new one.`)
      }
      await setTxStatus(ctx.db, hash, 'succeeded')
      await succeedRefund(ctx.db, { refundId: refund.id, txId: hash, now: ctx.now() })
      ctx.log.info({ refundId: refund.id, hash, amount: String(args[1]) }, 'Refunded live EVM payment')
      return { hash }
    },
    async onGiveUp(job, error, ctx) {
      // Only errors with nothing in flight count toward giving up (retryWhileInFlight): nothing was sent.
      ctx.log.error({ refundId: job.refund_id, error: String(error) }, 'Refund gave up; nothing was sent')
      if (job.refund_id)
        await failRefund(ctx.db, { refundId: job.refund_id, failureCode: 'transfer_failed', now: ctx.now() })
    },
  }
}
