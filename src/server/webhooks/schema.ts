import type { ColumnType } from 'kysely'
import type { WebhookEventType } from '../../contract/webhooks.js'
import type { Mode, Timestamp } from '../store/schema.js'

/** Row types of migration 009 (webhook endpoints and deliveries). */

export interface WebhookEndpointsTable {
  id: string
  partner_id: string
  mode: Mode
  url: string
  enabled_events: ColumnType<WebhookEventType[], WebhookEventType[], WebhookEventType[]>
  /** `whsec_` + base64 of 32 random bytes: HMAC keys must be recoverable, so it is stored as is. */
  secret: string
  /** The secret before the last rotation; it signs too until `previous_secret_expires_at`. */
  previous_secret: string | null
  previous_secret_expires_at: Timestamp | null
  created_at: Timestamp
  deleted_at: Timestamp | null
}

export type WebhookDeliveryState = 'pending' | 'succeeded' | 'failed'

export interface WebhookDeliveriesTable {
  id: string
  endpoint_id: string
  /** The event's id (`evt_...`): the payload's `id` and the `svix-id` of every attempt. */
  event_id: string
  event_type: string
  /** Null for a test event. */
  payment_id: string | null
  /** The exact bytes every attempt sends and signs. */
  body: string
  state: WebhookDeliveryState
  attempts: ColumnType<number, number | undefined, number>
  last_status_code: number | null
  last_error: string | null
  next_attempt_at: Timestamp | null
  created_at: Timestamp
  updated_at: Timestamp
  delivered_at: Timestamp | null
}

declare module '../store/schema.js' {
  interface Database {
    webhook_endpoints: WebhookEndpointsTable
    webhook_deliveries: WebhookDeliveriesTable
  }
}
