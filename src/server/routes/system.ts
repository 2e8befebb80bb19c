import type { FastifyInstance } from 'fastify'
import { sql } from 'kysely'
import { registerDocs } from '../docs.js'
import { openApiDocument, wcpOpenApiDocument } from '../openapi.js'

export async function systemRoutes(app: FastifyInstance): Promise<void> {
  for (const [url, build] of [
    ['/openapi.json', openApiDocument],
    ['/wcp/openapi.json', wcpOpenApiDocument],
  ] as const) {
    let document: { base: string; json: string } | undefined
    app.get(url, { config: { rateLimit: false } }, async (_request, reply) => {
      // publicBaseUrl may be set after listen (CLI without a configured one), so build lazily.
      if (document?.base !== app.config.publicBaseUrl) {
        document = { base: app.config.publicBaseUrl, json: JSON.stringify(build(app.config.publicBaseUrl)) }
      }
      return reply.type('application/json; charset=utf-8').send(document.json)
    })
  }
  registerDocs(app)

  // A person opening the server's address in a browser lands on the API reference.
  app.get('/', { config: { rateLimit: false } }, async (_request, reply) => reply.redirect('/docs', 302))

  app.get('/healthz', { config: { rateLimit: false } }, async (_request, reply) => {
    try {
      await sql`SELECT 1`.execute(app.db)
      return { ok: true }
    } catch {
      return reply.code(503).send({ code: 'internal_error', message: 'Database unavailable.' })
    }
  })
}
