import type { FastifyInstance } from 'fastify'
import { endpoints } from '../../contract/endpoints.js'
import { fail } from '../errors.js'
import { simulateOutcome, simulatePush } from '../gateway/simulate.js'
import { findMerchantPayment } from '../payments/views.js'
import { defineRoute } from '../route.js'

/** Sandbox-only endpoints. */
export async function testRoutes(app: FastifyInstance): Promise<void> {
  defineRoute(app, endpoints.simulatePayment, async ({ db, auth, merchant, params, body, config, now }) => {
    if (auth.mode !== 'test')
      fail('not_sandbox_api_key', 'Use a test API key (svc_test_...) to simulate outcomes.')
    const payment = await findMerchantPayment(db, merchant.id, params.id, now)
    return simulateOutcome({ db, config, payment, outcome: body.outcome, now })
  })
  defineRoute(app, endpoints.simulatePush, async ({ db, auth, merchant, params, body, config, now }) => {
    if (auth.mode !== 'test')
      fail('not_sandbox_api_key', 'Use a test API key (svc_test_...) to simulate pushed transfers.')
    const payment = await findMerchantPayment(db, merchant.id, params.id, now)
    return simulatePush({ db, config, payment, body, now })
  })
}
