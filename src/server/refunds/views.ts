import type { Refund, RefundListQuery, RefundListResponse } from '../../contract/refund.js'
import type { ServerConfig } from '../config.js'
import { fail } from '../errors.js'
import { afterCursor, keysetPage, page } from '../pagination.js'
import { toAmount } from '../payments/assets.js'
import type { Db } from '../store/db.js'
import type { RefundRow } from './schema.js'

export function refundJson(row: RefundRow, config: ServerConfig): Refund {
  return {
    refundId: row.id,
    paymentId: row.payment_id,
    status: row.status,
    amount: toAmount(row.amount_unit, row.amount_value, config),
    destination: row.destination,
    reason: row.reason,
    ...(row.tx_id ? { txId: row.tx_id } : {}),
    ...(row.failure_code ? { failureCode: row.failure_code as NonNullable<Refund['failureCode']> } : {}),
    createdAt: row.created_at.toISOString(),
  }
}

export async function findMerchantRefund(db: Db, merchantId: string, refundId: string): Promise<RefundRow> {
  const row = await db
    .selectFrom('refunds')
    .selectAll()
    .where('id', '=', refundId)
    .where('merchant_id', '=', merchantId)
    .executeTakeFirst()
  if (!row) fail('refund_not_found', 'Refund not found.', { refundId })
  return row
}

/** A page of the merchant's refunds (or one payment's), newest first. */
export async function listRefunds(
  db: Db,
  config: ServerConfig,
  merchantId: string,
  query: RefundListQuery,
): Promise<RefundListResponse> {
  const limit = query.limit ?? 50
  let q = db.selectFrom('refunds').selectAll().where('merchant_id', '=', merchantId)
  if (query.paymentId !== undefined) q = q.where('payment_id', '=', query.paymentId)
  const rows = await keysetPage(afterCursor(q, query.cursor), limit).execute()
  const { items, nextCursor } = page(rows, limit)
  return { data: items.map((row) => refundJson(row, config)), nextCursor }
}
