import type { FastifyInstance } from 'fastify'
import * as z from 'zod/mini'
import { endpoints } from '../../contract/endpoints.js'
import { PaymentIdParams } from '../../contract/status.js'
import type { ChainDriver } from '../chains/types.js'
import { validationError } from '../errors.js'
import { submitCollectedData } from '../gateway/collectSubmit.js'
import { confirmPayment } from '../gateway/confirm.js'
import { createDriverRegistry } from '../gateway/drivers.js'
import { fetchActions } from '../gateway/fetch.js'
import { paymentOptions } from '../gateway/options.js'
import { findGatewayPayment, findGatewayPaymentAndOption, gatewayPaymentJson } from '../gateway/payment.js'
import { type ExpiryJob, startExpiryJob } from '../jobs/expiry.js'
import { cancelPayment } from '../payments/cancel.js'
import { findPaymentStatus } from '../payments/views.js'
import { defineRoute } from '../route.js'
import type { Db } from '../store/db.js'
import type { Mode } from '../store/schema.js'
import { statusRead } from './statusReads.js'

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Live-mode chain drivers (one per configured chain). Decorate the app with them before the route
     * modules register; without them live mode offers no options. Test mode needs none.
     */
    chainDrivers?: readonly ChainDriver[]
  }
}

/** The wallet gateway (spec rows 18-23), the hosted form's submission, and the expiry sweep. */
export async function gatewayRoutes(app: FastifyInstance): Promise<void> {
  const registry = createDriverRegistry(app.config, app.chainDrivers ?? [])

  defineRoute(app, endpoints.gatewayGetPayment, async ({ db, auth, params, config, now }) => {
    return gatewayPaymentJson(await findGatewayPayment(db, params.id, auth.mode, now), config)
  })

  defineRoute(app, endpoints.gatewayGetStatus, async ({ request, reply, db, auth, params, fastPath }) => {
    return statusRead(request, reply, app.statusChanges, params.id, () =>
      findPaymentStatus(db, params.id, { mode: auth.mode }, app.now(), fastPath.finalStatuses),
    )
  })

  defineRoute(app, endpoints.gatewayOptions, async ({ db, auth, params, body, config, now }) => {
    const payment = await findGatewayPayment(db, params.id, auth.mode, now)
    return paymentOptions({ db, config, registry, payment, body, now })
  })

  // Fetch and confirm act on the payment and the option named in the body, read in one round trip.
  const paymentAndOption = (ctx: {
    db: Db
    auth: { mode: Mode | null }
    params: { id: string }
    body: { optionId: string }
    now: Date
  }) => findGatewayPaymentAndOption(ctx.db, ctx.params.id, ctx.body.optionId, ctx.auth.mode, ctx.now)

  defineRoute(app, endpoints.gatewayFetch, async (ctx) => {
    const { db, body, now } = ctx
    const { payment, option } = await paymentAndOption(ctx)
    return fetchActions({ db, registry, payment, option, body, now })
  })

  defineRoute(app, endpoints.gatewayCancel, async ({ db, auth, params, now }) => {
    const payment = await findGatewayPayment(db, params.id, auth.mode, now)
    return cancelPayment(db, { paymentId: payment.id, reason: 'cancelled_by_user', now })
  })

  defineRoute(app, endpoints.gatewayConfirm, async (ctx) => {
    const { db, body, config, now, afterCommit, auth, fastPath } = ctx
    const { payment, option } = await paymentAndOption(ctx)
    const credentialId = auth.credentialId
    return confirmPayment({
      ...{ db, config, registry, payment, option, body, now, afterCommit, credentialId },
      oneStatement: fastPath.enabled,
    })
  })

  // The hosted form posts here from the buyer's browser, which holds no gateway credentials: the option id
  // in its URL is the credential (see gateway/collectSubmit.ts).
  app.post('/v1/gateway/payment/:id/collect-data', async (request) => {
    const params = z.safeParse(PaymentIdParams, request.params)
    if (!params.success)
      throw validationError([{ path: 'path.id', message: 'Expected a payment id (pay_...).' }])
    const now = app.now()
    const payment = await findGatewayPayment(app.db, params.data.id, null, now)
    return submitCollectedData({ db: app.db, payment, body: request.body, now })
  })

  let expiry: ExpiryJob | undefined
  app.addHook('onReady', async () => {
    expiry = startExpiryJob({
      db: app.db,
      now: () => app.now(),
      onError: (error) => app.log.error({ err: error }, 'expiry sweep failed'),
    })
  })
  app.addHook('onClose', async () => expiry?.stop())
}
