import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApiKey, createPartner } from '../../src/server/accounts/accounts.js'
import { buildApp } from '../../src/server/app.js'
import type { ServerConfig } from '../../src/server/config.js'
import { enqueueJob } from '../../src/server/jobs/queue.js'
import { type JobHandler, startJobRunner } from '../../src/server/jobs/runner.js'
import { type Db, type OpenedDatabase, openDatabase } from '../../src/server/store/db.js'
import { type EmbeddedPostgres, freePort, startEmbeddedPostgres } from '../../src/server/store/embedded.js'

/**
 * A real PostgreSQL (its own embedded cluster, not the shared test one) stopped under a running
 * server and started again on the same port: requests answer 503 meanwhile, nothing half-done is
 * kept, and the server and its jobs carry on by themselves once it is back.
 */
let dataDir: string
let port: number
let cluster: EmbeddedPostgres
let database: OpenedDatabase
let app: FastifyInstance
let apiKey: string
let merchantId: string

const startCluster = async () => {
  cluster = await startEmbeddedPostgres({ dataDir, port })
}

async function until(check: () => Promise<boolean> | boolean, what: string, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'caipay-outage-'))
  port = await freePort()
  await startCluster()
  database = await openDatabase({ databaseUrl: cluster.url })
  app = await buildApp({ db: database.db, config: { rateLimit: false } as Partial<ServerConfig> })
  const partnerId = await createPartner(database.db)
  apiKey = (await createApiKey(database.db, { partnerId, mode: 'test' })).apiKey
  const merchant = await app.inject({
    method: 'POST',
    url: '/v1/merchants',
    headers: { 'api-key': apiKey, 'idempotency-key': 'outage-merchant' },
    payload: { merchantName: 'Outage Shop', merchantEmail: 'shop@example.com' },
  })
  expect(merchant.statusCode, merchant.body).toBe(201)
  merchantId = merchant.json().merchant.id
}, 120_000)

afterAll(async () => {
  await app?.close()
  await database?.close()
  await cluster?.stop()
  if (dataDir) await rm(dataDir, { recursive: true, force: true })
})

const createPayment = (referenceId: string, idempotencyKey: string) =>
  app.inject({
    method: 'POST',
    url: '/v1/payments',
    headers: { 'api-key': apiKey, 'merchant-id': merchantId, 'idempotency-key': idempotencyKey },
    payload: { referenceId, amount: { unit: 'iso4217/USD', value: '1250' } },
  })

const paymentsWithReference = async (db: Db, referenceId: string) =>
  (await db.selectFrom('payments').select('id').where('reference_id', '=', referenceId).execute()).length

describe('PostgreSQL stopped and restarted under a running server', () => {
  it('answers 503 internal_error with Retry-After while it is down, writes nothing, and serves again once it is back', async () => {
    await cluster.stop()

    const list = await app.inject({ method: 'GET', url: '/v1/payments', headers: { 'api-key': apiKey } })
    expect(list.statusCode, list.body).toBe(503)
    expect(list.json()).toEqual({
      code: 'internal_error',
      message: 'The database is unavailable; retry shortly.',
    })
    expect(list.headers['retry-after']).toBe('2')

    const created = await createPayment('outage-order', 'outage-key')
    expect(created.statusCode, created.body).toBe(503)
    expect(created.headers['retry-after']).toBe('2')

    const health = await app.inject({ method: 'GET', url: '/healthz' })
    expect(health.statusCode).toBe(503)

    await startCluster()
    // The same Idempotency-Key was not kept by the failed attempt: the retry creates the payment once.
    const retried = await createPayment('outage-order', 'outage-key')
    expect(retried.statusCode, retried.body).toBe(201)
    const replay = await createPayment('outage-order', 'outage-key')
    expect(replay.statusCode).toBe(201)
    expect(replay.json().paymentId).toBe(retried.json().paymentId)
    expect(await paymentsWithReference(database.db, 'outage-order')).toBe(1)
  }, 60_000)

  it('connections cut by the database (pg_terminate_backend) do not crash the process; each request is 201 or 503 with nothing written, and the pool recovers', async () => {
    // Warm the pool so there are idle connections to cut.
    await Promise.all(
      [1, 2, 3].map(() => app.inject({ method: 'GET', url: '/v1/payments', headers: { 'api-key': apiKey } })),
    )
    const admin = await openDatabase({ databaseUrl: cluster.url, migrate: false, poolSize: 1 })
    try {
      const cut = await sql<{
        pid: number
      }>`SELECT pg_terminate_backend(pid), pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND datname = current_database()`.execute(
        admin.db,
      )
      // pg_terminate_backend only signals: wait until the backends are gone, so every request below
      // meets the cut and none races a backend still finishing its exit on a loaded machine.
      const pids = cut.rows.map((r) => r.pid)
      await until(async () => {
        const alive = await sql<{
          n: number
        }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ANY(${pids})`.execute(admin.db)
        return alive.rows[0]!.n === 0
      }, 'the cut backends to exit')
    } finally {
      await admin.close()
    }
    // Each pooled connection the cut reached may fail one request (503, nothing written) before the pool
    // drops it; then requests succeed again. Bounded by the pool's size.
    const statuses: number[] = []
    for (let i = 0; statuses.at(-1) !== 201; i++) {
      expect(i, `still failing after ${i} requests: ${statuses}`).toBeLessThan(40)
      const res = await createPayment(`cut-${i}`, `cut-key-${i}`)
      statuses.push(res.statusCode)
      expect([201, 503], res.body).toContain(res.statusCode)
    }
    const next = await createPayment('cut-after', 'cut-key-after')
    expect(next.statusCode, next.body).toBe(201)
    // A 503 wrote nothing: only the answered payments exist.
    for (const [i, status] of statuses.entries())
      expect(await paymentsWithReference(database.db, `cut-${i}`)).toBe(status === 201 ? 1 : 0)
  }, 60_000)

  it('jobs pause while it is down and resume by themselves after, without counting the outage as a failed attempt', async () => {
    let runs = 0
    let gaveUp = false
    const gate = { open: false }
    const handler: JobHandler = {
      // One attempt only: an outage counted as a failure would give the job up.
      maxAttempts: 1,
      async run(job, ctx) {
        runs += 1
        await until(() => gate.open, 'the test to let the job write')
        await ctx.db
          .updateTable('jobs')
          .set({ last_error: 'written by the job' })
          .where('id', '=', job.id)
          .execute()
        return { done: true }
      },
      async onGiveUp() {
        gaveUp = true
      },
    }
    const runner = startJobRunner({
      db: database.db,
      handlers: { outage_probe: handler },
      intervalMs: 100,
      leaseMs: 1_500,
      listenUrl: cluster.url,
    })
    try {
      const payment = await createPayment('job-order', 'job-order-key')
      expect(payment.statusCode, payment.body).toBe(201)
      await enqueueJob(database.db, { kind: 'outage_probe', paymentId: payment.json().paymentId })
      await until(() => runs === 1, 'the job to start')
      await cluster.stop()
      // The job's write now fails for want of a database; polling fails too, quietly.
      gate.open = true
      await new Promise((resolve) => setTimeout(resolve, 1_000))
      await startCluster()
      await until(async () => {
        const row = await database.db
          .selectFrom('jobs')
          .select('state')
          .where('kind', '=', 'outage_probe')
          .executeTakeFirst()
          .catch(() => undefined)
        return row?.state === 'succeeded'
      }, 'the job to finish after the restart')
      expect(gaveUp).toBe(false)
      const row = await database.db
        .selectFrom('jobs')
        .select(['state', 'result', 'last_error'])
        .where('kind', '=', 'outage_probe')
        .executeTakeFirstOrThrow()
      expect(row.result).toEqual({ done: true })
    } finally {
      await runner.stop()
    }
  }, 60_000)
})
