import type * as z from 'zod/mini'
import type { gatewayEndpoints } from '../contract/gatewayEndpoints.js'
import { gatewayErrorCodes, gatewayRoutes } from '../contract/generated/walletSchemas.js'
import { parser } from '../contract/validate.js'
import type { CallOptions, GatewayApi } from './gatewayApi.js'
import { createHttpClient, type HttpClientConfig, newIdempotencyKey } from './http.js'
import { assertRandomSource } from './random.js'

export type GatewayClientConfig = HttpClientConfig

type EndpointName = keyof typeof gatewayEndpoints
/** The response type comes from the zod schema; the check at runtime from the JSON Schema generated from it. */
type ResponseOf<N extends EndpointName> = z.output<(typeof gatewayEndpoints)[N]['response']>

/**
 * The wallet gateway over HTTP (spec rows 18-23). Confirm and cancel always carry an idempotency key,
 * so a retried call after a lost response can never confirm twice.
 */
export function createGatewayClient(config: GatewayClientConfig): GatewayApi {
  assertRandomSource()
  const http = createHttpClient(config)
  const call = <N extends EndpointName>(
    name: N,
    paymentId: string,
    options: CallOptions | undefined,
    extra: {
      body?: unknown
      safeToRetry?: boolean
      idempotencyKey?: string
      headers?: Record<string, string | undefined>
      holdMs?: number
    } = {},
  ) => {
    const route = gatewayRoutes[name]
    const idempotencyKey = options?.idempotencyKey ?? extra.idempotencyKey
    return http.request({
      method: route.method,
      path: route.path.replace(':id', encodeURIComponent(paymentId)),
      parse: parser<ResponseOf<N>>(route.response),
      errorCodes: gatewayErrorCodes,
      body: extra.body,
      headers: extra.headers,
      holdMs: extra.holdMs,
      ...(options?.signal ? { signal: options.signal } : {}),
      ...(idempotencyKey ? { idempotencyKey } : {}),
      ...(extra.safeToRetry ? { safeToRetry: true } : {}),
    })
  }

  return {
    getPayment: (paymentId, options) => call('gatewayGetPayment', paymentId, options),
    getStatus: (paymentId, options) =>
      call('gatewayGetStatus', paymentId, options, {
        headers: { Prefer: options?.waitSeconds ? `wait=${options.waitSeconds}` : undefined },
        holdMs: (options?.waitSeconds ?? 0) * 1000,
      }),
    // Options and fetch only quote or build; repeating them changes no payment state.
    getOptions: (paymentId, body, options) =>
      call('gatewayOptions', paymentId, options, { body, safeToRetry: true }),
    fetchActions: (paymentId, body, options) =>
      call('gatewayFetch', paymentId, options, { body, safeToRetry: true }),
    confirm: (paymentId, body, options) =>
      call('gatewayConfirm', paymentId, options, { body, idempotencyKey: newIdempotencyKey() }),
    cancel: (paymentId, options) =>
      call('gatewayCancel', paymentId, options, { idempotencyKey: newIdempotencyKey() }),
  }
}
