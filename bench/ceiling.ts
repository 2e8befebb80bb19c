/**
 * The ceiling: what Fastify and PostgreSQL give on this machine with nothing of caipay in between.
 * - `GET /json`: a small constant JSON body;
 * - `GET /select/:id`: one primary-key SELECT on `payments` of the same database, through a pg pool
 *   with the server's settings (`max` 10, as `createDb`), answered with a status-sized body;
 * - `GET /select-prepared/:id`: the same SELECT as a named (prepared) statement, as the server runs
 *   its hot statements (store/prepared.ts): PostgreSQL then skips parse and plan, the stricter ceiling;
 * - `POST /insert`: one prepared single-row INSERT into `payments` of the body's reference and amount
 *   (for the database's first merchant), answered 201 with the new id: the payment-creation ceiling.
 * Same Fastify major, no logger, no schemas, no hooks.
 */
import { randomBytes } from 'node:crypto'
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
  let owner: Promise<{ id: string; partner_id: string }> | undefined
  const insert = {
    name: 'ceiling_insert',
    text:
      'INSERT INTO payments (id, partner_id, merchant_id, mode, reference_id, amount_unit, amount_value, ' +
      "status, expires_at, created_at, updated_at) VALUES ($1, $2, $3, 'test', $4, $5, $6, 'requires_action', " +
      '$7, $8, $8)',
  }
  app.post<{ Body: { referenceId: string; amount: { unit: string; value: string } } }>(
    '/insert',
    async (request, reply) => {
      owner ??= pool
        .query<{ id: string; partner_id: string }>(
          'SELECT id, partner_id FROM merchants ORDER BY created_at LIMIT 1',
        )
        .then((r) => r.rows[0]!)
      const merchant = await owner
      const id = `pay_${randomBytes(12).toString('hex')}`
      const now = new Date()
      const { referenceId, amount } = request.body
      await pool.query({
        ...insert,
        values: [
          id,
          merchant.partner_id,
          merchant.id,
          referenceId,
          amount.unit,
          amount.value,
          new Date(now.getTime() + 3_600_000),
          now,
        ],
      })
      return reply.code(201).send({ paymentId: id, status: 'requires_action' })
    },
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
