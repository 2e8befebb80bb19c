import type * as z from 'zod/mini'
import type { ServiceErrorCode } from './errors.js'

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
  /**
   * The error codes the operation itself can answer, beyond those of the request pipeline (auth, version,
   * validation, idempotency, rate limit, server errors). The OpenAPI document lists every one under its
   * status; the server's tests fail on any code an operation answers that its list lacks.
   */
  errors?: readonly ServiceErrorCode[]
  deprecated?: boolean
  /**
   * `wait`: the read honours `Prefer: wait=<seconds>` (RFC 7240): held until the payment's status
   * changes, answered with `Preference-Applied` and `pollInMs: 0` when it waited.
   */
  prefer?: 'wait'
  summary: string
}

export function endpoint<const E extends Endpoint>(e: E): E {
  return e
}
