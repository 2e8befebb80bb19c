import type { CancelResponse } from '../../contract/payment.js'
import type { Db } from '../store/db.js'
import { transitionPayment } from './lifecycle.js'

export interface CancelPaymentParameters {
  paymentId: string
  /** Who walked away: the merchant (`POST /v1/payments/:id/cancel`) or the buyer (the gateway). */
  reason: CancelResponse['cancelledReason']
  now: Date
}

/** Only a payment still waiting can be cancelled: `409 invalid_state` otherwise, `404 payment_not_found` if gone. */
export async function cancelPayment(db: Db, params: CancelPaymentParameters): Promise<CancelResponse> {
  const { paymentId, reason, now } = params
  const row = await transitionPayment(db, {
    paymentId,
    from: 'requires_action',
    to: 'cancelled',
    set: { cancelled_at: now, cancelled_reason: reason },
    now,
  })
  return {
    paymentId: row.id,
    status: 'cancelled',
    cancelledAt: (row.cancelled_at ?? now).toISOString(),
    cancelledReason: reason,
  }
}
