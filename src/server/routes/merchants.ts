import type { FastifyInstance } from 'fastify'
import { endpoints } from '../../contract/endpoints.js'
import type { Merchant } from '../../contract/merchant.js'
import { findMerchant } from '../auth.js'
import { forgetMerchantEverywhere } from '../authCache.js'
import { fail } from '../errors.js'
import { newId } from '../ids.js'
import { afterCursor, keysetPage, likeEscape, page } from '../pagination.js'
import { defineRoute } from '../route.js'
import type { Db } from '../store/db.js'
import type { MerchantRow } from '../store/schema.js'
import { listSettlements } from './settlements.js'

function merchantJson(row: MerchantRow): Merchant {
  return {
    id: row.id,
    name: row.name,
    email: row.email,
    iconUrl: row.icon_url,
    status: row.status,
    createdAt: row.created_at.toISOString(),
  }
}

async function withSettlements(db: Db, row: MerchantRow): Promise<Merchant> {
  return { ...merchantJson(row), settlements: { crypto: await listSettlements(db, row.id), fiat: [] } }
}

export async function merchantRoutes(app: FastifyInstance): Promise<void> {
  defineRoute(app, endpoints.listMerchants, async ({ db, auth, query }) => {
    const limit = query.limit ?? 20
    let q = db
      .selectFrom('merchants')
      .selectAll()
      .where('partner_id', '=', auth.partnerId)
      .where('mode', '=', auth.mode)
      .where('deleted_at', 'is', null)
    if (query.status) q = q.where('status', '=', query.status)
    if (query.search) {
      const pattern = `%${likeEscape(query.search)}%`
      q = q.where((eb) => eb.or([eb('name', 'ilike', pattern), eb('id', 'ilike', pattern)]))
    }
    q = afterCursor(q, query.cursor)
    const rows = await keysetPage(q, limit).execute()
    const { items, nextCursor } = page(rows, limit)
    return { data: items.map(merchantJson), nextCursor }
  })

  defineRoute(app, endpoints.createMerchant, async ({ db, auth, body, now }) => {
    const row = await db
      .insertInto('merchants')
      .values({
        id: newId('merchant'),
        partner_id: auth.partnerId,
        mode: auth.mode,
        name: body.merchantName,
        email: body.merchantEmail,
        icon_url: body.iconUrl ?? null,
        status: 'active',
        created_at: now,
        updated_at: now,
        deleted_at: null,
      })
      .returningAll()
      .executeTakeFirstOrThrow()
    return { merchant: { ...merchantJson(row), settlements: { crypto: [], fiat: [] } } }
  })

  defineRoute(app, endpoints.getMerchant, async ({ db, auth, params }) => {
    const row = await findMerchant(db, auth, params.merchantId)
    return { merchant: await withSettlements(db, row) }
  })

  defineRoute(app, endpoints.updateMerchant, async ({ db, auth, params, body, now, afterCommit }) => {
    await findMerchant(db, auth, params.merchantId)
    // Again after the commit: a request reading the merchant before then may have cached the old row.
    forgetMerchantEverywhere(params.merchantId)
    afterCommit(() => forgetMerchantEverywhere(params.merchantId))
    const row = await db
      .updateTable('merchants')
      .set({
        ...(body.merchantName !== undefined ? { name: body.merchantName } : {}),
        ...(body.merchantEmail !== undefined ? { email: body.merchantEmail } : {}),
        ...(body.iconUrl !== undefined ? { icon_url: body.iconUrl } : {}),
        updated_at: now,
      })
      .where('id', '=', params.merchantId)
      .where('deleted_at', 'is', null)
      .returningAll()
      .executeTakeFirst()
    if (!row) fail('merchant_not_found', 'Merchant not found.', { merchantId: params.merchantId })
    return { merchant: await withSettlements(db, row) }
  })

  defineRoute(app, endpoints.deleteMerchant, async ({ db, auth, params, now, afterCommit }) => {
    // Deleting twice is fine, so this looks past deleted_at (but never at other partners or modes).
    const row = await db
      .selectFrom('merchants')
      .select(['id', 'deleted_at'])
      .where('id', '=', params.merchantId)
      .where('partner_id', '=', auth.partnerId)
      .where('mode', '=', auth.mode)
      .executeTakeFirst()
    if (!row) fail('merchant_not_found', 'Merchant not found.', { merchantId: params.merchantId })
    if (!row.deleted_at) {
      forgetMerchantEverywhere(row.id)
      afterCommit(() => forgetMerchantEverywhere(row.id))
      await db
        .updateTable('merchants')
        .set({ deleted_at: now, updated_at: now })
        .where('id', '=', row.id)
        .where('deleted_at', 'is', null)
        .execute()
    }
    return { id: row.id, deleted: true as const }
  })
}
