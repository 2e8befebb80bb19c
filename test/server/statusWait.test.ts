import http from 'node:http'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApiKey, createPartner } from '../../src/server/accounts/accounts.js'
import { resolveConfig } from '../../src/server/config.js'
import { type RunningServer, startServer } from '../../src/server/server.js'
import { createTestDatabase, type TestDatabase } from '../postgres.js'

/**
 * `Prefer: wait=<seconds>` on the status reads (RFC 7240): held until the payment's status changes,
 * whoever changes it (another instance, a job, an operator's SQL), answered at once when not asked for,
 * when final, and when the server offers no waiting; released when the client goes or the server stops.
 */
let pg: TestDatabase
const servers: RunningServer[] = []

beforeAll(async () => {
  pg = await createTestDatabase()
})
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()))
  await pg?.drop()
})

async function start(config: Record<string, unknown> = {}): Promise<RunningServer> {
  const server = await startServer({
    port: 0,
    databaseUrl: pg.url,
    role: 'api',
    config: resolveConfig({ rateLimit: false, ...config }),
  })
  servers.push(server)
  await until(() => server.app.statusChanges.available || server.config.statusWaitMaxMs === 0)
  return server
}

async function until(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out')
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

interface Merchant {
  apiKey: string
  merchantId: string
}

async function newMerchant(server: RunningServer): Promise<Merchant> {
  const partnerId = await createPartner(pg.db)
  const { apiKey } = await createApiKey(pg.db, { partnerId, mode: 'test' })
  const created = await fetch(`${server.url}/v1/merchants`, {
    method: 'POST',
    headers: { 'api-key': apiKey, 'idempotency-key': `m-${partnerId}`, 'content-type': 'application/json' },
    body: JSON.stringify({ merchantName: 'Shop', merchantEmail: 'shop@example.com' }),
  }).then((r) => r.json() as Promise<{ merchant: { id: string } }>)
  return { apiKey, merchantId: created.merchant.id }
}

async function newPayment(server: RunningServer, m: Merchant): Promise<string> {
  const created = await fetch(`${server.url}/v1/payments`, {
    method: 'POST',
    headers: { 'api-key': m.apiKey, 'merchant-id': m.merchantId, 'content-type': 'application/json' },
    body: JSON.stringify({ referenceId: 'wait', amount: { unit: 'iso4217/USD', value: '100' } }),
  }).then((r) => r.json() as Promise<{ paymentId: string }>)
  return created.paymentId
}

function simulate(server: RunningServer, m: Merchant, paymentId: string, outcome: string) {
  return fetch(`${server.url}/v1/test/payments/${paymentId}/simulate`, {
    method: 'POST',
    headers: { 'api-key': m.apiKey, 'merchant-id': m.merchantId, 'content-type': 'application/json' },
    body: JSON.stringify({ outcome }),
  })
}

/** A status read, timed; `surface` picks the wallet gateway's or the merchant API's endpoint. */
async function status(
  server: RunningServer,
  m: Merchant,
  paymentId: string,
  headers: Record<string, string> = {},
  surface: 'gateway' | 'merchant' = 'gateway',
) {
  const started = Date.now()
  const url =
    surface === 'gateway'
      ? `${server.url}/v1/gateway/payment/${paymentId}/status`
      : `${server.url}/v1/payments/${paymentId}/status`
  const response = await fetch(url, {
    headers: {
      'api-key': m.apiKey,
      ...(surface === 'merchant' ? { 'merchant-id': m.merchantId } : {}),
      ...headers,
    },
  })
  return {
    status: response.status,
    applied: response.headers.get('preference-applied'),
    body: (await response.json()) as {
      status: string
      isFinal: boolean
      pollInMs: number | null
      code?: string
    },
    ms: Date.now() - started,
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe('status reads with Prefer: wait', () => {
  it.each(['gateway', 'merchant'] as const)(
    'a %s read is held until another instance changes the status, then answers the new one',
    async (surface) => {
      const [a, b] = [await start(), await start()]
      const m = await newMerchant(a)
      const paymentId = await newPayment(a, m)
      const held = status(a, m, paymentId, { prefer: 'wait=15' }, surface)
      await sleep(400)
      expect((await simulate(b, m, paymentId, 'succeeded')).status).toBe(200)
      const answer = await held
      expect(answer.status).toBe(200)
      expect(answer.body).toMatchObject({ status: 'succeeded', isFinal: true, pollInMs: null })
      expect(answer.applied).toBe('wait=15')
      expect(answer.ms).toBeGreaterThanOrEqual(400)
      expect(answer.ms).toBeLessThan(10_000)
      await until(() => a.app.statusChanges.waiting === 0)
    },
  )

  it('wakes on a change made outside the API (an operator’s SQL), not only on the API’s own writes', async () => {
    const a = await start()
    const m = await newMerchant(a)
    const paymentId = await newPayment(a, m)
    const held = status(a, m, paymentId, { prefer: 'wait=15' })
    await until(() => a.app.statusChanges.waiting === 1)
    await sql`UPDATE payments SET status = 'processing' WHERE id = ${paymentId}`.execute(pg.db)
    const answer = await held
    // Not final: the answer says to ask again at once (the waiting was done here).
    expect(answer.body).toMatchObject({ status: 'processing', isFinal: false, pollInMs: 0 })
    expect(answer.ms).toBeLessThan(10_000)
    // An update that leaves the status as it was wakes nobody.
    const second = status(a, m, paymentId, { prefer: 'wait=1' })
    await until(() => a.app.statusChanges.waiting === 1)
    await sql`UPDATE payments SET updated_at = now() WHERE id = ${paymentId}`.execute(pg.db)
    const unchanged = await second
    expect(unchanged.body).toMatchObject({ status: 'processing', pollInMs: 0 })
    expect(unchanged.ms).toBeGreaterThanOrEqual(900)
  })

  it('answers at once without the preference, when final, and for other preferences', async () => {
    const a = await start()
    const m = await newMerchant(a)
    const paymentId = await newPayment(a, m)
    const plain = await status(a, m, paymentId)
    expect(plain.body).toMatchObject({ status: 'requires_action', pollInMs: 2000 })
    expect(plain.applied).toBeNull()
    const other = await status(a, m, paymentId, { prefer: 'return=minimal; x="a,b", respond-async' })
    expect(other.body).toMatchObject({ status: 'requires_action', pollInMs: 2000 })
    expect(other.applied).toBeNull()
    await simulate(a, m, paymentId, 'failed')
    const final = await status(a, m, paymentId, { prefer: 'wait=15' })
    expect(final.body).toMatchObject({ status: 'failed', isFinal: true, pollInMs: null })
    expect(final.ms).toBeLessThan(5_000)
    expect(final.applied).toBeNull()
  })

  it('caps the wait at statusWaitMaxMs, and waits not at all with 0', async () => {
    const capped = await start({ statusWaitMaxMs: 300 })
    const m = await newMerchant(capped)
    const paymentId = await newPayment(capped, m)
    const answer = await status(capped, m, paymentId, { prefer: 'wait=30' })
    expect(answer.body).toMatchObject({ status: 'requires_action', pollInMs: 0 })
    expect(answer.ms).toBeGreaterThanOrEqual(250)
    expect(answer.ms).toBeLessThan(5_000)

    const off = await start({ statusWaitMaxMs: 0 })
    const offAnswer = await status(off, m, paymentId, { prefer: 'wait=30' })
    expect(offAnswer.body).toMatchObject({ status: 'requires_action', pollInMs: 2000 })
    expect(offAnswer.applied).toBeNull()
  })

  it.each(['', 'wait=1,', 'wait=1;;', 'wait=é', '"wait"=1', `wait=${'1'.repeat(1100)}`])(
    'refuses a Prefer outside the RFC 7240 grammar (%j) with 400 invalid_params',
    async (prefer) => {
      const a = await start()
      const m = await newMerchant(a)
      const paymentId = await newPayment(a, m)
      const answer = await status(a, m, paymentId, { prefer })
      expect(answer.status).toBe(400)
      expect(answer.body.code).toBe('invalid_params')
    },
  )

  it('releases a held read when its client goes away', async () => {
    const a = await start()
    const m = await newMerchant(a)
    const paymentId = await newPayment(a, m)
    // A connection of its own, closed for real (fetch's abort keeps the socket for reuse).
    const held = http.get(`${a.url}/v1/gateway/payment/${paymentId}/status`, {
      agent: false,
      headers: { 'api-key': m.apiKey, prefer: 'wait=60' },
    })
    held.on('error', () => {})
    await until(() => a.app.statusChanges.waiting === 1)
    held.destroy()
    await until(() => a.app.statusChanges.waiting === 0)
  })

  it('answers held reads when the server stops, instead of holding its shutdown', async () => {
    const a = await start()
    const m = await newMerchant(a)
    const paymentId = await newPayment(a, m)
    const held = status(a, m, paymentId, { prefer: 'wait=60' })
    await until(() => a.app.statusChanges.waiting === 1)
    const stopping = Date.now()
    await a.stop()
    const answer = await held
    expect(answer.body).toMatchObject({ status: 'requires_action' })
    expect(Date.now() - stopping).toBeLessThan(10_000)
  })
})
