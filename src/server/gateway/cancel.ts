import type { CancelResponse } from '../../contract/payment.js'
import { transitionPayment } from '../payments/lifecycle.js'
import type { Db } from '../store/db.js'
import type { GatewayPaymentRow } from './payment.js'

/** Spec row 22: the buyer walks away. Only a payment still waiting can be cancelled (`409 invalid_state`). */
export async function cancelByUser(db: Db, payment: GatewayPaymentRow, now: Date): Promise<CancelResponse> {
  const row = await transitionPayment(db, {
    paymentId: payment.id,
    from: 'requires_action',
    to: 'cancelled',
    set: { cancelled_at: now, cancelled_reason: 'cancelled_by_user' },
    now,
  })
  return {
    paymentId: row.id,
    status: 'cancelled',
    cancelledAt: (row.cancelled_at ?? now).toISOString(),
    cancelledReason: 'cancelled_by_user',
  }
}
