export type { AmountUnit } from '../contract/common.js'
export { type FiatUnit, fiatUnits } from '../contract/currencies.js'
export { serviceErrorCodes, serviceErrorStatus } from '../contract/errors.js'
export type {
  Refund,
  RefundBody,
  RefundFailureCode,
  RefundListResponse,
  RefundStatus,
} from '../contract/refund.js'
export type {
  Subscription,
  SubscriptionCreateBody,
  SubscriptionInterval,
  SubscriptionListResponse,
  SubscriptionStatus,
  TestClock,
} from '../contract/subscription.js'
export type {
  AnyWebhookEvent,
  WebhookDelivery,
  WebhookEndpoint,
  WebhookEndpointCreated,
  WebhookEvent,
  WebhookEventType,
  WebhookPaymentSnapshot,
  WebhookRefundEvent,
  WebhookRefundSnapshot,
  WebhookSubscriptionEvent,
  WebhookSubscriptionSnapshot,
} from '../contract/webhooks.js'
export { clientErrorCodes, isPayError, PayError, type PayErrorCode } from '../errors/PayError.js'
export { createGatewayClient, type GatewayClientConfig } from './gateway.js'
export type { CallOptions, GatewayApi } from './gatewayApi.js'
export type { Credentials, Fetch, HttpClientConfig } from './http.js'
export {
  createMerchantClient,
  type MerchantCallInput,
  type MerchantClient,
  type MerchantClientConfig,
} from './merchant.js'
export { defaultRetryPolicy, type RetryPolicy } from './retry.js'
export { verifyWebhook, type WebhookHeaders } from './webhooks.js'
