import { sql } from 'kysely'
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
    const items = await trx
      .selectFrom('settlement_items')
      .select(['payment_id', 'amount'])
      .where('batch_id', '=', batchId)
      .orderBy('payment_id')
      .execute()
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
    await trx
      .updateTable('settlement_batches')
      .set({ status, amount: amount.toString(), updated_at: params.now })
      .where('id', '=', batchId)
      .execute()
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
    await trx
      .updateTable('settlement_batches')
      .set({ status: 'succeeded', tx_id: params.txId, updated_at: params.now })
      .where('id', '=', batch.id)
      .where('status', '=', 'closed')
      .execute()
    await settlePayments(trx, { paymentIds: batch.paymentIds, ...params })
  })
}
