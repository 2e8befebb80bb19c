import { foldAsset } from '../payments/assets.js'
import type { Db } from '../store/db.js'

/** The merchant's crypto settlement destination for an asset, if it registered one. */
export async function findSettlementDestination(
  db: Db,
  merchantId: string,
  asset: string,
): Promise<{ destination: string; asset: string } | undefined> {
  return db
    .selectFrom('crypto_settlements')
    .select(['destination', 'asset'])
    .where('merchant_id', '=', merchantId)
    .where('asset_key', '=', foldAsset(asset))
    .executeTakeFirst()
}

/** The settlement columns of a payment that test mode settles at once (nothing moves, so it is immediate). */
export async function testSettlement(db: Db, payment: { id: string; merchant_id: string }, asset: string) {
  const settlement = await findSettlementDestination(db, payment.merchant_id, asset)
  if (!settlement) return {}
  return {
    settlement_status: 'succeeded' as const,
    settlement_tx_id: `test:${payment.id}:settlement`,
    settlement_unit: `caip19/${settlement.asset}`,
  }
}
