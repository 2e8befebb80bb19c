import type { FastifyInstance } from 'fastify'
import { endpoints } from '../../contract/endpoints.js'
import { fail } from '../errors.js'
import { refundPayment } from '../payments/lifecycle.js'
import { findMerchantPayment } from '../payments/views.js'
import { defineRoute } from '../route.js'

export async function refundRoutes(app: FastifyInstance): Promise<void> {
  // A full refund is a mark on a succeeded payment; one conditional UPDATE makes it happen once.
  defineRoute(app, endpoints.createRefund, async ({ db, merchant, body, now }) => {
    const marked = await refundPayment(db, { paymentId: body.paymentId, merchantId: merchant.id, now })
    if (marked) return { paymentId: marked.id }
    const payment = await findMerchantPayment(db, merchant.id, body.paymentId, now)
    if (payment.status !== 'succeeded') {
      fail(
        'payment_not_succeeded',
        `Only a succeeded payment can be refunded; this one is ${payment.status}.`,
      )
    }
    fail('already_refunded', 'This payment is already refunded.', { paymentId: payment.id })
  })
}
