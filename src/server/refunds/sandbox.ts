import type { RefundSimulateBody } from '../../contract/refund.js'
import { fail } from '../errors.js'
import type { JobHandler } from '../jobs/runner.js'
import type { Db } from '../store/db.js'
import { failRefund, loadRefund, succeedRefund } from './finish.js'
import type { RefundRow } from './schema.js'

/** Test mode's transfer: nothing moves; the refund succeeds with `test:<refundId>`. */
export function testRefundJob(): JobHandler {
  return {
    async run(job, ctx) {
      if (!job.refund_id) throw new Error(`Job ${job.id} has no refund.`)
      const refund = await loadRefund(ctx.db, job.refund_id)
      if (refund.status !== 'pending') return { skipped: refund.status }
      await succeedRefund(ctx.db, { refundId: refund.id, txId: testRefundTxId(refund.id), now: ctx.now() })
      return { txId: testRefundTxId(refund.id) }
    },
  }
}

export const testRefundTxId = (refundId: string) => `test:${refundId}`

/**
 * The sandbox's forced outcome of a pending test refund: `succeeded` as the simulated transfer would
 * make it, `failed` as a transfer that could not be made. A final refund refuses with `409 invalid_state`.
 */
export async function simulateRefund(
  db: Db,
  refund: RefundRow,
  outcome: RefundSimulateBody['outcome'],
  now: Date,
): Promise<RefundRow> {
  if (refund.mode !== 'test')
    fail('not_sandbox_api_key', 'Refund outcomes can only be simulated in test mode.')
  const moved =
    outcome === 'succeeded'
      ? await succeedRefund(db, { refundId: refund.id, txId: testRefundTxId(refund.id), now })
      : await failRefund(db, { refundId: refund.id, failureCode: 'transfer_failed', now })
  if (moved) return moved
  const current = await loadRefund(db, refund.id)
  fail('invalid_state', `The refund is ${current.status}; it cannot become ${outcome}.`, {
    refundId: refund.id,
    status: current.status,
  })
}
