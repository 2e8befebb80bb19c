import type { MerchantPaymentListQuery, PaymentListResponse } from '../../contract/payment.js'
import type { ServerConfig } from '../config.js'
import type { AuthContext } from '../context.js'
import { afterCursor, keysetPage, page } from '../pagination.js'
import type { Db } from '../store/db.js'
import type { PaymentRow } from '../store/schema.js'
import { expireDuePayments } from './lifecycle.js'
import { listItemJson } from './views.js'

/**
 * A page of a partner's payments (or one merchant's), newest first, expiry applied first so a listing
 * never shows a waiting payment past its expiry.
 */
export async function listPayments(
  db: Db,
  config: ServerConfig,
  scope: { auth: AuthContext; merchantId?: string },
  query: MerchantPaymentListQuery,
  now: Date,
): Promise<PaymentListResponse> {
  const { auth, merchantId } = scope
  await expireDuePayments(db, {
    now,
    partnerId: auth.partnerId,
    mode: auth.mode,
    ...(merchantId ? { merchantId } : {}),
  })
  const limit = query.limit ?? 50
  let q = db
    .selectFrom('payments')
    .selectAll()
    .where('partner_id', '=', auth.partnerId)
    .where('mode', '=', auth.mode)
  if (merchantId) q = q.where('merchant_id', '=', merchantId)
  const statuses =
    query.status === undefined
      ? []
      : [...new Set(Array.isArray(query.status) ? query.status : [query.status])]
  if (statuses.length === 1) q = q.where('status', '=', statuses[0]!)
  if (query.referenceId !== undefined) q = q.where('reference_id', '=', query.referenceId)
  if (query.startTs !== undefined) q = q.where('created_at', '>=', new Date(query.startTs * 1000))
  if (query.endTs !== undefined) q = q.where('created_at', '<', new Date(query.endTs * 1000))
  q = afterCursor(q, query.cursor)
  let rows: PaymentRow[]
  if (statuses.length > 1) {
    // `status IN (...)` cannot walk an index in (created_at, id) order: at scale it filters its way through
    // the partner's history. One keyset range per status (payments_status / payments_merchant_status),
    // merged, reads at most (limit + 1) rows per status whatever the table size.
    const [first, ...others] = statuses.map((status, i) =>
      db.selectFrom(keysetPage(q.where('status', '=', status), limit).as(`s${i}`)).selectAll(),
    )
    const union = others.reduce((all, branch) => all.unionAll(branch), first!)
    rows = await keysetPage(db.selectFrom(union.as('p')).selectAll(), limit).execute()
  } else {
    rows = await keysetPage(q, limit).execute()
  }
  const { items, nextCursor } = page(rows, limit)
  return { data: items.map((row) => listItemJson(row, config)), nextCursor }
}
