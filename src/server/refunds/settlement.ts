import { sql } from 'kysely'
import { type Db, inTransaction } from '../store/db.js'

/**
 * What a payment's settlement pays the merchant: what was collected for it (less the fee) less the
 * refunds already paid from those collected funds, fixed once (settlement_amounts) under the payment's
 * row lock, before the settlement's transaction is first signed. A refund recorded after that is paid
 * from the collection address's float (refunds/create.ts reads the same row), so the merchant is never
 * paid what went back to the buyer, and no refund is counted twice.
 */
export async function fixSettlementAmount(
  db: Db,
  paymentId: string,
  collected: bigint,
  now: Date,
): Promise<bigint> {
  return inTransaction(db, async (trx) => {
    await sql`SELECT 1 FROM payments WHERE id = ${paymentId} FOR UPDATE`.execute(trx)
    const fixed = await trx
      .selectFrom('settlement_amounts')
      .select('value')
      .where('payment_id', '=', paymentId)
      .executeTakeFirst()
    if (fixed) return BigInt(fixed.value)
    const refunded = await trx
      .selectFrom('refunds')
      .select((eb) => eb.fn.coalesce(eb.fn.sum<string>('asset_value'), eb.val('0')).as('value'))
      .where('payment_id', '=', paymentId)
      .where('status', '<>', 'failed')
      .where('paid_from', '=', 'collected')
      .executeTakeFirstOrThrow()
    const left = collected - BigInt(refunded.value)
    const value = left > 0n ? left : 0n
    await trx
      .insertInto('settlement_amounts')
      .values({ payment_id: paymentId, value, created_at: now })
      .execute()
    return value
  })
}
