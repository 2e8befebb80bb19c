/** Payment-row reads and writes shared by the live chains' jobs (evm/, solana/). */
import type { Db } from '../store/db.js'
import type { PaymentRow } from '../store/schema.js'

/** The payment a job belongs to (jobs reference their payment, so it exists). */
export async function loadPayment(db: Db, paymentId: string): Promise<PaymentRow> {
  return db.selectFrom('payments').selectAll().where('id', '=', paymentId).executeTakeFirstOrThrow()
}

/** Records a landed settlement on its payment; a settlement already final is left as it is. */
export async function markSettled(db: Db, paymentId: string, txId: string, assetId: string): Promise<void> {
  await db
    .updateTable('payments')
    .set({
      settlement_status: 'succeeded',
      settlement_tx_id: txId,
      settlement_unit: `caip19/${assetId}`,
      updated_at: new Date(),
    })
    .where('id', '=', paymentId)
    .where('settlement_status', '=', 'pending')
    .execute()
}
