import { sql } from 'kysely'
import { holdAgainAfterFailedReturn, refundPayment } from '../payments/lifecycle.js'
import { type Db, inTransaction } from '../store/db.js'
import { recordRefundEvent } from './events.js'
import type { RefundRow } from './schema.js'

/**
 * A refund's final moves, each with its event, under the payment's row lock (taken first, as creation
 * takes it, so the two never wait on each other in opposite orders). Each moves only a `pending` refund
 * and yields undefined otherwise (a job that ran again after its step was done elsewhere).
 */

async function lockPaymentOf(db: Db, refundId: string): Promise<void> {
  await sql`SELECT 1 FROM payments WHERE id = (SELECT payment_id FROM refunds WHERE id = ${refundId}) FOR UPDATE`.execute(
    db,
  )
}

/** `pending -> succeeded` with the transfer's id; the payment is marked refunded once refunds cover it. */
export async function succeedRefund(
  db: Db,
  params: { refundId: string; txId: string; now: Date },
): Promise<RefundRow | undefined> {
  const { now } = params
  return inTransaction(db, async (trx) => {
    await lockPaymentOf(trx, params.refundId)
    const refund = await trx
      .updateTable('refunds')
      .set({
        status: 'succeeded',
        tx_id: params.txId,
        failure_code: null,
        succeeded_at: now,
        updated_at: now,
      })
      .where('id', '=', params.refundId)
      .where('status', '=', 'pending')
      .returningAll()
      .executeTakeFirst()
    if (!refund) return undefined
    await recordRefundEvent(trx, refund, 'refund.succeeded', now)
    const covered = await sql<{ full: boolean }>`
      SELECT coalesce(sum(r.amount_value), 0) >= p.amount_value AS full
      FROM payments p LEFT JOIN refunds r ON r.payment_id = p.id AND r.status = 'succeeded'
      WHERE p.id = ${refund.payment_id} GROUP BY p.amount_value`.execute(trx)
    if (covered.rows[0]?.full)
      await refundPayment(trx, { paymentId: refund.payment_id, merchantId: refund.merchant_id, now })
    return refund
  })
}

/**
 * `pending -> failed`: nothing was sent, and what it reserved is refundable again. A refund of held money
 * (a void, an expiry, a partial capture's rest) puts its payment's hold back (docs/capture.md).
 */
export async function failRefund(
  db: Db,
  params: { refundId: string; failureCode: 'transfer_failed'; now: Date },
): Promise<RefundRow | undefined> {
  const { now } = params
  return inTransaction(db, async (trx) => {
    await lockPaymentOf(trx, params.refundId)
    const refund = await trx
      .updateTable('refunds')
      .set({ status: 'failed', failure_code: params.failureCode, failed_at: now, updated_at: now })
      .where('id', '=', params.refundId)
      .where('status', '=', 'pending')
      .returningAll()
      .executeTakeFirst()
    if (!refund) return undefined
    await recordRefundEvent(trx, refund, 'refund.failed', now)
    if (refund.paid_from === 'authorized')
      await holdAgainAfterFailedReturn(trx, { paymentId: refund.payment_id, now })
    return refund
  })
}

/** A pending refund the collection address cannot pay yet says so (`insufficient_funds`) until it can. */
export async function noteRefundShortfall(
  db: Db,
  refundId: string,
  short: boolean,
  now: Date,
): Promise<void> {
  await db
    .updateTable('refunds')
    .set({ failure_code: short ? 'insufficient_funds' : null, updated_at: now })
    .where('id', '=', refundId)
    .where('status', '=', 'pending')
    .execute()
}

export async function loadRefund(db: Db, refundId: string): Promise<RefundRow> {
  return db.selectFrom('refunds').selectAll().where('id', '=', refundId).executeTakeFirstOrThrow()
}
