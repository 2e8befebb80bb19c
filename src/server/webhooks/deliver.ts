import type { Selectable } from 'kysely'
import type { WebhookDelivery } from '../../contract/webhooks.js'
import type { ServerConfig } from '../config.js'
import type { JobHandler } from '../jobs/runner.js'
import { countWebhookAttempt } from '../metrics/counters.js'
import { configuredSecretBox, openSecret, type SecretBox } from '../secrets.js'
import type { Db } from '../store/db.js'
import type { WebhookDeliveriesTable, WebhookEndpointsTable } from './schema.js'
import { type AttemptResult, postWebhook } from './send.js'
import { signedHeaders } from './signing.js'
import { parseWebhookUrl, resolveWebhookAddress } from './urlPolicy.js'

export type DeliveryRow = Selectable<WebhookDeliveriesTable>
export type EndpointRow = Selectable<WebhookEndpointsTable>

/** The job kind of a delivery's automatic attempts (one job per delivery, `jobs.delivery_id`). */
export const webhookJobKind = 'webhook.deliver'

/**
 * The first attempt runs at once; after a failure the next waits 5 s, 5 min, 30 min, 2 h, 5 h, 10 h,
 * 10 h: eight attempts over about 27.6 hours, then the delivery is `failed` (manual retry still works).
 */
export const webhookRetryDelaysMs = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000,
] as const
export const webhookMaxAttempts = webhookRetryDelaysMs.length + 1

/** Both secrets sign while a rotation's overlap lasts; stored sealed or not (secrets.ts). */
export function signingSecrets(endpoint: EndpointRow, now: Date, box: SecretBox | undefined): string[] {
  const previousLive =
    endpoint.previous_secret !== null &&
    endpoint.previous_secret_expires_at !== null &&
    endpoint.previous_secret_expires_at.getTime() > now.getTime()
  const stored = previousLive ? [endpoint.secret, endpoint.previous_secret!] : [endpoint.secret]
  return stored.map((secret) => openSecret(box, secret))
}

/**
 * One attempt: the URL is checked again (an endpoint's host may have moved to a private address since
 * registration) and the connection goes to the address just checked.
 */
export async function sendDelivery(
  delivery: DeliveryRow,
  endpoint: EndpointRow,
  config: ServerConfig,
  now: Date,
): Promise<AttemptResult> {
  const policy = { mode: endpoint.mode, allowPrivateUrls: config.webhooks.allowPrivateUrls }
  let url: URL
  let address: Awaited<ReturnType<typeof resolveWebhookAddress>>
  try {
    url = parseWebhookUrl(endpoint.url, policy)
    address = await resolveWebhookAddress(url, policy)
  } catch (error) {
    return { statusCode: null, error: `Refused: ${(error as Error).message}` }
  }
  return postWebhook({
    url,
    address,
    // svix-timestamp is the real time of the attempt: receivers compare it with their own clocks.
    headers: signedHeaders(
      signingSecrets(endpoint, now, configuredSecretBox(config)),
      delivery.event_id,
      delivery.body,
    ),
    body: delivery.body,
    timeoutMs: config.webhooks.timeoutMs,
  })
}

export const isDelivered = (result: AttemptResult) =>
  result.statusCode !== null && result.statusCode >= 200 && result.statusCode < 300

/** Writes an attempt's outcome; `state` and `nextAttemptAt` say what happens next. */
export async function recordAttempt(
  db: Db,
  deliveryId: string,
  result: AttemptResult,
  next: { state: DeliveryRow['state']; nextAttemptAt: Date | null; now: Date },
): Promise<DeliveryRow> {
  const row = await db
    .updateTable('webhook_deliveries')
    .set((eb) => ({
      attempts: eb('attempts', '+', 1),
      state: next.state,
      last_status_code: result.statusCode,
      last_error: result.error,
      next_attempt_at: next.nextAttemptAt,
      updated_at: next.now,
      ...(next.state === 'succeeded' ? { delivered_at: next.now } : {}),
    }))
    .where('id', '=', deliveryId)
    .returningAll()
    .executeTakeFirstOrThrow()
  countWebhookAttempt(next.state)
  return row
}

export async function findDelivery(
  db: Db,
  deliveryId: string,
): Promise<{ delivery: DeliveryRow; endpoint: EndpointRow } | undefined> {
  const delivery = await db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('id', '=', deliveryId)
    .executeTakeFirst()
  if (!delivery) return undefined
  const endpoint = await db
    .selectFrom('webhook_endpoints')
    .selectAll()
    .where('id', '=', delivery.endpoint_id)
    .executeTakeFirstOrThrow()
  return { delivery, endpoint }
}

/**
 * The automatic attempts of a delivery, as a job: a failed attempt throws, so the runner schedules the
 * next one by `webhookRetryDelaysMs` and gives up after `webhookMaxAttempts`. A job claimed again after a
 * crash attempts again (at least once); a delivery already done, or of a deleted endpoint, is skipped.
 * Each delivery is its own job, so a slow or dead endpoint never holds up another's deliveries.
 */
export function webhookDeliveryJob(config: ServerConfig): JobHandler {
  return {
    maxAttempts: webhookMaxAttempts,
    retryDelayMs: (attempts) => webhookRetryDelaysMs[Math.min(attempts, webhookRetryDelaysMs.length) - 1]!,
    async run(job, ctx) {
      const found = job.delivery_id ? await findDelivery(ctx.db, job.delivery_id) : undefined
      if (found?.delivery.state !== 'pending') return { skipped: found?.delivery.state ?? 'missing' }
      const { delivery, endpoint } = found
      const now = ctx.now()
      if (endpoint.deleted_at !== null) {
        await recordAttempt(
          ctx.db,
          delivery.id,
          { statusCode: null, error: 'The endpoint was deleted.' },
          { state: 'failed', nextAttemptAt: null, now },
        )
        return { skipped: 'endpoint deleted' }
      }
      const result = await sendDelivery(delivery, endpoint, config, now)
      if (isDelivered(result)) {
        await recordAttempt(ctx.db, delivery.id, result, { state: 'succeeded', nextAttemptAt: null, now })
        return { statusCode: result.statusCode }
      }
      const last = job.attempts >= webhookMaxAttempts
      const delay = webhookRetryDelaysMs[job.attempts - 1]
      await recordAttempt(ctx.db, delivery.id, result, {
        state: last ? 'failed' : 'pending',
        nextAttemptAt: last || delay === undefined ? null : new Date(now.getTime() + delay),
        now,
      })
      throw new Error(result.error ?? `HTTP ${result.statusCode}`)
    },
  }
}

export function deliveryJson(row: DeliveryRow): WebhookDelivery {
  return {
    id: row.id,
    eventId: row.event_id,
    eventType: row.event_type,
    status: row.state,
    attempts: row.attempts,
    lastStatusCode: row.last_status_code,
    lastError: row.last_error,
    nextAttemptAt: row.next_attempt_at?.toISOString() ?? null,
    createdAt: row.created_at.toISOString(),
  }
}
