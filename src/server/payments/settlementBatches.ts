import { sql } from 'kysely'
import { closedEntriesCte, settledEntriesCte } from '../ledger/entries.js'
import { fixSettlementAmounts } from '../refunds/settlement.js'
import { type Db, inTransaction } from '../store/db.js'
import { settlePayments } from './lifecycle.js'
import './settlementSchema.js'

/**
 * A closed settlement batch: what its one transfer pays (`amount`: the sum of its payments' amounts,
 * fixed when it closed) and to whom. `succeeded`: nothing left to send (its transfer landed, or
 * refunds took every amount).
 */
export interface ClosedSettlementBatch {
  id: string
  chain: string
  asset: string
  destination: string
  /** The batch's first payment: its job and transactions are recorded under it. */
  paymentId: string
  status: 'closed' | 'succeeded'
  amount: bigint
  txId: string | null
  /** The payments the transfer settles (an amount refunds took whole was settled at the close). */
  paymentIds: string[]
}

interface BatchRow {
  id: string
  chain_id: string
  asset: string
  destination: string
  payment_id: string
  status: 'open' | 'closed' | 'succeeded'
  amount: string | null
  tx_id: string | null
}

/**
 * Closes the batch (no item joins it after this) and fixes what it pays, in one database transaction:
 * each payment's amount less the refunds recorded before (fixSettlementAmounts, under the payments' row
 * locks, so a refund recorded later is paid from the float), the payments left with nothing settled at
 * once, the sum recorded on the batch. Before its transfer is first signed; a batch already closed is
 * read as it was closed, so the transfer never changes between attempts.
 */
export async function closeSettlementBatch(
  db: Db,
  batchId: string,
  params: { assetId: (chain: string, asset: string) => string; now: Date },
): Promise<ClosedSettlementBatch> {
  return inTransaction(db, async (trx) => {
    const { rows } = await sql<BatchRow>`
      SELECT id, chain_id, asset, destination, payment_id, status, amount, tx_id
      FROM settlement_batches WHERE id = ${batchId} FOR UPDATE`.execute(trx)
    const batch = rows[0]
    if (!batch) throw new Error(`Settlement batch ${batchId} does not exist.`)
    const { rows: items } = await sql<{ payment_id: string; amount: string; fee: string; refunded: string }>`
      SELECT i.payment_id, i.amount, i.fee, (SELECT coalesce(sum(r.asset_value), 0) FROM refunds AS r
        WHERE r.payment_id = i.payment_id AND r.status <> 'failed' AND r.paid_from = 'collected') AS refunded
      FROM settlement_items AS i WHERE i.batch_id = ${batchId} ORDER BY i.payment_id`.execute(trx)
    const amounts = await fixSettlementAmounts(
      trx,
      items.map((item) => ({ paymentId: item.payment_id, collected: BigInt(item.amount) })),
      params.now,
    )
    const paying = items.map((item) => item.payment_id).filter((id) => amounts.get(id)! > 0n)
    const closed = (status: ClosedSettlementBatch['status'], amount: bigint): ClosedSettlementBatch => ({
      id: String(batch.id),
      chain: batch.chain_id,
      asset: batch.asset,
      destination: batch.destination,
      paymentId: batch.payment_id,
      status,
      amount,
      txId: batch.tx_id,
      paymentIds: paying,
    })
    if (batch.status !== 'open') return closed(batch.status, BigInt(batch.amount ?? 0))
    const emptied = items.map((item) => item.payment_id).filter((id) => amounts.get(id) === 0n)
    await settlePayments(trx, {
      paymentIds: emptied,
      txId: null,
      assetId: params.assetId(batch.chain_id, batch.asset),
      now: params.now,
    })
    const amount = paying.reduce((sum, id) => sum + amounts.get(id)!, 0n)
    const status = amount === 0n ? 'succeeded' : 'closed'
    // The ledger's entries in the same statement: what the batch pays moves from each merchant's
    // collected balance to settling, and the fee left after refunds to its partner's fees.
    const closing = JSON.stringify(
      items.map((item) => {
        const settled = amounts.get(item.payment_id)!
        const left = BigInt(item.amount) + BigInt(item.fee) - BigInt(item.refunded)
        return { payment_id: item.payment_id, settled: String(settled), kept: String(left - settled) }
      }),
    )
    await sql`
      WITH closing AS (
        SELECT * FROM jsonb_to_recordset(${closing}::jsonb) AS v(payment_id text, settled text, kept text)
      ), ledger AS (${closedEntriesCte({ batchId, now: params.now })})
      UPDATE settlement_batches SET status = ${status}, amount = ${amount.toString()}, updated_at = ${params.now}
      WHERE id = ${batchId}`.execute(trx)
    return closed(status, amount)
  })
}

/**
 * The batch's transfer `txId` landed: the batch succeeded and each of its payments is settled with that
 * transaction and its own amount, in one database transaction.
 */
export async function finishSettlementBatch(
  db: Db,
  batch: ClosedSettlementBatch,
  params: { txId: string; assetId: string; now: Date },
): Promise<void> {
  await inTransaction(db, async (trx) => {
    // What the batch's close put in settling leaves for the world, in the same statement.
    await sql`
      WITH finished AS (
        UPDATE settlement_batches SET status = 'succeeded', tx_id = ${params.txId}, updated_at = ${params.now}
        WHERE id = ${batch.id} AND status = 'closed' RETURNING id
      ), ledger AS (${settledEntriesCte({ batchId: batch.id, txId: params.txId, now: params.now })})
      SELECT 1`.execute(trx)
    await settlePayments(trx, { paymentIds: batch.paymentIds, ...params })
  })
}
