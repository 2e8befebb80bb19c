import type { FastifyInstance } from 'fastify'
import { canonicalCaip, parseAccountId, parseAssetId } from '../../caip/caip.js'
import { endpoints } from '../../contract/endpoints.js'
import type { CryptoSettlement } from '../../contract/merchant.js'
import { findMerchant } from '../auth.js'
import { fail, validationError } from '../errors.js'
import { newId } from '../ids.js'
import { defineRoute } from '../route.js'
import { type Db, inTransaction } from '../store/db.js'
import type { CryptoSettlementRow } from '../store/schema.js'

function settlementJson(row: CryptoSettlementRow): CryptoSettlement {
  return { id: row.id, asset: row.asset, destination: row.destination }
}

export async function listSettlements(db: Db, merchantId: string): Promise<CryptoSettlement[]> {
  const rows = await db
    .selectFrom('crypto_settlements')
    .selectAll()
    .where('merchant_id', '=', merchantId)
    .orderBy('created_at')
    .orderBy('id')
    .execute()
  return rows.map(settlementJson)
}

function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: string }).code === '23505'
}

async function findSettlement(db: Db, merchantId: string, id: string): Promise<CryptoSettlementRow> {
  const row = await db
    .selectFrom('crypto_settlements')
    .selectAll()
    .where('id', '=', id)
    .where('merchant_id', '=', merchantId)
    .executeTakeFirst()
  if (!row) fail('settlement_not_found', 'No crypto settlement with this id for this merchant.', { id })
  return row
}

export async function settlementRoutes(app: FastifyInstance): Promise<void> {
  defineRoute(app, endpoints.listSettlements, async ({ db, auth, params }) => {
    const merchant = await findMerchant(db, auth, params.merchantId)
    return { crypto: await listSettlements(db, merchant.id), fiat: [] }
  })

  defineRoute(app, endpoints.createCryptoSettlements, async ({ db, auth, params, body, now }) => {
    const merchant = await findMerchant(db, auth, params.merchantId)
    const seen = new Set<string>()
    for (const entry of body.settlements) {
      const key = canonicalCaip(entry.asset)
      if (seen.has(key))
        fail('settlement_asset_conflict', `Asset ${entry.asset} appears twice in the request.`)
      seen.add(key)
    }
    const rows = await inTransaction(db, async (trx) => {
      try {
        return await trx
          .insertInto('crypto_settlements')
          .values(
            body.settlements.map((entry) => ({
              id: newId('cryptoSettlement'),
              merchant_id: merchant.id,
              partner_id: auth.partnerId,
              mode: auth.mode,
              asset: entry.asset,
              asset_key: canonicalCaip(entry.asset),
              destination: entry.destination,
              created_at: now,
              updated_at: now,
            })),
          )
          .returningAll()
          .execute()
      } catch (error) {
        if (isUniqueViolation(error)) {
          fail(
            'settlement_asset_conflict',
            'An asset in the request is already registered for this merchant.',
          )
        }
        throw error
      }
    })
    // Keep the caller's order in the answer.
    const byKey = new Map(rows.map((r) => [r.asset_key, r]))
    return { settlements: body.settlements.map((e) => settlementJson(byKey.get(canonicalCaip(e.asset))!)) }
  })

  defineRoute(app, endpoints.updateCryptoSettlement, async ({ db, auth, params, body, now }) => {
    const merchant = await findMerchant(db, auth, params.merchantId)
    const current = await findSettlement(db, merchant.id, params.id)
    if (parseAssetId(current.asset).chainId !== parseAccountId(body.destination).chainId) {
      throw validationError([
        { path: 'body.destination', message: 'destination must be on the same chain as asset.' },
      ])
    }
    const row = await db
      .updateTable('crypto_settlements')
      .set({ destination: body.destination, updated_at: now })
      .where('id', '=', current.id)
      .returningAll()
      .executeTakeFirst()
    if (!row)
      fail('settlement_not_found', 'No crypto settlement with this id for this merchant.', { id: params.id })
    return settlementJson(row)
  })

  defineRoute(app, endpoints.deleteCryptoSettlement, async ({ db, auth, params }) => {
    const merchant = await findMerchant(db, auth, params.merchantId)
    const row = await findSettlement(db, merchant.id, params.id)
    await db.deleteFrom('crypto_settlements').where('id', '=', row.id).execute()
    return { id: row.id, deleted: true as const }
  })
}
