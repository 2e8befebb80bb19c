import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { createDriverRegistry } from '../gateway/drivers.js'
import { paymentOptions } from '../gateway/options.js'
import { findGatewayPayment, gatewayPaymentJson } from '../gateway/payment.js'
import { cancelPayment } from '../payments/cancel.js'
import { defineRoute } from '../route.js'
import type { Db } from '../store/db.js'
import type { Mode } from '../store/schema.js'
import { wcpConfirm } from './confirm.js'
import { wcpFetch } from './fetch.js'
import { wcpPaymentId } from './link.js'
import { wcpOption, wcpPaymentInfo, wcpStatus } from './translate.js'
import { wcpEndpoints } from './wire.js'

/**
 * Error statuses whose body the SDK reads; on any other it shows a fixed text for the status alone
 * (409 on confirm reads "Route expired", 422 "Invalid account"/"Invalid signature", 451 nothing), so
 * those answer 400 with the same `{code, message}`. 410 stays: the SDK reads it as "Payment expired".
 * 429 and 5xx stay too: the SDK retries them.
 */
const statusesTheSdkReads = new Set([400, 401, 404, 410, 429])

/** The status `/wcp` answers for a status the shared pipeline chose (see statusesTheSdkReads). */
export function wcpWireStatus(status: number): number {
  return status >= 400 && status < 500 && !statusesTheSdkReads.has(status) ? 400 : status
}

/** The SDK sends `WCP-Version` (and `api-version`); the shared pipeline reads and echoes `Pay-Version`. */
async function versionIn(request: FastifyRequest): Promise<void> {
  const version = request.headers['wcp-version'] ?? request.headers['api-version']
  if (version === undefined) delete request.headers['pay-version']
  else request.headers['pay-version'] = version
}

async function wireOut(_request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> {
  const version = reply.getHeader('pay-version')
  if (version !== undefined) {
    reply.removeHeader('pay-version')
    reply.header('wcp-version', version)
  }
  const status = reply.statusCode
  if (wcpWireStatus(status) !== status) reply.code(400)
  return payload
}

/**
 * The wallet gateway in the wire format of the published WalletConnect Pay SDK, at `/wcp` (a wallet sets
 * `baseUrl: "<caipay>/wcp"`): the same use cases, state and credentials as `/v1/gateway`, reshaped in
 * and out (docs/walletconnect-pay.md).
 */
export async function wcpRoutes(app: FastifyInstance): Promise<void> {
  await app.register(async (scope) => {
    scope.addHook('onRequest', versionIn)
    scope.addHook('onSend', wireOut)
    const registry = createDriverRegistry(app.config, app.chainDrivers ?? [])
    const payment = (db: Db, id: string, mode: Mode, now: Date) =>
      findGatewayPayment(db, wcpPaymentId(id, app.config), mode, now)

    defineRoute(scope, wcpEndpoints.getPayment, async ({ db, auth, params, config, now }) =>
      wcpPaymentInfo(gatewayPaymentJson(await payment(db, params.id, auth.mode, now), config)),
    )

    defineRoute(scope, wcpEndpoints.status, async ({ db, auth, params, now }) =>
      wcpStatus(await payment(db, params.id, auth.mode, now)),
    )

    defineRoute(scope, wcpEndpoints.options, async ({ db, auth, params, query, body, config, now }) => {
      const row = await payment(db, params.id, auth.mode, now)
      const answer = await paymentOptions({ db, config, registry, payment: row, body, now })
      return {
        options: answer.options.map(wcpOption),
        ...(query.includePaymentInfo === 'true' && answer.info ? { info: wcpPaymentInfo(answer.info) } : {}),
      }
    })

    defineRoute(scope, wcpEndpoints.fetch, async ({ db, auth, params, body, now }) => {
      const row = await payment(db, params.id, auth.mode, now)
      return wcpFetch({ db, registry, payment: row, body, now })
    })

    defineRoute(scope, wcpEndpoints.confirm, async ({ db, auth, params, body, config, now }) => {
      const row = await payment(db, params.id, auth.mode, now)
      return wcpConfirm({ db, config, registry, payment: row, body, now, credentialId: auth.credentialId })
    })

    defineRoute(scope, wcpEndpoints.cancel, async ({ db, auth, params, now }) => {
      const row = await payment(db, params.id, auth.mode, now)
      return cancelPayment(db, { paymentId: row.id, reason: 'cancelled_by_user', now })
    })
  })
}
