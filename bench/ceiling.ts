/**
 * The ceiling: what Fastify and PostgreSQL give on this machine with nothing of caipay in between.
 * - `GET /json`: a small constant JSON body;
 * - `GET /select/:id`: one primary-key SELECT on `payments` of the same database, through a pg pool
 *   with the server's settings (`max` 10, as `createDb`), answered with a status-sized body;
 * - `GET /select-prepared/:id`: the same SELECT as a named (prepared) statement, as the server runs
 *   its hot statements (store/prepared.ts): PostgreSQL then skips parse and plan, the stricter ceiling.
 * Same Fastify major, no logger, no schemas, no hooks.
 */
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify'
import pg from 'pg'

export interface Ceiling {
  app: FastifyInstance
  url: string
  close(): Promise<void>
}

const finalStatuses = new Set(['succeeded', 'failed', 'expired', 'cancelled'])

export async function startCeiling(options: {
  databaseUrl: string
  poolSize?: number
  port?: number
}): Promise<Ceiling> {
  const pool = new pg.Pool({ connectionString: options.databaseUrl, max: options.poolSize ?? 10 })
  pool.on('error', () => {})
  const app = Fastify({ logger: false })
  app.get('/json', async () => ({ status: 'requires_action', isFinal: false, pollInMs: 2000 }))
  const text = 'SELECT * FROM payments WHERE id = $1'
  const answer = (rows: unknown[], reply: FastifyReply) => {
    const row = rows[0] as { status: string; tx_id: string | null } | undefined
    if (!row) return reply.code(404).send({ code: 'payment_not_found', message: 'Payment not found.' })
    const isFinal = finalStatuses.has(row.status)
    return {
      status: row.status,
      isFinal,
      pollInMs: isFinal ? null : 2000,
      ...(row.status === 'succeeded' && row.tx_id ? { txId: row.tx_id } : {}),
    }
  }
  app.get<{ Params: { id: string } }>('/select/:id', async (request, reply) =>
    answer((await pool.query(text, [request.params.id])).rows, reply),
  )
  app.get<{ Params: { id: string } }>('/select-prepared/:id', async (request, reply) =>
    answer((await pool.query({ name: 'ceiling_select', text, values: [request.params.id] })).rows, reply),
  )
  const url = await app.listen({ port: options.port ?? 0, host: '127.0.0.1' })
  return {
    app,
    url,
    async close() {
      await app.close()
      await pool.end()
    },
  }
}
