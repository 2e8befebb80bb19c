export type {
  WebhookDelivery,
  WebhookEndpoint,
  WebhookEndpointCreated,
  WebhookEvent,
  WebhookEventType,
  WebhookPaymentSnapshot,
} from '../contract/webhooks.js'
export { isPayError, PayError, type PayErrorCode } from '../errors/PayError.js'
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
