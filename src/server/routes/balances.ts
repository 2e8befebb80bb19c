import type { FastifyInstance } from 'fastify'
import { endpoints } from '../../contract/endpoints.js'
import { findMerchant } from '../auth.js'
import { partnerBalances } from '../ledger/views.js'
import { defineRoute } from '../route.js'

export async function balanceRoutes(app: FastifyInstance): Promise<void> {
  defineRoute(app, endpoints.getBalances, async ({ db, auth, query, config }) => {
    const merchantId = query.merchantId ? (await findMerchant(db, auth, query.merchantId)).id : undefined
    return partnerBalances(db, config, { mode: auth.mode, partnerId: auth.partnerId, merchantId })
  })
}
