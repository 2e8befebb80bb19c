import type { PaymentStatus } from '../../contract/common.js'
import { fail } from '../errors.js'
import type { Db } from '../store/db.js'
import type { PaymentRow, PaymentUpdate } from '../store/schema.js'

/** The legal moves of a payment. Final states have none. Every status change goes through here. */
export const paymentTransitions: Readonly<Record<PaymentStatus, readonly PaymentStatus[]>> = {
  requires_action: ['processing', 'cancelled', 'expired'],
  processing: ['succeeded', 'failed'],
  succeeded: [],
  failed: [],
  expired: [],
  cancelled: [],
}

export function canTransition(from: PaymentStatus, to: PaymentStatus): boolean {
  return paymentTransitions[from].includes(to)
}

export interface TransitionPaymentParameters {
  paymentId: string
  /** The state(s) the payment must be in now; each must have a legal move to `to`. */
  from: PaymentStatus | readonly PaymentStatus[]
  to: PaymentStatus
  /** Other columns written in the same UPDATE (tx_id, failure_code, cancelled_at, ...). */
  set?: Omit<PaymentUpdate, 'status' | 'id'>
  /** Only for a payment still unexpired at this time (e.g. a buyer confirming). */
  notExpiredAt?: Date
  now?: Date
}

/**
 * Moves a payment with ONE conditional `UPDATE ... WHERE status IN (from) RETURNING *`, so two
 * racing callers cannot both win. When nothing matched: `404 payment_not_found` if the payment does
 * not exist, else `409 invalid_state` (with the state it was actually in).
 */
export async function transitionPayment(db: Db, params: TransitionPaymentParameters): Promise<PaymentRow> {
  const from = typeof params.from === 'string' ? [params.from] : [...params.from]
  for (const state of from) {
    if (!canTransition(state, params.to)) {
      throw new Error(`Illegal payment transition ${state} -> ${params.to} in code.`)
    }
  }
  let query = db
    .updateTable('payments')
    .set({ ...params.set, status: params.to, updated_at: params.now ?? new Date() })
    .where('id', '=', params.paymentId)
    .where('status', 'in', from)
  if (params.notExpiredAt) query = query.where('expires_at', '>', params.notExpiredAt)
  const row = await query.returningAll().executeTakeFirst()
  if (row) return row
  const current = await db
    .selectFrom('payments')
    .select(['status', 'expires_at'])
    .where('id', '=', params.paymentId)
    .executeTakeFirst()
  if (!current) fail('payment_not_found', 'Payment not found.', { paymentId: params.paymentId })
  fail('invalid_state', `The payment is ${current.status}; it cannot become ${params.to}.`, {
    paymentId: params.paymentId,
    status: current.status,
    to: params.to,
  })
}

/**
 * Marks every payment still waiting past its `expiresAt` as expired (the lazy path on reads and the
 * sweep of a background job). Returns the ids it expired. Narrow with a partner/merchant scope.
 */
export async function expireDuePayments(
  db: Db,
  options: { now: Date; partnerId?: string; mode?: 'test' | 'live'; merchantId?: string; paymentId?: string },
): Promise<string[]> {
  let query = db
    .updateTable('payments')
    .set({ status: 'expired', updated_at: options.now })
    .where('status', '=', 'requires_action')
    .where('expires_at', '<=', options.now)
  if (options.partnerId) query = query.where('partner_id', '=', options.partnerId)
  if (options.mode) query = query.where('mode', '=', options.mode)
  if (options.merchantId) query = query.where('merchant_id', '=', options.merchantId)
  if (options.paymentId) query = query.where('id', '=', options.paymentId)
  const rows = await query.returning('id').execute()
  return rows.map((r) => r.id)
}

/** A read that shows the truth: a waiting payment past its expiry is expired first. */
export async function withExpiryApplied(db: Db, row: PaymentRow, now: Date): Promise<PaymentRow> {
  if (row.status !== 'requires_action' || row.expires_at.getTime() > now.getTime()) return row
  const updated = await db
    .updateTable('payments')
    .set({ status: 'expired', updated_at: now })
    .where('id', '=', row.id)
    .where('status', '=', 'requires_action')
    .where('expires_at', '<=', now)
    .returningAll()
    .executeTakeFirst()
  if (updated) return updated
  // Someone else moved it meanwhile (expired, confirmed just in time): read what it is now.
  return db.selectFrom('payments').selectAll().where('id', '=', row.id).executeTakeFirstOrThrow()
}
