import type { CancelResponse } from '../../contract/payment.js'
import type { Db } from '../store/db.js'
import type { PaymentRow } from '../store/schema.js'
import { transitionPayment } from './lifecycle.js'

export interface CancelPaymentParameters {
  paymentId: string
  /** Who walked away: the merchant (`POST /v1/payments/:id/cancel`) or the buyer (the gateway). */
  reason: CancelResponse['cancelledReason']
  now: Date
}

/**
 * The one way a payment becomes `cancelled` (merchant, buyer, sandbox): only one still waiting can be,
 * `409 invalid_state` otherwise, `404 payment_not_found` if gone.
 */
export function markCancelled(db: Db, params: CancelPaymentParameters): Promise<PaymentRow> {
  const { paymentId, reason, now } = params
  return transitionPayment(db, {
    paymentId,
    from: 'requires_action',
    to: 'cancelled',
    set: { cancelled_at: now, cancelled_reason: reason },
    now,
  })
}

/** Cancels and answers with the cancel response of rows 16 and 22. */
export async function cancelPayment(db: Db, params: CancelPaymentParameters): Promise<CancelResponse> {
  const { reason, now } = params
  const row = await markCancelled(db, params)
  return {
    paymentId: row.id,
    status: 'cancelled',
    cancelledAt: (row.cancelled_at ?? now).toISOString(),
    cancelledReason: reason,
  }
}
