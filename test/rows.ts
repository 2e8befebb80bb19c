import { canonicalCaip } from '../src/caip/caip.js'
import { createPartner } from '../src/server/accounts/accounts.js'
import { newId } from '../src/server/ids.js'
import type { Db } from '../src/server/store/db.js'
import type { NewPayment } from '../src/server/store/schema.js'

/**
 * Rows written straight into the database, for unit tests of the jobs queue, the runner and the
 * payment lifecycle: they need payments to point at, not the HTTP API that would make them.
 */

/** A new partner and one active test-mode merchant of it. */
export async function insertMerchant(db: Db, now: Date): Promise<{ partnerId: string; merchantId: string }> {
  const partnerId = await createPartner(db)
  const merchantId = newId('merchant')
  await db
    .insertInto('merchants')
    .values({
      id: merchantId,
      partner_id: partnerId,
      mode: 'test',
      name: 'M',
      email: 'm@example.com',
      icon_url: null,
      status: 'active',
      created_at: now,
      updated_at: now,
      deleted_at: null,
    })
    .execute()
  return { partnerId, merchantId }
}

/** A 1-cent test payment of the merchant, `processing` unless `set` says otherwise; returns its id. */
export async function insertPayment(
  db: Db,
  owner: { partnerId: string; merchantId: string },
  now: Date,
  set: Partial<NewPayment> = {},
): Promise<string> {
  const id = newId('payment')
  await db
    .insertInto('payments')
    .values({
      id,
      partner_id: owner.partnerId,
      merchant_id: owner.merchantId,
      mode: 'test',
      reference_id: 'r',
      amount_unit: 'iso4217/USD',
      amount_value: '1',
      status: 'processing',
      failure_code: null,
      expires_at: now,
      selected_option_id: null,
      buyer: null,
      option_amount: null,
      tx_id: null,
      settlement_status: null,
      settlement_tx_id: null,
      settlement_unit: null,
      refunded_at: null,
      cancelled_at: null,
      cancelled_reason: null,
      checkout: null,
      created_at: now,
      updated_at: now,
      ...set,
    })
    .execute()
  return id
}

/** The merchant's settlement destination for `asset` (a crypto_settlements row, test mode). */
export async function insertCryptoSettlement(
  db: Db,
  owner: { partnerId: string; merchantId: string },
  settlement: { asset: string; destination: string; now: Date },
): Promise<void> {
  const { asset, destination, now } = settlement
  await db
    .insertInto('crypto_settlements')
    .values({
      id: newId('cryptoSettlement'),
      merchant_id: owner.merchantId,
      partner_id: owner.partnerId,
      mode: 'test',
      asset,
      asset_key: canonicalCaip(asset),
      destination,
      created_at: now,
      updated_at: now,
    })
    .execute()
}
