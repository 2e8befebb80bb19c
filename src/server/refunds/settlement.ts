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
  return (await fixSettlementAmounts(db, [{ paymentId, collected }], now)).get(paymentId)!
}

/**
 * fixSettlementAmount for the payments of one settlement batch, in one database transaction: their rows
 * locked in id order (as any other locker of several), the amounts already fixed kept, the others fixed
 * now. Returns each payment's amount.
 */
export async function fixSettlementAmounts(
  db: Db,
  items: readonly { paymentId: string; collected: bigint }[],
  now: Date,
): Promise<Map<string, bigint>> {
  const ids = items.map((item) => item.paymentId).sort()
  if (ids.length === 0) return new Map()
  return inTransaction(db, async (trx) => {
    await sql`SELECT 1 FROM payments WHERE id = ANY(${ids}::text[]) ORDER BY id FOR UPDATE`.execute(trx)
    const fixed = await trx
      .selectFrom('settlement_amounts')
      .select(['payment_id', 'value'])
      .where('payment_id', 'in', ids)
      .execute()
    const amounts = new Map(fixed.map((row) => [row.payment_id, BigInt(row.value)]))
    const open = items.filter((item) => !amounts.has(item.paymentId))
    if (open.length === 0) return amounts
    const refunded = await trx
      .selectFrom('refunds')
      .select((eb) => ['payment_id', eb.fn.sum<string>('asset_value').as('value')])
      .where(
        'payment_id',
        'in',
        open.map((item) => item.paymentId),
      )
      .where('status', '<>', 'failed')
      .where('paid_from', '=', 'collected')
      .groupBy('payment_id')
      .execute()
    const refundedOf = new Map(refunded.map((row) => [row.payment_id, BigInt(row.value)]))
    const values = open.map((item) => {
      const left = item.collected - (refundedOf.get(item.paymentId) ?? 0n)
      const value = left > 0n ? left : 0n
      amounts.set(item.paymentId, value)
      return { payment_id: item.paymentId, value, created_at: now }
    })
    await trx.insertInto('settlement_amounts').values(values).execute()
    return amounts
  })
}
