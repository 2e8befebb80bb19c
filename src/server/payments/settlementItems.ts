import { sql } from 'kysely'
import { enqueueJob } from '../jobs/queue.js'
import { collectedEntriesCte } from '../ledger/entries.js'
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
  /**
   * CAIP-10 of the collection address the payment's money reached (ledger/entries.ts holderOf): its
   * `payment.collected` entry is written with the item. Absent: no entry (a job queued before the ledger).
   */
  holder?: string | undefined
  /** Token minor units of the payment the service keeps (the settlement fee), on top of `amount`. */
  fee?: bigint | undefined
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
  return (await addSettlementItems(db, [params], params.now)).get(params.paymentId)!
}

/**
 * addSettlementItem for several payments, one statement per destination and asset; by payment, the
 * batch each joined and whether it opened it (the first of its group, when there was no open batch).
 */
export async function addSettlementItems(
  db: Db,
  items: readonly (BatchedSettlement & { paymentId: string })[],
  now: Date,
): Promise<Map<string, { batchId: string; opened: boolean }>> {
  const byBatch = new Map<string, (BatchedSettlement & { paymentId: string })[]>()
  for (const item of items) {
    const key = JSON.stringify([item.chain, item.asset, item.destination])
    byBatch.set(key, [...(byBatch.get(key) ?? []), item])
  }
  const added = new Map<string, { batchId: string; opened: boolean }>()
  for (const group of byBatch.values()) {
    const first = group[0]!
    const closeAt = new Date(now.getTime() + first.intervalMs)
    const values = JSON.stringify(
      group.map((item) => ({
        payment_id: item.paymentId,
        amount: item.amount.toString(),
        fee: (item.fee ?? 0n).toString(),
      })),
    )
    const { rows } = await sql<{ id: string; payment_id: string }>`
      WITH batch AS (
        INSERT INTO settlement_batches
          (chain_id, asset, destination, payment_id, status, close_at, created_at, updated_at)
        VALUES (${first.chain}, ${first.asset}, ${first.destination}, ${first.paymentId}, 'open',
          ${closeAt}, ${now}, ${now})
        ON CONFLICT (chain_id, asset, destination) WHERE status = 'open'
          DO UPDATE SET updated_at = excluded.updated_at
        RETURNING id, payment_id
      ), ledger_items AS (
        SELECT * FROM jsonb_to_recordset(${values}::jsonb) AS v(payment_id text, amount text, fee text)
      ), item AS (
        INSERT INTO settlement_items (payment_id, batch_id, amount, fee, created_at)
        SELECT v.payment_id, batch.id, v.amount::numeric, v.fee::numeric, ${now}
        FROM batch CROSS JOIN ledger_items AS v
      ), ledger AS (${collectedEntriesCte({ asset: first.asset, holder: first.holder, now })})
      SELECT id, payment_id FROM batch`.execute(db)
    const batch = rows[0]!
    const opened = batch.payment_id === first.paymentId
    if (opened) {
      const payload: SettlementBatchPayload = { batchId: String(batch.id) }
      await enqueueJob(db, { kind: first.jobKind, paymentId: first.paymentId, payload, runAt: closeAt, now })
    }
    for (const item of group)
      added.set(item.paymentId, { batchId: String(batch.id), opened: opened && item === first })
  }
  return added
}
