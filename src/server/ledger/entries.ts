import { sql } from 'kysely'
import { canonicalCaip, formatAccountId } from '../../caip/caip.js'
import type { Db } from '../store/db.js'
import './schema.js'

/**
 * The entries each money-moving change of the payments domain writes, as SQL the change's own statement
 * carries (a CTE) where it can, so the ledger costs no extra round trip (docs/live-mode.md, "The
 * ledger"). Refunds' entries are written by triggers on `refunds` (migration 018). Every write is
 * ON CONFLICT DO NOTHING on the entry's identity, so a step that runs again writes nothing twice.
 */

/** The account key of a holding address: CAIP-10, canonical (EVM addresses folded). */
export function holderOf(chainId: string, address: string): string {
  return canonicalCaip(formatAccountId(chainId, address))
}

/** Where a payment's money arrived, for its `payment.collected` entry. */
export interface Collection {
  /** CAIP-10 of the collection address (holderOf). */
  holder: string
  /** Token minor units the service keeps of it (the settlement fee); the rest is the merchant's. */
  fee?: bigint | undefined
}

/**
 * The `payment.collected` entries of settlement items (world -> the merchant's collected: the item's
 * amount plus its fee), as a CTE over `items` (a CTE with payment_id, amount and fee columns).
 */
export function collectedEntriesCte(params: { asset: string; holder: string | undefined; now: Date }) {
  if (params.holder === undefined) return sql`SELECT 1`
  return sql`INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner,
      amount, flow, payment_id, created_at)
    SELECT p.mode, ${canonicalCaip(params.asset)}, ${params.holder}, 'world', '', 'collected', p.merchant_id,
      v.amount::numeric + v.fee::numeric, 'payment.collected', p.id, ${params.now}::timestamptz
    FROM ledger_items AS v JOIN payments AS p ON p.id = v.payment_id
    ON CONFLICT DO NOTHING`
}

/** A payment's money at the collection address with no settlement step to pay it on. */
export interface UnsettledCollection {
  asset: string
  holder: string
  /** Token minor units collected. */
  value: bigint
}

/**
 * A payment the service collected with no settlement step (its merchant has no destination for the
 * asset): the money stays at the collection address as its partner's float, which is also what pays
 * that payment's refunds (refunds/create.ts: no settlement -> float). One statement for a group.
 */
export async function bookUnsettledCollections(
  db: Db,
  payments: readonly (UnsettledCollection & { paymentId: string })[],
  now: Date,
): Promise<void> {
  if (payments.length === 0) return
  const values = JSON.stringify(
    payments.map((p) => ({
      payment_id: p.paymentId,
      asset: canonicalCaip(p.asset),
      holder: p.holder,
      value: p.value.toString(),
    })),
  )
  await sql`INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner,
      amount, flow, payment_id, created_at)
    SELECT p.mode, v.asset, v.holder, 'world', '', 'float', p.partner_id, v.value::numeric,
      'payment.collected', p.id, ${now}::timestamptz
    FROM jsonb_to_recordset(${values}::jsonb) AS v(payment_id text, asset text, holder text, value text)
    JOIN payments AS p ON p.id = v.payment_id
    WHERE v.value::numeric > 0
    ON CONFLICT DO NOTHING`.execute(db)
}

/**
 * The entries of a settlement batch's close, as a CTE over `closing` (payment_id, settled: what the
 * batch pays for it, kept: its share of the fee left after refunds): per merchant, collected ->
 * settling; per partner, collected -> fees. Each payment's holder and asset are its collection entry's.
 * The CHECK on balances makes a close that would pay more than the merchant's collected balance fail.
 */
export function closedEntriesCte(params: { batchId: string; now: Date }) {
  return sql`INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner,
      amount, flow, batch_id, created_at)
    SELECT c.mode, c.asset, c.holder, 'collected', c.credit_owner, m.kind,
      CASE WHEN m.kind = 'settling' THEN c.credit_owner ELSE p.partner_id END,
      sum(m.amount), CASE WHEN m.kind = 'settling' THEN 'settlement.closed' ELSE 'fee' END,
      ${params.batchId}::bigint, ${params.now}::timestamptz
    FROM closing AS v
    JOIN ledger_entries AS c ON c.payment_id = v.payment_id AND c.flow = 'payment.collected'
      AND c.credit_kind = 'collected'
    JOIN payments AS p ON p.id = v.payment_id
    CROSS JOIN LATERAL (VALUES ('settling', v.settled::numeric), ('fees', v.kept::numeric)) AS m(kind, amount)
    WHERE m.amount > 0
    GROUP BY c.mode, c.asset, c.holder, c.credit_owner, m.kind, p.partner_id
    ON CONFLICT DO NOTHING`
}

/** The entries of a batch's mined transfer: what its close put in settling leaves for the world. */
export function settledEntriesCte(params: { batchId: string; txId: string; now: Date }) {
  return sql`INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner,
      amount, flow, batch_id, tx_id, created_at)
    SELECT e.mode, e.asset, e.holder, 'settling', e.credit_owner, 'world', '', e.amount, 'settlement.paid',
      e.batch_id, ${params.txId}, ${params.now}::timestamptz
    FROM ledger_entries AS e
    WHERE e.batch_id = ${params.batchId}::bigint AND e.flow = 'settlement.closed' AND EXISTS (SELECT 1 FROM finished)
    ON CONFLICT DO NOTHING`
}
