import { sql } from 'kysely'
import { newId } from '../ids.js'
import { listenForJobs } from '../jobs/notify.js'
import type { JobLogger } from '../jobs/runner.js'
import { onWake } from '../jobs/wake.js'
import { type Db, newTransaction } from '../store/db.js'
import type { Mode } from '../store/schema.js'
import { webhookJobKind } from './deliver.js'
import { renderPaymentEvent } from './payload.js'

/** The NOTIFY payload (on the jobs channel) of a committed payment event; see migration 009. */
export const dispatchWakeKind = 'webhook.dispatch'

/**
 * Turns outbox rows (`payment_events` not yet dispatched) into deliveries: one per endpoint of the
 * payment's partner and mode that enabled the event's type, each with the rendered body and its job,
 * and marks the events dispatched, all in one transaction. Rows are claimed with FOR UPDATE SKIP LOCKED,
 * so any number of instances dispatch together; a crash before commit leaves the events to the next run.
 * Returns how many events it handled.
 */
export async function dispatchPaymentEvents(db: Db, options: { now: Date; limit?: number }): Promise<number> {
  const { now } = options
  return newTransaction(db, async (trx) => {
    const events = await trx
      .selectFrom('payment_events')
      .select(['id', 'payment_id', 'type', 'created_at', 'snapshot'])
      .where('dispatched_at', 'is', null)
      // One change's steps share a time (test mode's confirm: processing, succeeded, settled): in order.
      .orderBy('created_at')
      .orderBy('payment_state_version')
      .limit(options.limit ?? 200)
      .forUpdate()
      .skipLocked()
      .execute()
    if (events.length === 0) return 0
    const partners = [...new Set(events.map((e) => String(e.snapshot.partner_id)))]
    const endpoints = await trx
      .selectFrom('webhook_endpoints')
      .select(['id', 'partner_id', 'mode', 'enabled_events'])
      .where('deleted_at', 'is', null)
      .where('partner_id', 'in', partners)
      .execute()
    const deliveries = events.flatMap((event) => {
      const subscribed = endpoints.filter(
        (e) =>
          e.partner_id === event.snapshot.partner_id &&
          e.mode === (event.snapshot.mode as Mode) &&
          (e.enabled_events as string[]).includes(event.type),
      )
      if (subscribed.length === 0) return []
      const body = renderPaymentEvent(event)
      return subscribed.map((endpoint) => ({
        id: newId('webhookDelivery'),
        endpoint_id: endpoint.id,
        event_id: event.id,
        event_type: event.type,
        payment_id: event.payment_id,
        body,
        state: 'pending' as const,
        next_attempt_at: now,
        created_at: now,
        updated_at: now,
      }))
    })
    if (deliveries.length > 0) {
      const created = await trx
        .insertInto('webhook_deliveries')
        .values(deliveries)
        .onConflict((oc) => oc.columns(['endpoint_id', 'event_id']).doNothing())
        .returning(['id', 'payment_id'])
        .execute()
      if (created.length > 0) {
        await trx
          .insertInto('jobs')
          .values(
            created.map((d) => ({
              kind: webhookJobKind,
              payment_id: d.payment_id!,
              delivery_id: d.id,
              run_at: now,
              locked_until: null,
              payload: '{}',
              result: null,
              last_error: null,
              created_at: now,
              updated_at: now,
            })),
          )
          .execute()
        await sql`SELECT pg_notify('caipay_jobs', ${webhookJobKind})`.execute(trx)
      }
    }
    await trx
      .updateTable('payment_events')
      .set({ dispatched_at: now })
      .where(
        'id',
        'in',
        events.map((e) => e.id),
      )
      .execute()
    return events.length
  })
}

export interface WebhookDispatcher {
  /** Dispatches everything pending now; resolves with the number of events handled. */
  dispatchNow(): Promise<number>
  stop(): Promise<void>
}

/**
 * Runs the dispatcher: on every wake-up (a NOTIFY from a committed state change, an in-process wake
 * from payment creation) and every `intervalMs` (the safety net: other instances' creations, a lost
 * notification).
 */
export function startWebhookDispatcher(options: {
  db: Db
  now?: () => Date
  intervalMs?: number
  listenUrl?: string
  log?: JobLogger
}): WebhookDispatcher {
  const now = options.now ?? (() => new Date())
  const batch = 200
  let running: Promise<number> | undefined
  let again = false
  let stopped = false
  const dispatchNow = (): Promise<number> => {
    if (running) {
      again = true
      return running
    }
    running = (async () => {
      let total = 0
      do {
        again = false
        for (;;) {
          const handled = await dispatchPaymentEvents(options.db, { now: now(), limit: batch })
          total += handled
          // A short batch took all there was: no second transaction to find nothing (a wake-up that
          // arrived meanwhile set `again`).
          if (handled < batch || stopped) break
        }
      } while (again && !stopped)
      return total
    })().finally(() => {
      running = undefined
    })
    return running
  }
  const kick = () => {
    if (!stopped)
      dispatchNow().catch((error: unknown) =>
        options.log?.warn({ error: String(error) }, 'Webhook dispatch failed'),
      )
  }
  const timer = setInterval(kick, options.intervalMs ?? 250)
  timer.unref()
  const stopWake = onWake(kick)
  const listener = options.listenUrl
    ? listenForJobs({
        connectionString: options.listenUrl,
        onJob: (kind) => {
          if (kind === dispatchWakeKind) kick()
        },
        onError: (error) => options.log?.warn({ error: String(error) }, 'Webhook notifications interrupted'),
      })
    : undefined
  kick()
  return {
    dispatchNow,
    async stop() {
      stopped = true
      clearInterval(timer)
      stopWake()
      await listener?.close()
      await running?.catch(() => {})
    },
  }
}
