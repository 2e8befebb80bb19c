import type { SimulateBody, StatusResponse } from '../../contract/payment.js'
import type { ServerConfig } from '../config.js'
import { fail } from '../errors.js'
import { markCancelled } from '../payments/cancel.js'
import { transitionPayment } from '../payments/lifecycle.js'
import { succeedTestPayment } from '../payments/settlements.js'
import { statusJson } from '../payments/views.js'
import { type Db, inTransaction } from '../store/db.js'
import type { PaymentRow } from '../store/schema.js'

/**
 * The sandbox's forced outcomes. `succeeded` and `failed` pass through `processing` like a real payment
 * (from `requires_action` or `processing`); `expired` and `cancelled` only leave `requires_action`.
 * A final payment refuses with `409 invalid_state`.
 */
export async function simulateOutcome(input: {
  db: Db
  config: ServerConfig
  payment: PaymentRow
  outcome: SimulateBody['outcome']
  now: Date
}): Promise<StatusResponse> {
  const { db, payment, outcome, now } = input
  if (payment.mode !== 'test') fail('not_sandbox_api_key', 'Outcomes can only be simulated in test mode.')
  const row = await inTransaction(db, async (trx) => {
    const toProcessing = async () => {
      if (payment.status !== 'requires_action') return
      await transitionPayment(trx, { paymentId: payment.id, from: 'requires_action', to: 'processing', now })
    }
    switch (outcome) {
      case 'succeeded': {
        await toProcessing()
        const paid = payment.option_amount ?? { unit: payment.amount_unit, value: payment.amount_value }
        const asset = paid.unit.startsWith('caip19/') ? paid.unit.slice(7) : undefined
        return succeedTestPayment(trx, { payment, asset, value: paid.value, now })
      }
      case 'failed':
        await toProcessing()
        return transitionPayment(trx, {
          paymentId: payment.id,
          from: 'processing',
          to: 'failed',
          set: { failure_code: 'declined_user' },
          now,
        })
      case 'expired':
        return transitionPayment(trx, { paymentId: payment.id, from: 'requires_action', to: 'expired', now })
      case 'cancelled':
        return markCancelled(trx, { paymentId: payment.id, reason: 'cancelled_by_merchant', now })
    }
  })
  return statusJson(row)
}
