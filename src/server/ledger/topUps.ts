import { sql } from 'kysely'
import { canonicalCaip } from '../../caip/caip.js'
import { fail } from '../errors.js'
import type { Db } from '../store/db.js'
import type { Mode } from '../store/schema.js'
import './schema.js'

/**
 * Top-ups: what arrives at the collection address that no payment explains (the operator funding the
 * float). The collection address is shared by every partner and a token transfer names no partner, so a
 * top-up is credited to the operator's `unallocated` account; `caipay ledger allocate` gives part of it
 * to a partner's float (earmarked: only that partner's refunds draw on it). A refund its partner's float
 * cannot cover draws on what is unallocated (docs/refunds.md, "The float").
 */

/** Where the scan of a holding address's incoming transfers stopped (undefined: never scanned). */
export async function scannedTo(db: Db, holder: string, asset: string): Promise<bigint | undefined> {
  const row = await db
    .selectFrom('ledger_scans')
    .select('block')
    .where('holder', '=', holder)
    .where('asset', '=', canonicalCaip(asset))
    .executeTakeFirst()
  return row ? BigInt(row.block) : undefined
}

/**
 * Credits the unexplained transfers found up to `block` (each once: its transaction and log index are the
 * entry's tx_id) and moves the scan's cursor there, in one statement.
 */
export async function creditTopUps(
  db: Db,
  params: {
    mode: Mode
    holder: string
    asset: string
    block: bigint
    transfers: readonly { txId: string; value: bigint }[]
    now: Date
  },
): Promise<void> {
  const asset = canonicalCaip(params.asset)
  const values = JSON.stringify(params.transfers.map((t) => ({ tx_id: t.txId, value: t.value.toString() })))
  await sql`
    WITH credited AS (
      INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner,
        amount, flow, tx_id, created_at)
      SELECT ${params.mode}, ${asset}, ${params.holder}, 'world', '', 'unallocated', '', v.value::numeric,
        'topup', v.tx_id, ${params.now}::timestamptz
      FROM jsonb_to_recordset(${values}::jsonb) AS v(tx_id text, value text)
      WHERE v.value::numeric > 0
      ON CONFLICT DO NOTHING
    )
    INSERT INTO ledger_scans (holder, asset, block, updated_at)
    VALUES (${params.holder}, ${asset}, ${params.block}, ${params.now})
    ON CONFLICT (holder, asset) DO UPDATE SET block = greatest(ledger_scans.block, excluded.block),
      updated_at = excluded.updated_at`.execute(db)
}

/**
 * Gives `amount` of the operator's unallocated top-ups at `holder` to a partner's float (an operator's
 * step, `caipay ledger allocate`). More than is unallocated: `409 insufficient_funds`.
 */
export async function allocateFloat(
  db: Db,
  params: { mode: Mode; holder: string; asset: string; partnerId: string; amount: bigint; now: Date },
): Promise<void> {
  const asset = canonicalCaip(params.asset)
  try {
    await sql`INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner,
        amount, flow, tx_id, created_at)
      VALUES (${params.mode}, ${asset}, ${params.holder}, 'unallocated', '', 'float', ${params.partnerId},
        ${params.amount}, 'float.allocated', ${`allocation:${params.now.toISOString()}:${crypto.randomUUID()}`},
        ${params.now})`.execute(db)
  } catch (error) {
    if ((error as { code?: string }).code === '23514')
      fail('invalid_state', `Less than ${params.amount} of ${asset} is unallocated at ${params.holder}.`)
    throw error
  }
}
