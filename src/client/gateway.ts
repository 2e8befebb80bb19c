import type * as z from 'zod/mini'
import { gatewayEndpoints as endpoints } from '../contract/gatewayEndpoints.js'
import type { CallOptions, GatewayApi } from './gatewayApi.js'
import { createHttpClient, type HttpClientConfig, newIdempotencyKey } from './http.js'

export type GatewayClientConfig = HttpClientConfig

function paymentPath(template: string, paymentId: string): string {
  return template.replace(':id', encodeURIComponent(paymentId))
}

/**
 * The wallet gateway over HTTP (spec rows 18-23). Confirm and cancel always carry an idempotency key,
 * so a retried call after a lost response can never confirm twice.
 */
export function createGatewayClient(config: GatewayClientConfig): GatewayApi {
  const http = createHttpClient(config)
  const call = <T>(
    endpoint: { method: string; path: string; response: z.ZodMiniType<T> },
    paymentId: string,
    options: CallOptions | undefined,
    extra: { body?: unknown; safeToRetry?: boolean; idempotencyKey?: string } = {},
  ) =>
    http.request({
      method: endpoint.method,
      path: paymentPath(endpoint.path, paymentId),
      response: endpoint.response,
      body: extra.body,
      ...(options?.signal ? { signal: options.signal } : {}),
      ...((options?.idempotencyKey ?? extra.idempotencyKey)
        ? { idempotencyKey: options?.idempotencyKey ?? extra.idempotencyKey }
        : {}),
      ...(extra.safeToRetry ? { safeToRetry: true } : {}),
    })

  return {
    getPayment: (paymentId, options) => call(endpoints.gatewayGetPayment, paymentId, options),
    getStatus: (paymentId, options) => call(endpoints.gatewayGetStatus, paymentId, options),
    // Options and fetch only quote or build; repeating them changes no payment state.
    getOptions: (paymentId, body, options) =>
      call(endpoints.gatewayOptions, paymentId, options, { body, safeToRetry: true }),
    fetchActions: (paymentId, body, options) =>
      call(endpoints.gatewayFetch, paymentId, options, { body, safeToRetry: true }),
    confirm: (paymentId, body, options) =>
      call(endpoints.gatewayConfirm, paymentId, options, { body, idempotencyKey: newIdempotencyKey() }),
    cancel: (paymentId, options) =>
      call(endpoints.gatewayCancel, paymentId, options, { idempotencyKey: newIdempotencyKey() }),
  }
}
