import { type ChildProcess, spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApiKey, createPartner, revokeApiKey } from '../../src/server/accounts/accounts.js'
import { resolveConfig } from '../../src/server/config.js'
import { enqueueJob } from '../../src/server/jobs/queue.js'
import { defaultLeaseMs, startJobRunner } from '../../src/server/jobs/runner.js'
import { type RunningServer, startServer } from '../../src/server/server.js'
import { createTestDatabase, type TestDatabase } from '../postgres.js'

/**
 * Several processes on one PostgreSQL: API-only and worker-only servers, credential caches kept in
 * step across instances (LISTEN/NOTIFY), and the jobs of a SIGKILLed worker taken over by another.
 */
let pg: TestDatabase
const servers: RunningServer[] = []
const children: ChildProcess[] = []

beforeAll(async () => {
  pg = await createTestDatabase()
})
afterAll(async () => {
  for (const child of children) child.kill('SIGKILL')
  await Promise.all(servers.map((s) => s.stop()))
  await pg?.drop()
})

async function until<T>(
  check: () => Promise<T | undefined> | T | undefined,
  what: string,
  timeoutMs = 20_000,
) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value !== undefined && value !== false) return value
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

const start = async (role: 'api' | 'worker') => {
  const server = await startServer({
    port: 0,
    databaseUrl: pg.url,
    role,
    // Caches that would serve a revoked key for a minute without the notifications.
    config: resolveConfig({ rateLimit: false, authCacheMs: 60_000 }),
  })
  servers.push(server)
  return server
}

/** A payment made through `server`'s API (jobs name one). */
async function newPayment(server: RunningServer): Promise<string> {
  const partnerId = await createPartner(pg.db)
  const { apiKey } = await createApiKey(pg.db, { partnerId, mode: 'test' })
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { 'api-key': apiKey, 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    }).then((r) => r.json() as Promise<{ merchant: { id: string }; paymentId: string }>)
  const { merchant } = await post(
    '/v1/merchants',
    { merchantName: 'Shop', merchantEmail: 'shop@example.com' },
    { 'idempotency-key': `m-${partnerId}` },
  )
  const payment = await post(
    '/v1/payments',
    { referenceId: 'lease', amount: { unit: 'iso4217/USD', value: '100' } },
    { 'merchant-id': merchant.id },
  )
  return payment.paymentId
}

describe('several instances on one database', () => {
  it('an API-only instance serves HTTP and a worker-only one listens nowhere', async () => {
    const api = await start('api')
    const worker = await start('worker')
    expect((await fetch(`${api.url}/healthz`)).status).toBe(200)
    expect(worker.url).toBe('')
    expect(worker.app.server.listening).toBe(false)
  })

  // "Within a second" is what the invalidation gives (about 0.1 s here); the bound asserted is the caches'
  // lifetime's sixth, which only working invalidation meets and a loaded CI machine cannot miss by noise.
  it('a key revoked elsewhere is refused by every instance at once (well before the caches’ 60 s)', async () => {
    const [a, b] = [await start('api'), await start('api')]
    const partnerId = await createPartner(pg.db)
    const { apiKey, keyId } = await createApiKey(pg.db, { partnerId, mode: 'test' })
    const list = (server: RunningServer) =>
      fetch(`${server.url}/v1/merchants`, { headers: { 'api-key': apiKey } }).then((r) => r.status)
    // Both instances have the key cached now.
    expect([await list(a), await list(b)]).toEqual([200, 200])

    // Revoked by another process (here the test's own connection, as an operator script would).
    await revokeApiKey(pg.db, keyId)
    const revokedAt = Date.now()
    await until(async () => (await list(a)) === 401 && (await list(b)) === 401, 'both instances to refuse')
    const elapsed = Date.now() - revokedAt
    expect(elapsed).toBeLessThan(10_000)
  })

  it('a merchant deleted through one instance is refused by another at once (well before the caches’ 60 s)', async () => {
    const [a, b] = [await start('api'), await start('api')]
    const partnerId = await createPartner(pg.db)
    const { apiKey } = await createApiKey(pg.db, { partnerId, mode: 'test' })
    const created = await fetch(`${a.url}/v1/merchants`, {
      method: 'POST',
      headers: { 'api-key': apiKey, 'idempotency-key': 'm-1', 'content-type': 'application/json' },
      body: JSON.stringify({ merchantName: 'Shop', merchantEmail: 'shop@example.com' }),
    }).then((r) => r.json() as Promise<{ merchant: { id: string } }>)
    const merchantId = created.merchant.id
    const payments = () =>
      fetch(`${b.url}/v1/merchants/payments`, {
        headers: { 'api-key': apiKey, 'merchant-id': merchantId },
      }).then((r) => r.status)
    expect(await payments()).toBe(200)
    const deleted = await fetch(`${a.url}/v1/merchants/${merchantId}`, {
      method: 'DELETE',
      headers: { 'api-key': apiKey },
    })
    expect(deleted.status).toBeLessThan(300)
    const deletedAt = Date.now()
    await until(
      async () => (await payments()) === 404,
      `the other instance to refuse the merchant (${await payments()})`,
    )
    expect(Date.now() - deletedAt).toBeLessThan(10_000)
  })

  it('jobs held by a SIGKILLed worker resume on another within 15 s, and never while its lease is renewed', async () => {
    const paymentId = await newPayment(await start('api'))

    const script = fileURLToPath(new URL('./leaseHolder.ts', import.meta.url))
    const child = spawn(process.execPath, ['--import', 'tsx', script, pg.url], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    children.push(child)
    let out = ''
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString()
    })
    child.stderr!.on('data', (chunk: Buffer) => {
      out += chunk.toString()
    })
    await until(() => out.includes('ready'), `the worker process to start: ${out}`)
    await enqueueJob(pg.db, { kind: 'lease.probe', paymentId })
    await until(() => out.includes('claimed'), `the worker process to claim the job: ${out}`)

    let takenOverAt: number | undefined
    const survivor = startJobRunner({
      db: pg.db,
      intervalMs: 100,
      handlers: {
        'lease.probe': {
          async run() {
            takenOverAt = Date.now()
            return { by: 'survivor' }
          },
        },
      },
    })
    try {
      // Longer than a lease: the live worker keeps renewing, so nobody else takes its job.
      await new Promise((resolve) => setTimeout(resolve, defaultLeaseMs + 2_000))
      expect(takenOverAt).toBeUndefined()

      child.kill('SIGKILL')
      const killedAt = Date.now()
      await until(() => takenOverAt, 'another runner to take the job over', 20_000)
      const resumedAfterMs = takenOverAt! - killedAt
      process.stdout.write(`SIGKILL to resumption: ${resumedAfterMs} ms (lease ${defaultLeaseMs} ms)\n`)
      expect(resumedAfterMs).toBeLessThan(15_000)
      const row = await pg.db
        .selectFrom('jobs')
        .select(['state', 'attempts'])
        .where('kind', '=', 'lease.probe')
        .executeTakeFirstOrThrow()
      expect(row).toEqual({ state: 'succeeded', attempts: 2 })
    } finally {
      await survivor.stop()
    }
  }, 60_000)
})
