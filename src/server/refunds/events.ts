import { sql } from 'kysely'
import type { Db } from '../store/db.js'
import type { RefundRow } from './schema.js'

export type RefundEventType = 'refund.created' | 'refund.succeeded' | 'refund.failed'

/**
 * Writes a refund event to the payments outbox (payment_events), which the webhook dispatcher delivers
 * like a payment's: the event's snapshot is the refund row (with the partner and mode the outbox's
 * triggers route by), and, as every outbox row is one version of its payment, the payment's
 * `payment_state_version` steps by one (the snapshot carries the version, so receivers order a
 * payment's and its refunds' events alike). Run it in the transaction that changed the refund.
 */
export async function recordRefundEvent(
  db: Db,
  refund: RefundRow,
  type: RefundEventType,
  now: Date,
): Promise<void> {
  const snapshot = JSON.stringify({ object: 'refund', ...refund })
  await sql`
    WITH bumped AS (
      UPDATE payments SET payment_state_version = payment_state_version + 1
      WHERE id = ${refund.payment_id}
      RETURNING id, payment_state_version
    )
    INSERT INTO payment_events (payment_id, type, payment_state_version, snapshot, created_at)
    SELECT id, ${type}, payment_state_version,
      ${snapshot}::jsonb || jsonb_build_object('payment_state_version', payment_state_version),
      ${now}::timestamptz
    FROM bumped`.execute(db)
}
