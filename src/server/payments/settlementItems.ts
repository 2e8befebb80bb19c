import { sql } from 'kysely'
import { enqueueJob } from '../jobs/queue.js'
import type { Db } from '../store/db.js'

/**
 * A payment's settlement as an item of a batch (any chain): the merchant's destination on `chain` gets
 * `amount` of `asset` in the batch's one transfer, less what refunds take before the batch closes.
 */
export interface BatchedSettlement {
  /** CAIP-2. */
  chain: string
  /** The asset as the chain's configuration names it. */
  asset: string
  destination: string
  /** Token minor units collected for the merchant (after the fee), before refunds. */
  amount: bigint
  /** How long a batch stays open after its first item. */
  intervalMs: number
  /** The job that closes and pays a batch, queued under the batch's first payment. */
  jobKind: string
}

/** The job payload of a settlement batch. */
export interface SettlementBatchPayload {
  batchId: string
}

/**
 * Adds the payment's settlement to the open batch of its destination and asset, opening one (and queuing
 * its job for when it closes) when there is none. In the caller's transaction, which succeeds the
 * payment: the item exists exactly when the payment's settlement is pending. The open batch's row is
 * locked until that transaction ends, so a batch closing meanwhile waits for it (and counts the item),
 * or has closed first (and the item opens the next batch).
 */
export async function addSettlementItem(
  db: Db,
  params: BatchedSettlement & { paymentId: string; now: Date },
): Promise<{ batchId: string; opened: boolean }> {
  const { now } = params
  const closeAt = new Date(now.getTime() + params.intervalMs)
  const { rows } = await sql<{ id: string; payment_id: string }>`
    WITH batch AS (
      INSERT INTO settlement_batches
        (chain_id, asset, destination, payment_id, status, close_at, created_at, updated_at)
      VALUES (${params.chain}, ${params.asset}, ${params.destination}, ${params.paymentId}, 'open',
        ${closeAt}, ${now}, ${now})
      ON CONFLICT (chain_id, asset, destination) WHERE status = 'open'
        DO UPDATE SET updated_at = excluded.updated_at
      RETURNING id, payment_id
    ), item AS (
      INSERT INTO settlement_items (payment_id, batch_id, amount, created_at)
      SELECT ${params.paymentId}, id, ${params.amount.toString()}, ${now} FROM batch
    )
    SELECT id, payment_id FROM batch`.execute(db)
  const batch = rows[0]!
  const opened = batch.payment_id === params.paymentId
  if (opened) {
    const payload: SettlementBatchPayload = { batchId: String(batch.id) }
    await enqueueJob(db, { kind: params.jobKind, paymentId: params.paymentId, payload, runAt: closeAt, now })
  }
  return { batchId: String(batch.id), opened }
}
