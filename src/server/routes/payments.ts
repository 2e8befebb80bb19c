import type { FastifyInstance } from 'fastify'
import { endpoints } from '../../contract/endpoints.js'
import type { PaymentCreateBodyPreview } from '../../contract/payment.js'
import { PaymentCreateBodyPreview as PreviewBody } from '../../contract/payment.js'
import { findMerchant } from '../auth.js'
import { cancelPayment } from '../payments/cancel.js'
import { capturePayment, voidPayment } from '../payments/capture.js'
import { createPayment } from '../payments/create.js'
import { listPayments } from '../payments/list.js'
import { pushReceived } from '../payments/push.js'
import { findMerchantPayment, findPaymentStatus, paymentJson } from '../payments/views.js'
import { defineRoute } from '../route.js'
import { statusRead } from './statusReads.js'

export async function paymentRoutes(app: FastifyInstance): Promise<void> {
  defineRoute(
    app,
    endpoints.createPayment,
    // Stable bodies have no `checkout`; the preview schema (which has it) validated preview calls.
    ({ db, auth, merchant, config, now, body, afterCommit }) =>
      createPayment(db, { auth, merchant, body: body as PaymentCreateBodyPreview, config, now, afterCommit }),
    { bodyByVersion: { '2026-02-19.preview': PreviewBody } },
  )

  defineRoute(app, endpoints.getPayment, async ({ db, merchant, params, config, now }) => {
    const payment = await findMerchantPayment(db, merchant.id, params.id, now)
    return paymentJson(payment, config, await pushReceived(db, payment))
  })

  defineRoute(app, endpoints.getPaymentStatus, async ({ request, reply, db, merchant, params, fastPath }) => {
    return statusRead(request, reply, app.statusChanges, params.id, () =>
      findPaymentStatus(db, params.id, { merchantId: merchant.id }, app.now(), fastPath.finalStatuses),
    )
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

  defineRoute(app, endpoints.capturePayment, async ({ db, merchant, params, body, config, now }) => {
    const payment = await capturePayment(db, {
      merchantId: merchant.id,
      paymentId: params.id,
      body: body ?? {},
      now,
      sandboxDelayMs: config.sandboxRefundDelayMs,
    })
    return paymentJson(payment, config)
  })

  defineRoute(app, endpoints.voidPayment, async ({ db, merchant, params, config, now }) => {
    const { payment } = await voidPayment(db, {
      merchantId: merchant.id,
      paymentId: params.id,
      now,
      sandboxDelayMs: config.sandboxRefundDelayMs,
    })
    return paymentJson(payment, config)
  })

  defineRoute(app, endpoints.cancelPayment, async ({ db, merchant, params, now }) => {
    const payment = await findMerchantPayment(db, merchant.id, params.id, now)
    return cancelPayment(db, { paymentId: payment.id, reason: 'cancelled_by_merchant', now })
  })
}
