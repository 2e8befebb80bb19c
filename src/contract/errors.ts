import { isServiceErrorCode, type ServiceErrorCode, serviceErrorCodes } from './errorCodes.js'

export { isServiceErrorCode, type ServiceErrorCode, serviceErrorCodes }

/** The HTTP status of every error code of the service specification (docs/api-contract.md; docs/architecture.md, section 3). */
export const serviceErrorStatus = {
  invalid_params: 400,
  params_validation: 400,
  header_not_ascii: 400,
  invalid_api_version: 400,
  unknown_api_version: 400,
  api_version_downgrade: 400,
  payment_not_succeeded: 400,
  conflicting_auth_headers: 400,
  missing_merchant_id: 400,
  missing_api_key: 401,
  missing_merchant_api_key: 401,
  invalid_api_key: 401,
  missing_auth_headers: 401,
  missing_app_id: 401,
  missing_client_id: 401,
  invalid_app_id: 401,
  unauthorized: 401,
  forbidden: 403,
  not_sandbox_api_key: 403,
  payment_not_found: 404,
  merchant_not_found: 404,
  api_key_not_found: 404,
  partner_not_found: 404,
  customer_not_found: 404,
  wallet_not_found: 404,
  executor_not_found: 404,
  webhook_endpoint_not_found: 404,
  webhook_delivery_not_found: 404,
  settlement_not_found: 404,
  refund_not_found: 404,
  subscription_not_found: 404,
  test_clock_not_found: 404,
  idempotency_conflict: 409,
  merchant_exists: 409,
  already_refunded: 409,
  settlement_asset_conflict: 409,
  invalid_state: 409,
  payment_expired: 410,
  quote_expired: 422,
  rate_limited: 429,
  sanctioned_user: 451,
  internal_error: 500,
} as const satisfies Record<ServiceErrorCode, number>

/** Published API versions, oldest first. Previews are used only when sent explicitly. */
export const apiVersions = ['2026-02-18', '2026-02-19.preview'] as const
export type ApiVersion = (typeof apiVersions)[number]
export const defaultApiVersion: ApiVersion = '2026-02-18'
