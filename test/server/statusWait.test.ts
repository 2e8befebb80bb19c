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

/** A server started with `config`, a merchant on it and a payment of that merchant. */
async function newPaymentOn(config: Record<string, unknown> = {}) {
  const server = await start(config)
  const m = await newMerchant(server)
  return { server, m, paymentId: await newPayment(server, m) }
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
      await until(() => a.app.statusChanges.waiting === 1)
      await sleep(300)
      expect((await simulate(b, m, paymentId, 'succeeded')).status).toBe(200)
      const answer = await held
      expect(answer.status).toBe(200)
      expect(answer.body).toMatchObject({ status: 'succeeded', isFinal: true, pollInMs: null })
      expect(answer.applied).toBe('wait=15')
      expect(answer.ms).toBeGreaterThanOrEqual(300)
      expect(answer.ms).toBeLessThan(10_000)
      await until(() => a.app.statusChanges.waiting === 0)
    },
  )

  it('wakes on a change made outside the API (an operator’s SQL), not only on the API’s own writes', async () => {
    const { server: a, m, paymentId } = await newPaymentOn()
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
    const { server: a, m, paymentId } = await newPaymentOn()
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

  it.each(['', '"wait"=1', 'wait=soon', 'wait=-1'])(
    'ignores a Prefer it cannot read (%j), as RFC 7240 asks: one plain read',
    async (prefer) => {
      const { server: a, m, paymentId } = await newPaymentOn()
      const answer = await status(a, m, paymentId, { prefer })
      expect(answer.status).toBe(200)
      expect(answer.body).toMatchObject({ status: 'requires_action', pollInMs: 2000 })
      expect(answer.applied).toBeNull()
    },
  )

  it('refuses a Prefer that is not printable ASCII, as every header the API reads', async () => {
    const { server: a, m, paymentId } = await newPaymentOn()
    const answer = await status(a, m, paymentId, { prefer: 'wait=1, x=é' })
    expect(answer.status).toBe(400)
    expect(answer.body.code).toBe('header_not_ascii')
  })

  it('reads empty list elements and quoted values, and only the first wait counts', async () => {
    const { server: a, m, paymentId } = await newPaymentOn({ statusWaitMaxMs: 300 })
    // Read as far as the grammar goes: what follows a part that does not parse is ignored.
    for (const prefer of [
      ',, wait=1,',
      'respond-async; x=1, wait="1"',
      'wait=1;;',
      `x=${'1'.repeat(1100)}, wait=1`,
    ]) {
      const held = await status(a, m, paymentId, { prefer })
      expect(held.applied, prefer).toBe('wait=1')
      expect(held.body.pollInMs).toBe(0)
    }
    const first = await status(a, m, paymentId, { prefer: 'wait=soon, wait=1' })
    expect(first.applied).toBeNull()
  })

  it('answers with Vary: Prefer, beside Origin under a CORS allow-list', async () => {
    const { server: a, m, paymentId } = await newPaymentOn({ cors: { merchant: ['https://shop.example'] } })
    const response = await fetch(`${a.url}/v1/payments/${paymentId}/status`, {
      headers: { 'api-key': m.apiKey, 'merchant-id': m.merchantId, origin: 'https://shop.example' },
    })
    const vary = (response.headers.get('vary') ?? '').split(/\s*,\s*/)
    expect(vary).toEqual(expect.arrayContaining(['Prefer', 'Origin']))
  })

  it('sees a change the database did not announce (a change feed dead without an error) within seconds', async () => {
    const { server: a, m, paymentId } = await newPaymentOn()
    const held = status(a, m, paymentId, { prefer: 'wait=20' })
    await until(() => a.app.statusChanges.waiting === 1)
    // A change nobody is told of: the trigger is off for this one statement's transaction.
    await pg.db.transaction().execute(async (trx) => {
      await sql`ALTER TABLE payments DISABLE TRIGGER payments_status_notify`.execute(trx)
      await sql`UPDATE payments SET status = 'processing' WHERE id = ${paymentId}`.execute(trx)
      await sql`ALTER TABLE payments ENABLE TRIGGER payments_status_notify`.execute(trx)
    })
    const answer = await held
    expect(answer.body).toMatchObject({ status: 'processing', pollInMs: 0 })
    // Re-read within the 5 s recheck, long before the 20 s asked for.
    expect(answer.ms).toBeLessThan(15_000)
  })

  it('keeps holding across a lost change feed: the reads re-read, the feed reconnects, a later change wakes them', async () => {
    const { server: a, m, paymentId } = await newPaymentOn()
    const held = status(a, m, paymentId, { prefer: 'wait=20' })
    await until(() => a.app.statusChanges.waiting === 1)
    await sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
      WHERE query = 'LISTEN caipay_payment_status'`.execute(pg.db)
    await until(() => !a.app.statusChanges.available)
    await until(() => a.app.statusChanges.available)
    const changedAt = Date.now()
    await simulate(a, m, paymentId, 'cancelled')
    const answer = await held
    expect(answer.body).toMatchObject({ status: 'cancelled', isFinal: true })
    expect(Date.now() - changedAt).toBeLessThan(10_000)
  })

  it('releases a held read when its client goes away', async () => {
    const { server: a, m, paymentId } = await newPaymentOn()
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
    const { server: a, m, paymentId } = await newPaymentOn()
    const held = status(a, m, paymentId, { prefer: 'wait=60' })
    await until(() => a.app.statusChanges.waiting === 1)
    const stopping = Date.now()
    await a.stop()
    const answer = await held
    expect(answer.body).toMatchObject({ status: 'requires_action' })
    expect(Date.now() - stopping).toBeLessThan(10_000)
  })

  // fetch's abort leaves its socket open for reuse: the server sees a connection that never goes away.
  it('stops within its grace even when a client left a held read without closing the connection', async () => {
    const { server: a, m, paymentId } = await newPaymentOn()
    const gone = new AbortController()
    const held = fetch(`${a.url}/v1/gateway/payment/${paymentId}/status`, {
      headers: { 'api-key': m.apiKey, prefer: 'wait=60' },
      signal: gone.signal,
    }).catch(() => 'aborted')
    await until(() => a.app.statusChanges.waiting === 1)
    gone.abort()
    expect(await held).toBe('aborted')
    const stopping = Date.now()
    await a.stop()
    // The server never learns this connection is idle; the 10 s grace cuts it (without the cut the stop
    // waited past a minute).
    expect(Date.now() - stopping).toBeLessThan(20_000)
  }, 40_000)
})
