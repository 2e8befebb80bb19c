import type { FastifyInstance } from 'fastify'
import { endpoints } from '../../contract/endpoints.js'
import { fail } from '../errors.js'
import { createRefund } from '../refunds/create.js'
import { simulateRefund } from '../refunds/sandbox.js'
import { findMerchantRefund, listRefunds, refundJson } from '../refunds/views.js'
import { defineRoute } from '../route.js'

export async function refundRoutes(app: FastifyInstance): Promise<void> {
  defineRoute(app, endpoints.createRefund, async ({ db, merchant, body, now, config }) => {
    const refund = await createRefund(db, {
      merchantId: merchant.id,
      body,
      now,
      sandboxDelayMs: config.sandboxRefundDelayMs,
    })
    return refundJson(refund, config)
  })

  defineRoute(app, endpoints.getRefund, async ({ db, merchant, params, config }) =>
    refundJson(await findMerchantRefund(db, merchant.id, params.id), config),
  )

  defineRoute(app, endpoints.listRefunds, async ({ db, merchant, query, config }) =>
    listRefunds(db, config, merchant.id, query),
  )

  defineRoute(app, endpoints.simulateRefund, async ({ db, auth, merchant, params, body, now, config }) => {
    if (auth.mode !== 'test')
      fail('not_sandbox_api_key', 'Use a test API key (svc_test_...) to simulate outcomes.')
    const refund = await findMerchantRefund(db, merchant.id, params.id)
    return refundJson(await simulateRefund(db, refund, body.outcome, now), config)
  })
}
