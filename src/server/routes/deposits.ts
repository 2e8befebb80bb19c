import type { FastifyInstance } from 'fastify'
import { endpoints } from '../../contract/endpoints.js'
import { depositJson, listDeposits } from '../payments/deposits.js'
import { defineRoute } from '../route.js'

/** The partner's own deposits, in its key's mode; the operator sees every partner's (`caipay deposits list`). */
export async function depositRoutes(app: FastifyInstance): Promise<void> {
  defineRoute(app, endpoints.listDeposits, async ({ db, auth, query, config }) => {
    const rows = await listDeposits(db, {
      partnerId: auth.partnerId,
      mode: auth.mode,
      ...(query.status ? { status: query.status } : {}),
      ...(query.limit !== undefined ? { limit: query.limit } : {}),
    })
    return { deposits: rows.map((row) => depositJson(row, config)) }
  })
}
