import { settlementFor } from '../routes/settlements.js'
import type { Db } from '../store/db.js'

/**
 * The settlement columns of a test-mode payment: nothing moves, so a merchant with a crypto settlement
 * for the paid asset sees it completed at once, with a `test:` transaction id.
 */
export async function testSettlement(db: Db, payment: { id: string; merchant_id: string }, asset: string) {
  const settlement = await settlementFor(db, payment.merchant_id, asset)
  if (!settlement) return {}
  return {
    settlement_status: 'succeeded' as const,
    settlement_tx_id: `test:${payment.id}:settlement`,
    settlement_unit: `caip19/${settlement.asset}`,
  }
}
