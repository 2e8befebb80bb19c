import type * as z from 'zod/mini'
import { type Endpoints, endpoints } from '../contract/endpoints.js'
import { serviceErrorCodes } from '../contract/errors.js'
import { createHttpClient, type HttpClientConfig, newIdempotencyKey } from './http.js'
import { zodParser } from './zodParser.js'

type MerchantEndpointName = Exclude<keyof Endpoints, `gateway${string}`>

type Field<E, K extends string> = E extends Record<K, infer S extends z.ZodMiniType> ? z.input<S> : never

/** Input of one merchant API call: path params, query, body, plus per-call headers. */
export type MerchantCallInput<E> = (E extends { params: z.ZodMiniType }
  ? { params: Field<E, 'params'> }
  : { params?: never }) &
  (E extends { query: z.ZodMiniType } ? { query?: Field<E, 'query'> } : { query?: never }) &
  (E extends { body: z.ZodMiniType } ? { body: Field<E, 'body'> } : { body?: never }) & {
    /** Overrides the client's `merchantId` for this call. */
    merchantId?: string
    /** Defaults to a fresh random key where the endpoint requires one. */
    idempotencyKey?: string
    signal?: AbortSignal
  }

export type MerchantClient = {
  [K in MerchantEndpointName]: (
    ...input: Endpoints[K] extends { params: z.ZodMiniType } | { body: z.ZodMiniType }
      ? [MerchantCallInput<Endpoints[K]>]
      : [MerchantCallInput<Endpoints[K]>?]
  ) => Promise<z.infer<Endpoints[K]['response']>>
}

export interface MerchantClientConfig extends Omit<HttpClientConfig, 'auth'> {
  apiKey: string
  /** Sent as `Merchant-Id` on merchant-scoped calls. */
  merchantId?: string
}

/** Typed client of the merchant API (spec rows 1-17 and the sandbox simulate endpoint), one method per endpoint. */
export function createMerchantClient(config: MerchantClientConfig): MerchantClient {
  const http = createHttpClient({ ...config, auth: { apiKey: config.apiKey } })
  const client: Record<string, (input?: MerchantCallInput<unknown>) => Promise<unknown>> = {}
  for (const [name, endpoint] of Object.entries(endpoints)) {
    if (endpoint.auth === 'gateway') continue
    client[name] = (input = {}) => {
      const merchantId = input.merchantId ?? config.merchantId
      const idempotencyKey =
        input.idempotencyKey ??
        ('idempotencyKey' in endpoint && endpoint.idempotencyKey === 'required'
          ? newIdempotencyKey()
          : undefined)
      return http.request({
        method: endpoint.method,
        path: fillPath(endpoint.path, (input.params ?? {}) as Record<string, string>),
        query: input.query as Record<string, unknown> | undefined,
        body: input.body,
        headers: { 'Merchant-Id': merchantId },
        parse: zodParser(endpoint.response as z.ZodMiniType<unknown>),
        errorCodes: serviceErrorCodes,
        ...(idempotencyKey ? { idempotencyKey } : {}),
        ...(input.signal ? { signal: input.signal } : {}),
      })
    }
  }
  return client as unknown as MerchantClient
}

function fillPath(template: string, params: Record<string, string>): string {
  return template.replace(/:([A-Za-z]+)/g, (_, name: string) => {
    const value = params[name]
    if (value === undefined) throw new TypeError(`Missing path parameter "${name}" for ${template}.`)
    return encodeURIComponent(value)
  })
}
