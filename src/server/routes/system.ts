import type { FastifyInstance } from 'fastify'
import { sql } from 'kysely'

export async function systemRoutes(app: FastifyInstance): Promise<void> {
  app.get('/healthz', { config: { rateLimit: false } }, async (_request, reply) => {
    try {
      await sql`SELECT 1`.execute(app.db)
      return { ok: true }
    } catch {
      return reply.code(503).send({ code: 'internal_error', message: 'Database unavailable.' })
    }
  })
}
