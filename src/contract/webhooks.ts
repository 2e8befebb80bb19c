import * as z from 'zod/mini'
import { Cursor, httpUrlPattern, limitQuery } from './common.js'

/**
 * Merchant webhooks: endpoint management (`/v1/webhook-endpoints`) and the event payload, which is
 * WalletConnect Pay's webhook contract (`api_version` 2026-05-18) so integrations written for it work
 * unchanged. Deliveries are signed in the Standard Webhooks format (see caipay/client verifyWebhook).
 */

export const webhookApiVersion = '2026-05-18'

/** The seven events of the WalletConnect Pay contract: what an endpoint gets by default. */
export const defaultWebhookEventTypes = [
  'payment.created',
  'payment.processing',
  'payment.succeeded',
  'payment.failed',
  'payment.expired',
  'payment.cancelled',
  'payment.settled',
] as const

/** caipay's refund events (data: a refund snapshot); like `payment.refunded`, not in the contract. */
export const refundEventTypes = ['refund.created', 'refund.succeeded', 'refund.failed'] as const

/** caipay's manual-capture events (docs/capture.md); data: the payment snapshot with its `capture`. */
export const captureEventTypes = ['payment.authorized', 'payment.captured', 'payment.voided'] as const
/** caipay's subscription events (data: a subscription snapshot); not in the contract either. */
export const subscriptionEventTypes = [
  'subscription.created',
  'subscription.activated',
  'subscription.renewed',
  'subscription.past_due',
  'subscription.cancelled',
  'subscription.ended',
] as const

/**
 * Every event type. caipay's own (`payment.refunded`, once refunds cover the whole payment, the refund
 * events and the capture events) only when an endpoint enables them explicitly.
 */
export const webhookEventTypes = [
  ...defaultWebhookEventTypes,
  'payment.refunded',
  ...refundEventTypes,
  ...captureEventTypes,
  ...subscriptionEventTypes,
] as const
export const WebhookEventType = z.enum(webhookEventTypes)
export type WebhookEventType = z.infer<typeof WebhookEventType>

/** The server also checks the scheme for the mode and where the host points (urlPolicy.ts). */
const WebhookUrl = z
  .string()
  .check(
    z.maxLength(2048),
    z.regex(httpUrlPattern('https?'), 'Expected an http(s) URL without credentials or fragment.'),
  )

export const WebhookEndpointCreateBody = z.strictObject({
  url: WebhookUrl,
  enabledEvents: z.optional(z.array(WebhookEventType).check(z.minLength(1), z.maxLength(32))),
})
export type WebhookEndpointCreateBody = z.infer<typeof WebhookEndpointCreateBody>

export const WebhookEndpoint = z.object({
  id: z.string(),
  url: z.string(),
  enabledEvents: z.array(WebhookEventType),
  createdAt: z.string(),
})
export type WebhookEndpoint = z.infer<typeof WebhookEndpoint>

/** Creation is the only answer (with rotation) that carries the secret. */
export const WebhookEndpointCreated = z.object({
  id: z.string(),
  url: z.string(),
  enabledEvents: z.array(WebhookEventType),
  secret: z.string(),
  createdAt: z.string(),
})
export type WebhookEndpointCreated = z.infer<typeof WebhookEndpointCreated>

export const WebhookEndpointListQuery = z.strictObject({ limit: limitQuery(100), cursor: z.optional(Cursor) })
export const WebhookEndpointListResponse = z.object({
  data: z.array(WebhookEndpoint),
  nextCursor: z.nullable(z.string()),
})

export const WebhookEndpointIdParams = z.strictObject({
  id: z.string().check(z.minLength(1), z.maxLength(64)),
})
export const WebhookDeliveryIdParams = z.strictObject({
  id: z.string().check(z.minLength(1), z.maxLength(64)),
  deliveryId: z.string().check(z.minLength(1), z.maxLength(64)),
})

export const WebhookSecretResponse = z.object({ secret: z.string() })

export const webhookDeliveryStates = ['pending', 'succeeded', 'failed'] as const

export const WebhookDelivery = z.object({
  id: z.string(),
  /** The event's id: the `svix-id` header and the payload's `id`. */
  eventId: z.string(),
  eventType: z.string(),
  status: z.enum(webhookDeliveryStates),
  attempts: z.number(),
  lastStatusCode: z.nullable(z.number()),
  lastError: z.nullable(z.string()),
  /** ISO time of the next automatic attempt; null once delivered or given up. */
  nextAttemptAt: z.nullable(z.string()),
  createdAt: z.string(),
})
export type WebhookDelivery = z.infer<typeof WebhookDelivery>

export const WebhookDeliveryListQuery = z.strictObject({ limit: limitQuery(100), cursor: z.optional(Cursor) })
export const WebhookDeliveryListResponse = z.object({
  data: z.array(WebhookDelivery),
  nextCursor: z.nullable(z.string()),
})

// The payload (what the receiver gets), for typed handlers. Timestamps are ISO 8601 UTC strings.

const WireAmount = z.object({ unit: z.string(), value: z.string() })

export const WebhookPaymentSnapshot = z.object({
  payment_id: z.string(),
  merchant_id: z.string(),
  live: z.boolean(),
  /** 0 at creation, +1 per state change: apply an event only when it is newer than what you have. */
  payment_state_version: z.number(),
  reference_id: z.string(),
  status: z.string(),
  amount: WireAmount,
  created_at: z.string(),
  expires_at: z.string(),
  processing: z.nullable(
    z.object({
      processing_at: z.string(),
      option_amount: z.nullable(WireAmount),
      /** caipay charges no fee. */
      fee: z.null(),
      settlement_amount: z.nullable(WireAmount),
      buyer_caip10: z.nullable(z.string()),
      chain_caip2: z.nullable(z.string()),
    }),
  ),
  success: z.nullable(z.object({ succeeded_at: z.string(), tx_id: z.string() })),
  failed: z.nullable(z.object({ failed_at: z.string(), failure_reason: z.nullable(z.string()) })),
  cancelled: z.nullable(z.object({ cancelled_at: z.string(), cancellation_reason: z.nullable(z.string()) })),
  expired: z.nullable(z.object({ expired_at: z.string() })),
  settled: z.nullable(
    z.object({ settled_at: z.string(), tx_id: z.string(), amount: z.nullable(WireAmount) }),
  ),
  /** caipay's, manual-capture payments only (absent otherwise): the hold, null until paid. */
  capture: z.optional(
    z.nullable(
      z.object({
        status: z.enum(['authorized', 'captured', 'partially_captured', 'voided', 'expired']),
        authorized_amount: WireAmount,
        captured_amount: z.nullable(WireAmount),
        held_amount: WireAmount,
        failure_code: z.nullable(z.enum(['transfer_failed'])),
        capture_by: z.string(),
        captured_at: z.nullable(z.string()),
        voided_at: z.nullable(z.string()),
      }),
    ),
  ),
})
export type WebhookPaymentSnapshot = z.infer<typeof WebhookPaymentSnapshot>

/** The `data` of a `refund.*` event: the refund as the change left it. */
export const WebhookRefundSnapshot = z.object({
  refund_id: z.string(),
  payment_id: z.string(),
  merchant_id: z.string(),
  live: z.boolean(),
  /** The payment's version this event is (a refund's events are versions of its payment too). */
  payment_state_version: z.number(),
  status: z.enum(['pending', 'succeeded', 'failed']),
  /** In the payment's unit. */
  amount: WireAmount,
  /** What is sent back, in the paid asset's minor units (`caip19/...`); null when none. */
  asset_amount: z.nullable(WireAmount),
  destination: z.nullable(z.string()),
  reason: z.nullable(z.string()),
  tx_id: z.nullable(z.string()),
  failure_code: z.nullable(z.string()),
  created_at: z.string(),
  succeeded_at: z.nullable(z.string()),
  failed_at: z.nullable(z.string()),
})
export type WebhookRefundSnapshot = z.infer<typeof WebhookRefundSnapshot>

/** The `data` of a `subscription.*` event: the subscription as the change left it. */
export const WebhookSubscriptionSnapshot = z.object({
  subscription_id: z.string(),
  merchant_id: z.string(),
  live: z.boolean(),
  /** The period's payment this event belongs to (the first period's for created, activated, ended). */
  payment_id: z.string(),
  /** The payment's version this event is (a subscription's events are versions of a payment too). */
  payment_state_version: z.number(),
  reference_id: z.string(),
  status: z.string(),
  /** One period's price, in the subscription's unit. */
  amount: WireAmount,
  interval: z.string(),
  interval_count: z.number(),
  periods: z.nullable(z.number()),
  periods_charged: z.number(),
  next_charge_at: z.nullable(z.string()),
  buyer_caip10: z.nullable(z.string()),
  /** One period's charge in the mandate's asset (`caip19/...`); null until the mandate is signed. */
  amount_per_period: z.nullable(WireAmount),
  spender_caip10: z.nullable(z.string()),
  cancel_reason: z.nullable(z.string()),
  created_at: z.string(),
  end_at: z.string(),
})
export type WebhookSubscriptionSnapshot = z.infer<typeof WebhookSubscriptionSnapshot>

export const WebhookEvent = z.object({
  id: z.string(),
  type: z.string(),
  api_version: z.string(),
  created_at: z.string(),
  data: WebhookPaymentSnapshot,
})
export type WebhookEvent = z.infer<typeof WebhookEvent>

/** A `refund.*` event: the same envelope around the refund's snapshot. */
export const WebhookRefundEvent = z.object({
  id: z.string(),
  type: z.enum(refundEventTypes),
  api_version: z.string(),
  created_at: z.string(),
  data: WebhookRefundSnapshot,
})
export type WebhookRefundEvent = z.infer<typeof WebhookRefundEvent>

/** A `subscription.*` event: the same envelope around the subscription's snapshot. */
export const WebhookSubscriptionEvent = z.object({
  id: z.string(),
  type: z.enum(subscriptionEventTypes),
  api_version: z.string(),
  created_at: z.string(),
  data: WebhookSubscriptionSnapshot,
})
export type WebhookSubscriptionEvent = z.infer<typeof WebhookSubscriptionEvent>

/** Whatever an endpoint can receive: tell them apart by `type` (`payment.*`, `refund.*`, `subscription.*`). */
export type AnyWebhookEvent = WebhookEvent | WebhookRefundEvent | WebhookSubscriptionEvent
