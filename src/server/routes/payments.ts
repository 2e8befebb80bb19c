import type { FastifyInstance } from 'fastify'
import { sql } from 'kysely'
import { endpoints } from '../../contract/endpoints.js'
import type {
  MerchantPaymentListQuery,
  PaymentCreateBodyPreview,
  PaymentListResponse,
} from '../../contract/payment.js'
import { PaymentCreateBodyPreview as PreviewBody } from '../../contract/payment.js'
import { findMerchant } from '../auth.js'
import type { ServerConfig } from '../config.js'
import type { AuthContext } from '../context.js'
import { fail, validationError } from '../errors.js'
import { newId } from '../ids.js'
import { afterCursor, keysetPage, page } from '../pagination.js'
import { unitDisplay } from '../payments/assets.js'
import { cancelPayment } from '../payments/cancel.js'
import { expireDuePayments } from '../payments/lifecycle.js'
import {
  createdJson,
  findMerchantPayment,
  listItemJson,
  paymentJson,
  statusJson,
  unixSeconds,
} from '../payments/views.js'
import { defineInsertRoute, defineRoute } from '../route.js'
import type { Db } from '../store/db.js'
import type { PaymentRow } from '../store/schema.js'

/** The furthest a merchant may push a payment's expiry. */
const maxPaymentLifetimeSeconds = 30 * 24 * 60 * 60

async function listPayments(
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

export async function paymentRoutes(app: FastifyInstance): Promise<void> {
  defineInsertRoute(
    app,
    endpoints.createPayment,
    ({ auth, merchant, config, now, ...ctx }) => {
      // Stable bodies have no `checkout`; the preview schema (which has it) validated preview calls.
      const body = ctx.body as PaymentCreateBodyPreview
      const display = unitDisplay(body.amount.unit, config)
      if (!display) {
        throw validationError([
          { path: 'body.amount.unit', message: `Unsupported unit ${body.amount.unit}.` },
        ])
      }
      let expiresAt: Date
      if (body.expiresAt !== undefined) {
        const seconds = body.expiresAt - unixSeconds(now)
        if (seconds <= 0)
          throw validationError([{ path: 'body.expiresAt', message: 'expiresAt must be in the future.' }])
        if (seconds > maxPaymentLifetimeSeconds) {
          throw validationError([{ path: 'body.expiresAt', message: 'expiresAt is more than 30 days away.' }])
        }
        expiresAt = new Date(body.expiresAt * 1000)
      } else {
        expiresAt = new Date((unixSeconds(now) + config.paymentTtlSeconds) * 1000)
      }
      const id = newId('payment')
      return {
        table: 'payments',
        row: {
          id,
          partner_id: auth.partnerId,
          merchant_id: merchant.id,
          mode: auth.mode,
          reference_id: body.referenceId,
          amount_unit: body.amount.unit,
          amount_value: body.amount.value,
          status: 'requires_action',
          expires_at: expiresAt,
          checkout: body.checkout ? JSON.stringify(body.checkout) : null,
          created_at: now,
          updated_at: now,
        },
        // The merchant may come from the auth cache, so the insert itself checks it still exists.
        guard: {
          holds: sql<boolean>`EXISTS (SELECT 1 FROM merchants WHERE id = ${merchant.id} AND deleted_at IS NULL)`,
          refuse: () => fail('merchant_not_found', 'Merchant not found.', { merchantId: merchant.id }),
        },
        result: createdJson({ id, status: 'requires_action', expires_at: expiresAt }, config),
      }
    },
    { bodyByVersion: { '2026-02-19.preview': PreviewBody } },
  )

  defineRoute(app, endpoints.getPayment, async ({ db, merchant, params, config, now }) => {
    return paymentJson(await findMerchantPayment(db, merchant.id, params.id, now), config)
  })

  defineRoute(app, endpoints.getPaymentStatus, async ({ db, merchant, params, now }) => {
    return statusJson(await findMerchantPayment(db, merchant.id, params.id, now))
  })

  defineRoute(app, endpoints.listPayments, async ({ db, auth, query, config, now }) => {
    const merchantId = query.merchantId ? (await findMerchant(db, auth, query.merchantId)).id : undefined
    return listPayments(db, config, { auth, ...(merchantId ? { merchantId } : {}) }, query, now)
  })

  defineRoute(app, endpoints.listMerchantPayments, async ({ db, auth, merchant, query, config, now }) => {
    return listPayments(db, config, { auth, merchantId: merchant.id }, query, now)
  })

  defineRoute(
    app,
    endpoints.listMerchantPaymentsDeprecated,
    async ({ db, auth, params, query, config, now }) => {
      const merchant = await findMerchant(db, auth, params.merchantId)
      return listPayments(db, config, { auth, merchantId: merchant.id }, query, now)
    },
  )

  defineRoute(app, endpoints.cancelPayment, async ({ db, merchant, params, now }) => {
    const payment = await findMerchantPayment(db, merchant.id, params.id, now)
    return cancelPayment(db, { paymentId: payment.id, reason: 'cancelled_by_merchant', now })
  })
}
