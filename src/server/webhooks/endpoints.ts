import {
  defaultWebhookEventTypes,
  type WebhookDelivery,
  type WebhookEndpoint,
  type WebhookEndpointCreated,
  type WebhookEventType,
  webhookApiVersion,
} from '../../contract/webhooks.js'
import type { ServerConfig } from '../config.js'
import type { AuthContext } from '../context.js'
import { fail } from '../errors.js'
import { newId } from '../ids.js'
import { afterCursor, keysetPage, page } from '../pagination.js'
import { configuredSecretBox, sealSecret } from '../secrets.js'
import { type Db, inTransaction } from '../store/db.js'
import {
  type DeliveryRow,
  deliveryJson,
  type EndpointRow,
  isDelivered,
  recordAttempt,
  sendDelivery,
} from './deliver.js'
import { newWebhookSecret } from './signing.js'
import { checkWebhookUrl } from './urlPolicy.js'

/** Webhook endpoints and their deliveries, scoped to the caller's partner and mode. */

/** How long the secret replaced by a rotation still signs deliveries. */
export const rotationOverlapMs = 24 * 60 * 60 * 1000

type Scope = Pick<AuthContext, 'partnerId' | 'mode'>

function endpointJson(row: EndpointRow): WebhookEndpoint {
  return {
    id: row.id,
    url: row.url,
    enabledEvents: row.enabled_events,
    createdAt: row.created_at.toISOString(),
  }
}

export async function createEndpoint(
  db: Db,
  config: ServerConfig,
  scope: Scope,
  body: { url: string; enabledEvents?: WebhookEventType[] | undefined },
  now: Date,
): Promise<WebhookEndpointCreated> {
  const url = await checkWebhookUrl(body.url, {
    mode: scope.mode,
    allowPrivateUrls: config.webhooks.allowPrivateUrls,
  })
  const secret = newWebhookSecret()
  const row = await db
    .insertInto('webhook_endpoints')
    .values({
      id: newId('webhookEndpoint'),
      partner_id: scope.partnerId,
      mode: scope.mode,
      url: url.href,
      enabled_events: [...new Set(body.enabledEvents ?? defaultWebhookEventTypes)],
      secret: sealSecret(configuredSecretBox(config), secret),
      previous_secret: null,
      previous_secret_expires_at: null,
      created_at: now,
      deleted_at: null,
    })
    .returningAll()
    .executeTakeFirstOrThrow()
  return { ...endpointJson(row), secret }
}

export async function findEndpoint(db: Db, scope: Scope, id: string): Promise<EndpointRow> {
  const row = await db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('id', '=', id)
    .where('partner_id', '=', scope.partnerId)
    .where('mode', '=', scope.mode)
    .where('deleted_at', 'is', null)
    .executeTakeFirst()
  if (!row) fail('webhook_endpoint_not_found', 'Webhook endpoint not found.', { id })
  return row
}

export async function getEndpoint(db: Db, scope: Scope, id: string): Promise<WebhookEndpoint> {
  return endpointJson(await findEndpoint(db, scope, id))
}

export async function listEndpoints(
  db: Db,
  scope: Scope,
  query: { limit?: number | undefined; cursor?: string | undefined },
) {
  const limit = query.limit ?? 20
  const rows = await keysetPage(
    afterCursor(
      db
        .selectFrom('webhook_endpoints')
        .selectAll()
        .where('partner_id', '=', scope.partnerId)
        .where('mode', '=', scope.mode)
        .where('deleted_at', 'is', null),
      query.cursor,
    ),
    limit,
  ).execute()
  const { items, nextCursor } = page(rows, limit)
  return { data: items.map(endpointJson), nextCursor }
}

/** Deletes the endpoint; its pending deliveries are marked failed and their jobs find nothing to do. */
export async function deleteEndpoint(db: Db, scope: Scope, id: string, now: Date) {
  const row = await findEndpoint(db, scope, id)
  // Under an Idempotency-Key `db` is already the request's transaction (kysely does not nest them).
  await inTransaction(db, async (trx) => {
    await trx.updateTable('webhook_endpoints').set({ deleted_at: now }).where('id', '=', row.id).execute()
    await trx
      .updateTable('webhook_deliveries')
      .set({
        state: 'failed',
        last_error: 'The endpoint was deleted.',
        next_attempt_at: null,
        updated_at: now,
      })
      .where('endpoint_id', '=', row.id)
      .where('state', '=', 'pending')
      .execute()
  })
  return { id: row.id, deleted: true as const }
}

/** A new secret; the one it replaces keeps signing (as a second signature) for `rotationOverlapMs`. */
export async function rotateSecret(
  db: Db,
  config: ServerConfig,
  scope: Scope,
  id: string,
  now: Date,
): Promise<{ secret: string }> {
  const row = await findEndpoint(db, scope, id)
  const secret = newWebhookSecret()
  await db
    .updateTable('webhook_endpoints')
    .set({
      secret: sealSecret(configuredSecretBox(config), secret),
      previous_secret: row.secret,
      previous_secret_expires_at: new Date(now.getTime() + rotationOverlapMs),
    })
    .where('id', '=', row.id)
    .execute()
  return { secret }
}

export async function listDeliveries(
  db: Db,
  scope: Scope,
  endpointId: string,
  query: { limit?: number | undefined; cursor?: string | undefined },
) {
  const endpoint = await findEndpoint(db, scope, endpointId)
  const limit = query.limit ?? 20
  const rows = await keysetPage(
    afterCursor(
      db.selectFrom('webhook_deliveries').selectAll().where('endpoint_id', '=', endpoint.id),
      query.cursor,
    ),
    limit,
  ).execute()
  const { items, nextCursor } = page(rows, limit)
  return { data: items.map(deliveryJson), nextCursor }
}

/**
 * One attempt now, answered with the delivery as it stands after it. A delivery the schedule gave up
 * on becomes `succeeded` when this attempt is; a pending one keeps its schedule if it is not.
 */
async function attemptNow(
  db: Db,
  config: ServerConfig,
  delivery: DeliveryRow,
  endpoint: EndpointRow,
  now: Date,
): Promise<WebhookDelivery> {
  const result = await sendDelivery(delivery, endpoint, config, now)
  const delivered = isDelivered(result)
  const row = await recordAttempt(db, delivery.id, result, {
    state: delivered ? 'succeeded' : delivery.state,
    nextAttemptAt: delivered ? null : delivery.next_attempt_at,
    now,
  })
  return deliveryJson(row)
}

export async function retryDelivery(
  db: Db,
  config: ServerConfig,
  scope: Scope,
  endpointId: string,
  deliveryId: string,
  now: Date,
): Promise<WebhookDelivery> {
  const endpoint = await findEndpoint(db, scope, endpointId)
  const delivery = await db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('id', '=', deliveryId)
    .where('endpoint_id', '=', endpoint.id)
    .executeTakeFirst()
  if (!delivery) fail('webhook_delivery_not_found', 'Webhook delivery not found.', { deliveryId })
  return attemptNow(db, config, delivery, endpoint, now)
}

/**
 * A test event, sent now: a `payment.created` snapshot of a made-up payment with `live: false`. It is
 * recorded as a delivery of the endpoint (listed, retryable) but has no automatic retries.
 */
export async function sendTestEvent(
  db: Db,
  config: ServerConfig,
  scope: Scope,
  endpointId: string,
  now: Date,
): Promise<WebhookDelivery> {
  const endpoint = await findEndpoint(db, scope, endpointId)
  const eventId = newId('event')
  const at = now.toISOString()
  const body = JSON.stringify({
    id: eventId,
    type: 'payment.created',
    api_version: webhookApiVersion,
    created_at: at,
    data: {
      payment_id: newId('payment'),
      merchant_id: 'mrch_test_webhook',
      live: false,
      payment_state_version: 0,
      reference_id: 'test_webhook',
      status: 'requires_action',
      amount: { unit: 'iso4217/USD', value: '1000' },
      created_at: at,
      expires_at: new Date(now.getTime() + 15 * 60_000).toISOString(),
      processing: null,
      success: null,
      failed: null,
      cancelled: null,
      expired: null,
      settled: null,
    },
  })
  const delivery = await db
    .insertInto('webhook_deliveries')
    .values({
      id: newId('webhookDelivery'),
      endpoint_id: endpoint.id,
      event_id: eventId,
      event_type: 'payment.created',
      payment_id: null,
      body,
      state: 'failed',
      next_attempt_at: null,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow()
  return attemptNow(db, config, delivery, endpoint, now)
}
