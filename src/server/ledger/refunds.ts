import { sql } from 'kysely'
import { canonicalCaip } from '../../caip/caip.js'
import type { RefundRow } from '../refunds/schema.js'
import type { Db } from '../store/db.js'
import './schema.js'

export type Reservation = 'reserved' | 'short'

/**
 * Before a refund's transfer is first signed: what it sends is taken from the ledger, so nothing is sent
 * that the service does not hold for it. A refund asked from the collected funds already took its
 * amount from the merchant's collected balance when it was recorded (the refunds trigger); a refund
 * from the float takes it now, in one statement, from its partner's float, or, when that cannot cover
 * it, from the operator's unallocated top-ups (docs/refunds.md, "The float"). Neither covering it: `short`,
 * nothing written, and the caller sends nothing. Written once (a run again finds it reserved).
 */
export async function reserveRefund(
  db: Db,
  refund: Pick<RefundRow, 'id' | 'payment_id' | 'partner_id' | 'merchant_id' | 'mode' | 'paid_from'> & {
    asset: string
    asset_value: string
  },
  holder: string,
  now: Date,
): Promise<Reservation> {
  // Taken from the collected or authorized balance when it was recorded (the refunds trigger).
  if (refund.paid_from !== 'float') return 'reserved'
  const asset = canonicalCaip(refund.asset)
  try {
    const { rows } = await sql<{ reserved: boolean }>`
      WITH source AS (
        SELECT kind, owner FROM ledger_accounts
        WHERE mode = ${refund.mode} AND asset = ${asset} AND holder = ${holder}
          AND ((kind = 'float' AND owner = ${refund.partner_id}) OR (kind = 'unallocated' AND owner = ''))
          AND balance >= ${refund.asset_value}::numeric
          AND NOT EXISTS (SELECT 1 FROM ledger_entries WHERE refund_id = ${refund.id} AND flow = 'refund.reserved')
        ORDER BY kind = 'float' DESC LIMIT 1
        FOR UPDATE
      ), reserved AS (
        INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner,
          amount, flow, payment_id, refund_id, created_at)
        SELECT ${refund.mode}, ${asset}, ${holder}, source.kind, source.owner, 'refunds', ${refund.merchant_id},
          ${refund.asset_value}::numeric, 'refund.reserved', ${refund.payment_id}, ${refund.id}, ${now}::timestamptz
        FROM source
        ON CONFLICT DO NOTHING
        RETURNING id
      )
      SELECT EXISTS (SELECT 1 FROM reserved)
        OR EXISTS (SELECT 1 FROM ledger_entries WHERE refund_id = ${refund.id} AND flow = 'refund.reserved')
        AS reserved`.execute(db)
    return rows[0]?.reserved ? 'reserved' : 'short'
  } catch (error) {
    // Another refund took the balance between the read and the write: the CHECK refused this one.
    if ((error as { code?: string }).code === '23514') return 'short'
    throw error
  }
}
