import type * as z from 'zod/mini'

/**
 * Who may call an endpoint:
 * - `partner`: a partner-role `Api-Key`;
 * - `merchant`: a partner-role `Api-Key` plus `Merchant-Id`;
 * - `gateway`: an `Api-Key` of any role, or `App-Id` + `Client-Id`.
 */
export type EndpointAuth = 'partner' | 'merchant' | 'gateway'

export interface Endpoint {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  /** Fastify-style path (`:param`). */
  path: string
  auth: EndpointAuth
  params?: z.ZodMiniType
  query?: z.ZodMiniType
  body?: z.ZodMiniType
  response: z.ZodMiniType
  /** HTTP status of success. */
  status: 200 | 201
  idempotencyKey?: 'required' | 'optional'
  deprecated?: boolean
  summary: string
}

export function endpoint<const E extends Endpoint>(e: E): E {
  return e
}
