import { sql } from 'kysely'
import type { subscriptionEventTypes } from '../../contract/webhooks.js'
import type { Db } from '../store/db.js'
import type { SubscriptionRow } from './schema.js'

export type SubscriptionEventType = (typeof subscriptionEventTypes)[number]

/**
 * Writes a subscription event to the payments outbox (payment_events), as refunds do (refunds/events.ts):
 * the event is a version of one of the subscription's payments (the period it is about), whose
 * `payment_state_version` steps by one; the snapshot is the subscription row (its partner and mode route
 * it) with that payment's id. Run it in the transaction that changed the subscription.
 */
export async function recordSubscriptionEvent(
  db: Db,
  subscription: SubscriptionRow,
  type: SubscriptionEventType,
  paymentId: string,
  now: Date,
): Promise<void> {
  const snapshot = JSON.stringify({ object: 'subscription', ...subscription, payment_id: paymentId })
  await sql`
    WITH bumped AS (
      UPDATE payments SET payment_state_version = payment_state_version + 1
      WHERE id = ${paymentId}
      RETURNING id, payment_state_version
    )
    INSERT INTO payment_events (payment_id, type, payment_state_version, snapshot, created_at)
    SELECT id, ${type}, payment_state_version,
      ${snapshot}::jsonb || jsonb_build_object('payment_state_version', payment_state_version),
      ${now}::timestamptz
    FROM bumped`.execute(db)
}
