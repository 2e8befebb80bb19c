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

/**
 * The codes the request pipeline (src/server: route.ts, auth.ts, app.ts) can answer for any operation of
 * this kind, besides the operation's own `errors`.
 */
export function pipelineErrorCodes(endpoint: Endpoint): ServiceErrorCode[] {
  const codes: ServiceErrorCode[] = [
    'invalid_params',
    'header_not_ascii',
    'invalid_api_version',
    'unknown_api_version',
    'api_version_downgrade',
    'conflicting_auth_headers',
    'invalid_api_key',
    'rate_limited',
    'internal_error',
  ]
  if (endpoint.params || endpoint.query || endpoint.body) codes.push('params_validation')
  if (endpoint.auth === 'gateway') {
    codes.push('missing_auth_headers', 'missing_app_id', 'missing_client_id', 'invalid_app_id')
  } else {
    codes.push('missing_api_key', 'forbidden')
  }
  if (endpoint.auth === 'merchant') codes.push('missing_merchant_id', 'merchant_not_found')
  if (endpoint.method !== 'GET') codes.push('idempotency_conflict')
  return codes
}

/** Every error code an operation can answer: the pipeline's, then its own. */
export function operationErrorCodes(endpoint: Endpoint): ServiceErrorCode[] {
  return [...pipelineErrorCodes(endpoint), ...(endpoint.errors ?? [])]
}
