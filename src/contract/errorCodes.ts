/**
 * Every error code of the service specification (docs/api-contract.md). The wallet core needs only the
 * codes; their HTTP statuses live in errors.ts, for the server and the HTTP clients.
 */
export const serviceErrorCodes = [
  'invalid_params',
  'params_validation',
  'header_not_ascii',
  'invalid_api_version',
  'unknown_api_version',
  'api_version_downgrade',
  'payment_not_succeeded',
  'conflicting_auth_headers',
  'missing_merchant_id',
  'missing_api_key',
  'missing_merchant_api_key',
  'invalid_api_key',
  'missing_auth_headers',
  'missing_app_id',
  'missing_client_id',
  'invalid_app_id',
  'unauthorized',
  'forbidden',
  'not_sandbox_api_key',
  'payment_not_found',
  'merchant_not_found',
  'api_key_not_found',
  'partner_not_found',
  'customer_not_found',
  'wallet_not_found',
  'executor_not_found',
  'webhook_endpoint_not_found',
  'webhook_delivery_not_found',
  'settlement_not_found',
  'refund_not_found',
  'subscription_not_found',
  'test_clock_not_found',
  'idempotency_conflict',
  'merchant_exists',
  'already_refunded',
  'settlement_asset_conflict',
  'invalid_state',
  'payment_expired',
  'quote_expired',
  'rate_limited',
  'sanctioned_user',
  'internal_error',
] as const

export type ServiceErrorCode = (typeof serviceErrorCodes)[number]

export function isServiceErrorCode(value: unknown): value is ServiceErrorCode {
  return (serviceErrorCodes as readonly unknown[]).includes(value)
}
