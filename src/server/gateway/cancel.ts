import type { CancelResponse } from '../../contract/payment.js'
import { cancelPayment } from '../payments/cancel.js'
import type { Db } from '../store/db.js'
import type { GatewayPaymentRow } from './payment.js'

/** Spec row 22: the buyer walks away. Only a payment still waiting can be cancelled (`409 invalid_state`). */
export async function cancelByUser(db: Db, payment: GatewayPaymentRow, now: Date): Promise<CancelResponse> {
  return cancelPayment(db, { paymentId: payment.id, reason: 'cancelled_by_user', now })
}
