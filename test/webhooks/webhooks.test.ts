import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { verifyWebhook } from '../../src/client/webhooks.js'
import type { PaymentOption, WalletRpcAction } from '../../src/contract/gateway.js'
import { type WebhookEvent, webhookEventTypes } from '../../src/contract/webhooks.js'
import { createApiKey, createPartner } from '../../src/server/accounts/accounts.js'
import { resolveConfig } from '../../src/server/config.js'
import { type RunningServer, startServer } from '../../src/server/server.js'
import { webhookRetryDelaysMs } from '../../src/server/webhooks/deliver.js'
import { createBuyer, usdc } from '../gateway/support.js'
import { createTestDatabase, type TestDatabase } from '../postgres.js'
import { type Received, type Receiver, startReceiver, verifyWithStandardWebhooks } from './receiver.js'

/**
 * Merchant webhooks end to end in test mode: the real server (startServer: job runner and dispatcher
 * running) on a test database, real HTTP receivers on loopback, and every delivery verified with the
 * `standardwebhooks` package. The scheduler's clock is the server's `now`, moved by `advance`, so the
 * 27-hour retry schedule runs in seconds; signatures carry the real time, as receivers expect.
 */

let pg: TestDatabase
let server: RunningServer
let offset = 0
const now = () => new Date(Date.now() + offset)
const advance = (ms: number) => {
  offset += ms
}
let apiKey: string
let liveKey: string
let walletKey: string
let merchantId: string
const receivers: Receiver[] = []

async function call(
  method: string,
  url: string,
  body?: unknown,
  key = apiKey,
  extra: Record<string, string> = {},
) {
  const res = await server.app.inject({
    method: method as 'GET',
    url,
    headers: { 'api-key': key, ...extra },
    ...(body !== undefined ? { payload: body as Record<string, unknown> } : {}),
  })
  return { status: res.statusCode, json: res.body ? JSON.parse(res.body) : undefined, body: res.body }
}

async function receiver() {
  const r = await startReceiver()
  receivers.push(r)
  return r
}

async function register(url: string, enabledEvents?: string[], key = apiKey) {
  const res = await call(
    'POST',
    '/v1/webhook-endpoints',
    { url, ...(enabledEvents ? { enabledEvents } : {}) },
    key,
  )
  expect(res.status, res.body).toBe(201)
  return res.json as { id: string; secret: string; url: string; enabledEvents: string[] }
}

let reference = 0
async function createPayment(value = '1250') {
  reference += 1
  const res = await call(
    'POST',
    '/v1/payments',
    { referenceId: `wh-${reference}`, amount: { unit: 'iso4217/USD', value } },
    apiKey,
    { 'merchant-id': merchantId },
  )
  expect(res.status, res.body).toBe(201)
  return res.json.paymentId as string
}

async function payOnBase(paymentId: string) {
  const buyer = createBuyer()
  const gw = (suffix: string, body: unknown) =>
    call('POST', `/v1/gateway/payment/${paymentId}${suffix}`, body, walletKey)
  const options = await gw('/options', { accounts: Object.values(buyer.accounts) })
  const option = (options.json.options as PaymentOption[]).find((o) => o.account.startsWith('eip155:8453:'))!
  const actions = option.actions as WalletRpcAction[]
  const results = [] as string[]
  for (const action of actions) results.push(await buyer.sign(action))
  const confirm = await gw('/confirm', { optionId: option.id, results })
  expect(confirm.json.status, confirm.body).toBe('succeeded')
  return { option, buyer }
}

const simulate = (paymentId: string, outcome: string) =>
  call('POST', `/v1/test/payments/${paymentId}/simulate`, { outcome }, apiKey, { 'merchant-id': merchantId })

/** Every delivery the receiver got for one payment, verified, in payment_state_version order. */
async function eventsOf(r: Receiver, secret: string, paymentId: string, count: number) {
  const deadline = Date.now() + 15_000
  for (;;) {
    const mine = r.received.filter((x) => x.event.data.payment_id === paymentId)
    if (mine.length >= count || Date.now() > deadline) {
      expect(mine.length).toBe(count)
      return mine
        .map((x) => {
          expect(verifyWithStandardWebhooks(secret, x)).toEqual(x.event)
          expect(x.headers['svix-id']).toBe(x.event.id)
          return x.event
        })
        .sort((a, b) => a.data.payment_state_version - b.data.payment_state_version)
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

async function deliveriesOf(endpointId: string) {
  const res = await call('GET', `/v1/webhook-endpoints/${endpointId}/deliveries?limit=100`)
  expect(res.status, res.body).toBe(200)
  return res.json.data as {
    id: string
    eventId: string
    status: string
    attempts: number
    lastStatusCode: number | null
    lastError: string | null
    nextAttemptAt: string | null
  }[]
}

async function until<T>(what: () => Promise<T>, ok: (value: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await what()
    if (ok(value)) return value
    if (Date.now() > deadline) throw new Error(`timed out; last value ${JSON.stringify(value)}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

beforeAll(async () => {
  pg = await createTestDatabase()
  server = await startServer({
    port: 0,
    databaseUrl: pg.url,
    config: resolveConfig({ rateLimit: false, sandboxRefundDelayMs: 0, webhooks: { timeoutMs: 1500 } }),
    now,
    jobIntervalMs: 50,
    webhookDispatchIntervalMs: 50,
  })
  const partnerId = await createPartner(server.db)
  apiKey = (await createApiKey(server.db, { partnerId, mode: 'test', role: 'partner' })).apiKey
  liveKey = (await createApiKey(server.db, { partnerId, mode: 'live', role: 'partner' })).apiKey
  walletKey = (await createApiKey(server.db, { partnerId, mode: 'test', role: 'wallet' })).apiKey
  const merchant = await call(
    'POST',
    '/v1/merchants',
    { merchantName: 'Hooks', merchantEmail: 'hooks@example.com' },
    apiKey,
    {
      'idempotency-key': 'wh-merchant',
    },
  )
  merchantId = merchant.json.merchant.id
  const settlement = await call(
    'POST',
    `/v1/merchants/${merchantId}/settlements/crypto`,
    {
      settlements: [
        { asset: usdc.base, destination: 'eip155:8453:0x000000000000000000000000000000000000bEEF' },
      ],
    },
    apiKey,
    { 'idempotency-key': 'wh-settlement' },
  )
  expect(settlement.status, settlement.body).toBe(201)
})

afterAll(async () => {
  for (const r of receivers) await r.close()
  await server?.stop()
  await pg?.drop()
})

describe('webhook endpoints API', () => {
  it('registers (secret shown once), lists, reads without the secret, deletes', async () => {
    const r = await receiver()
    const created = await register(r.url)
    expect(created.id).toMatch(/^we_/)
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    expect(Buffer.from(created.secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(24)
    expect(created.enabledEvents).toEqual([
      'payment.created',
      'payment.processing',
      'payment.succeeded',
      'payment.failed',
      'payment.expired',
      'payment.cancelled',
      'payment.settled',
    ])
    const read = await call('GET', `/v1/webhook-endpoints/${created.id}`)
    expect(read.json).toEqual({
      id: created.id,
      url: r.url,
      enabledEvents: created.enabledEvents,
      createdAt: expect.any(String),
    })
    const list = await call('GET', '/v1/webhook-endpoints')
    expect(list.json.data.map((e: { id: string }) => e.id)).toContain(created.id)
    expect(JSON.stringify(list.json)).not.toContain('whsec_')
    // Test and live are separate: a live key does not see a test endpoint.
    expect((await call('GET', `/v1/webhook-endpoints/${created.id}`, undefined, liveKey)).status).toBe(404)
    const deleted = await call('DELETE', `/v1/webhook-endpoints/${created.id}`)
    expect(deleted.json).toEqual({ id: created.id, deleted: true })
    const gone = await call('GET', `/v1/webhook-endpoints/${created.id}`)
    expect([gone.status, gone.json.code]).toEqual([404, 'webhook_endpoint_not_found'])
  })

  it('refuses bad URLs with 400 params_validation: live needs https on a public address', async () => {
    const cases: [string, string][] = [
      ['not a url', apiKey],
      ['ftp://example.com/hook', apiKey],
      ['http://user:pw@127.0.0.1/hook', apiKey],
      ['http://10.0.0.1/hook', apiKey],
      ['http://169.254.169.254/latest/meta-data', apiKey],
      ['http://127.0.0.1:9/hook', liveKey],
      ['https://127.0.0.1:9/hook', liveKey],
      ['https://[::1]:9/hook', liveKey],
      ['https://192.168.1.10/hook', liveKey],
      ['https://[::ffff:10.0.0.1]/hook', liveKey],
    ]
    for (const [url, key] of cases) {
      const res = await call('POST', '/v1/webhook-endpoints', { url }, key)
      expect([url, res.status, res.json.code]).toEqual([url, 400, 'params_validation'])
    }
    const unknownEvent = await call('POST', '/v1/webhook-endpoints', {
      url: 'http://127.0.0.1/x',
      enabledEvents: ['payment.nope'],
    })
    expect([unknownEvent.status, unknownEvent.json.code]).toEqual([400, 'params_validation'])
    const missing = await call('POST', '/v1/webhook-endpoints/we_nope/rotate-secret')
    expect([missing.status, missing.json.code]).toEqual([404, 'webhook_endpoint_not_found'])
  })

  it('a test event is sent now, live: false, and listed', async () => {
    const r = await receiver()
    const endpoint = await register(r.url)
    const res = await call('POST', `/v1/webhook-endpoints/${endpoint.id}/test`)
    expect(res.status, res.body).toBe(200)
    expect(res.json).toMatchObject({
      status: 'succeeded',
      attempts: 1,
      lastStatusCode: 200,
      eventType: 'payment.created',
    })
    const [got] = await r.waitFor(1)
    const event = verifyWithStandardWebhooks(endpoint.secret, got!)
    expect(event).toMatchObject({ id: res.json.eventId, type: 'payment.created', api_version: '2026-05-18' })
    expect(event.data.live).toBe(false)
    expect((await verifyWebhook(endpoint.secret, got!.headers, got!.body)).id).toBe(event.id)
    expect((await deliveriesOf(endpoint.id)).map((d) => d.id)).toEqual([res.json.id])
  })
})

describe('payment events', () => {
  it('a confirmed test payment: created, processing, succeeded, settled, field by field', async () => {
    const r = await receiver()
    const endpoint = await register(r.url)
    const paymentId = await createPayment('1250')
    const { option, buyer } = await payOnBase(paymentId)
    const events = await eventsOf(r, endpoint.secret, paymentId, 4)
    expect(events.map((e) => [e.type, e.data.payment_state_version])).toEqual([
      ['payment.created', 0],
      ['payment.processing', 1],
      ['payment.succeeded', 2],
      ['payment.settled', 3],
    ])
    for (const e of events) {
      expect(Object.keys(e).sort()).toEqual(['api_version', 'created_at', 'data', 'id', 'type'])
      expect(e.id).toMatch(/^evt_/)
      expect(e.api_version).toBe('2026-05-18')
      expect(new Date(e.created_at).toISOString()).toBe(e.created_at)
      expect(Object.keys(e.data).sort()).toEqual(
        [
          'payment_id',
          'merchant_id',
          'live',
          'payment_state_version',
          'reference_id',
          'status',
          'amount',
          'created_at',
          'expires_at',
          'processing',
          'success',
          'failed',
          'cancelled',
          'expired',
          'settled',
        ].sort(),
      )
      expect(e.data).toMatchObject({
        payment_id: paymentId,
        merchant_id: merchantId,
        live: false,
        reference_id: `wh-${reference}`,
        amount: { unit: 'iso4217/USD', value: '1250' },
        failed: null,
        cancelled: null,
        expired: null,
      })
    }
    const [created, processing, succeeded, settled] = events as [
      WebhookEvent,
      WebhookEvent,
      WebhookEvent,
      WebhookEvent,
    ]
    expect(created.data).toMatchObject({
      status: 'requires_action',
      processing: null,
      success: null,
      settled: null,
    })
    const processingStage = {
      processing_at: expect.any(String),
      option_amount: { unit: option.amount.unit, value: option.amount.value },
      fee: null,
      settlement_amount: { unit: option.amount.unit, value: option.amount.value },
      buyer_caip10: buyer.accounts.base,
      chain_caip2: 'eip155:8453',
    }
    expect(processing.data).toMatchObject({
      status: 'processing',
      processing: processingStage,
      success: null,
      settled: null,
    })
    expect(succeeded.data).toMatchObject({
      status: 'succeeded',
      processing: processingStage,
      success: { succeeded_at: expect.any(String), tx_id: `test:${paymentId}` },
      settled: null,
    })
    expect(settled.data).toMatchObject({
      status: 'succeeded',
      success: { tx_id: `test:${paymentId}` },
      settled: {
        settled_at: expect.any(String),
        tx_id: `test:${paymentId}:settlement`,
        amount: { unit: `caip19/${usdc.base}`, value: option.amount.value },
      },
    })
    expect(new Set(events.map((e) => e.id)).size).toBe(4)
  })

  it('simulate-driven outcomes: failed, expired, cancelled; refunded only when enabled explicitly', async () => {
    const r = await receiver()
    const endpoint = await register(r.url)
    const withRefunds = await receiver()
    const refundsOnly = await register(withRefunds.url, [
      'payment.refunded',
      'refund.created',
      'refund.succeeded',
    ])
    const failed = await createPayment()
    await simulate(failed, 'failed')
    const expired = await createPayment()
    await simulate(expired, 'expired')
    const cancelled = await createPayment()
    await simulate(cancelled, 'cancelled')
    const refunded = await createPayment()
    await simulate(refunded, 'succeeded')
    await call('POST', '/v1/refunds', { paymentId: refunded }, apiKey, { 'merchant-id': merchantId })

    const f = await eventsOf(r, endpoint.secret, failed, 3)
    expect(f.map((e) => e.type)).toEqual(['payment.created', 'payment.processing', 'payment.failed'])
    expect(f[2]!.data).toMatchObject({
      status: 'failed',
      failed: { failed_at: expect.any(String), failure_reason: 'declined_user' },
    })
    // A forced outcome is paid by a sandbox buyer: the processing facts a real payment has, no nulls.
    for (const event of f.slice(1)) {
      expect(event.data.processing).toEqual({
        processing_at: expect.any(String),
        option_amount: {
          unit: 'caip19/eip155:1/erc20:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48',
          value: expect.stringMatching(/^[1-9][0-9]*$/),
        },
        fee: null,
        settlement_amount: event.data.processing!.option_amount,
        buyer_caip10: 'eip155:1:0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed',
        chain_caip2: 'eip155:1',
      })
    }
    const x = await eventsOf(r, endpoint.secret, expired, 2)
    expect(x.map((e) => [e.type, e.data.payment_state_version])).toEqual([
      ['payment.created', 0],
      ['payment.expired', 1],
    ])
    expect(x[1]!.data).toMatchObject({
      status: 'expired',
      expired: { expired_at: expect.any(String) },
      processing: null,
    })
    const c = await eventsOf(r, endpoint.secret, cancelled, 2)
    expect(c[1]!.data).toMatchObject({
      status: 'cancelled',
      cancelled: { cancelled_at: expect.any(String), cancellation_reason: 'cancelled_by_merchant' },
    })
    const s = await eventsOf(r, endpoint.secret, refunded, 3)
    expect(s.map((e) => e.type)).toEqual(['payment.created', 'payment.processing', 'payment.succeeded'])
    const refundEvents = await eventsOf(withRefunds, refundsOnly.secret, refunded, 3)
    expect(refundEvents.map((e) => [e.type, e.data.payment_state_version])).toEqual([
      ['refund.created', 3],
      ['refund.succeeded', 4],
      ['payment.refunded', 5],
    ])
    expect(refundEvents[1]!.data).toMatchObject({
      payment_id: refunded,
      status: 'succeeded',
      tx_id: expect.any(String),
    })
    expect(refundEvents[2]!.data).toMatchObject({ status: 'succeeded', payment_state_version: 5 })
    // The default endpoint got none of caipay's own events; the refunds endpoint nothing else.
    expect(r.received.some((x) => /refund/.test(x.event.type))).toBe(false)
    expect(withRefunds.received.every((x) => /refund/.test(x.event.type))).toBe(true)
  })

  it("two partners: each endpoint receives its own partner's payment, settlement and refund events only", async () => {
    const otherKey = (
      await createApiKey(server.db, { partnerId: await createPartner(server.db), mode: 'test' })
    ).apiKey
    const other = await call(
      'POST',
      '/v1/merchants',
      { merchantName: 'B', merchantEmail: 'b@example.com' },
      otherKey,
      {
        'idempotency-key': 'wh-merchant-b',
      },
    )
    const otherMerchant = other.json.merchant.id as string
    const everything = [...webhookEventTypes]
    const mine = await receiver()
    const mineEndpoint = await register(mine.url, everything)
    const theirs = await receiver()
    const theirsEndpoint = await register(theirs.url, everything, otherKey)
    const pay = async (key: string, merchant: string) => {
      const created = await call(
        'POST',
        '/v1/payments',
        { referenceId: 'two-partners', amount: { unit: 'iso4217/USD', value: '800' } },
        key,
        { 'merchant-id': merchant },
      )
      await call(
        'POST',
        `/v1/test/payments/${created.json.paymentId}/simulate`,
        { outcome: 'succeeded' },
        key,
        {
          'merchant-id': merchant,
        },
      )
      const refunded = await call('POST', '/v1/refunds', { paymentId: created.json.paymentId }, key, {
        'merchant-id': merchant,
      })
      expect(refunded.status, refunded.body).toBe(201)
      return created.json.paymentId as string
    }
    const a = await pay(apiKey, merchantId)
    const b = await pay(otherKey, otherMerchant)
    const refundedIn = async (r: Receiver, secret: string, paymentId: string) => {
      // Deliveries are not ordered: wait for both ends of the refund, whichever arrives last.
      const deadline = Date.now() + 15_000
      const arrived = (type: string) =>
        r.received.some((x) => x.event.type === type && x.event.data.payment_id === paymentId)
      while (!arrived('payment.refunded') || !arrived('refund.succeeded')) {
        if (Date.now() > deadline)
          throw new Error(`no payment.refunded and refund.succeeded for ${paymentId}`)
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
      const own = r.received.filter((x) => x.event.data.payment_id === paymentId)
      for (const x of own) expect(verifyWithStandardWebhooks(secret, x)).toEqual(x.event)
      return own.map((x) => x.event.type)
    }
    for (const [r, secret, paymentId] of [
      [mine, mineEndpoint.secret, a],
      [theirs, theirsEndpoint.secret, b],
    ] as const) {
      const types = await refundedIn(r, secret, paymentId)
      expect(types).toEqual(
        expect.arrayContaining(['payment.succeeded', 'refund.created', 'refund.succeeded']),
      )
    }
    // Neither endpoint got anything of the other partner's.
    expect(mine.received.some((x) => x.event.data.payment_id === b)).toBe(false)
    expect(theirs.received.every((x) => x.event.data.payment_id === b)).toBe(true)
  })
})

describe('delivery', () => {
  it('500 then 200: the same svix-id and the same body again after 5 s', async () => {
    const r = await receiver()
    let calls = 0
    r.respond = () => (++calls === 1 ? 500 : 200)
    const endpoint = await register(r.url, ['payment.created'])
    const paymentId = await createPayment()
    const [first] = await r.waitFor(1)
    const pending = await until(
      () => deliveriesOf(endpoint.id),
      (d) => d[0]?.lastStatusCode === 500,
    )
    expect(pending[0]).toMatchObject({ status: 'pending', attempts: 1, lastError: 'HTTP 500: ok' })
    expect(new Date(pending[0]!.nextAttemptAt!).getTime() - now().getTime()).toBeGreaterThan(3_000)
    // Not before 5 s on the scheduler's clock.
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(r.received).toHaveLength(1)
    advance(webhookRetryDelaysMs[0])
    const [, second] = await r.waitFor(2)
    expect(second!.headers['svix-id']).toBe(first!.headers['svix-id'])
    expect(second!.body).toBe(first!.body)
    expect(verifyWithStandardWebhooks(endpoint.secret, second!).data.payment_id).toBe(paymentId)
    const done = await until(
      () => deliveriesOf(endpoint.id),
      (d) => d[0]?.status === 'succeeded',
    )
    expect(done[0]).toMatchObject({ attempts: 2, lastStatusCode: 200, nextAttemptAt: null })
  })

  it('a receiver down for the whole schedule: 8 attempts, then failed; manual retry delivers', async () => {
    const r = await receiver()
    r.respond = () => 503
    const endpoint = await register(r.url, ['payment.created'])
    const paymentId = await createPayment()
    await r.waitFor(1)
    for (const [i, delay] of webhookRetryDelaysMs.entries()) {
      const [delivery] = await until(
        () => deliveriesOf(endpoint.id),
        (d) => d[0]?.attempts === i + 1,
      )
      // The runner reschedules the job after the attempt is recorded: move the clock only once it
      // has, or the next attempt would be scheduled from the moved clock and never come due.
      await until(
        () =>
          server.db
            .selectFrom('jobs')
            .select('locked_until')
            .where('delivery_id', '=', delivery!.id)
            .execute(),
        (jobs) => jobs.length === 1 && jobs[0]!.locked_until === null,
      )
      advance(delay)
      await r.waitFor(i + 2)
    }
    const failed = await until(
      () => deliveriesOf(endpoint.id),
      (d) => d[0]?.status === 'failed',
    )
    expect(failed[0]).toMatchObject({ attempts: 8, lastStatusCode: 503, nextAttemptAt: null })
    advance(24 * 3_600_000)
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(r.received).toHaveLength(8)
    expect(new Set(r.received.map((x) => x.headers['svix-id'])).size).toBe(1)

    r.respond = () => 200
    const retried = await call(
      'POST',
      `/v1/webhook-endpoints/${endpoint.id}/deliveries/${failed[0]!.id}/retry`,
    )
    expect(retried.status, retried.body).toBe(200)
    expect(retried.json).toMatchObject({ status: 'succeeded', attempts: 9, lastStatusCode: 200 })
    const last = r.received.at(-1)!
    expect(last.body).toBe(r.received[0]!.body)
    expect(verifyWithStandardWebhooks(endpoint.secret, last).data.payment_id).toBe(paymentId)
    const unknown = await call('POST', `/v1/webhook-endpoints/${endpoint.id}/deliveries/msgd_nope/retry`)
    expect([unknown.status, unknown.json.code]).toEqual([404, 'webhook_delivery_not_found'])
  })

  it('a hanging endpoint does not hold up another endpoint; it times out and retries', async () => {
    const slow = await receiver()
    slow.hang = true
    const fast = await receiver()
    const slowEndpoint = await register(slow.url, ['payment.created'])
    const fastEndpoint = await register(fast.url, ['payment.created'])
    const started = Date.now()
    const paymentId = await createPayment()
    const [got] = await fast.waitFor(1)
    expect(got!.event.data.payment_id).toBe(paymentId)
    expect(got!.at - started).toBeLessThan(1_000)
    await slow.waitFor(1)
    const timedOut = await until(
      () => deliveriesOf(slowEndpoint.id),
      (d) => d[0]?.lastError !== null && d[0]?.lastError !== undefined,
    )
    expect(timedOut[0]).toMatchObject({
      status: 'pending',
      attempts: 1,
      lastStatusCode: null,
      lastError: 'No answer within 1500 ms.',
    })
    expect((await deliveriesOf(fastEndpoint.id))[0]).toMatchObject({ status: 'succeeded' })
  })

  it('a redirect is a failed attempt, not followed', async () => {
    const target = await receiver()
    const redirecting = await receiver()
    redirecting.respond = () => 307
    const endpoint = await register(redirecting.url, ['payment.created'])
    await createPayment()
    await redirecting.waitFor(1)
    const d = await until(
      () => deliveriesOf(endpoint.id),
      (x) => x[0]?.lastStatusCode === 307,
    )
    expect(d[0]).toMatchObject({ status: 'pending', lastError: 'HTTP 307: ok' })
    expect(target.received).toHaveLength(0)
  })

  it('deleting an endpoint stops its deliveries at once', async () => {
    const r = await receiver()
    r.respond = () => 500
    const endpoint = await register(r.url, ['payment.created'])
    await createPayment()
    await r.waitFor(1)
    await until(
      () => deliveriesOf(endpoint.id),
      (d) => d[0]?.attempts === 1,
    )
    await call('DELETE', `/v1/webhook-endpoints/${endpoint.id}`)
    advance(webhookRetryDelaysMs[0])
    await new Promise((resolve) => setTimeout(resolve, 500))
    expect(r.received).toHaveLength(1)
  })

  it('rotation: for 24 hours a delivery verifies with either secret, then only with the new one', async () => {
    const r = await receiver()
    const endpoint = await register(r.url, ['payment.created'])
    const rotated = await call('POST', `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`)
    expect(rotated.status, rotated.body).toBe(200)
    const secret = rotated.json.secret as string
    expect(secret).toMatch(/^whsec_/)
    expect(secret).not.toBe(endpoint.secret)
    await createPayment()
    const [during] = await r.waitFor(1)
    expect(String(during!.headers['svix-signature']).split(' ')).toHaveLength(2)
    for (const s of [secret, endpoint.secret]) {
      expect(verifyWithStandardWebhooks(s, during!).type).toBe('payment.created')
      expect((await verifyWebhook(s, during!.headers, during!.body)).type).toBe('payment.created')
    }
    advance(24 * 3_600_000 + 1_000)
    await createPayment()
    const [, after] = await r.waitFor(2)
    expect(verifyWithStandardWebhooks(secret, after!).type).toBe('payment.created')
    expect(() => verifyWithStandardWebhooks(endpoint.secret, after!)).toThrow()
    await expect(verifyWebhook(endpoint.secret, after!.headers, after!.body)).rejects.toMatchObject({
      code: 'invalid_webhook_signature',
    })
  })
})

describe('verifyWebhook (caipay/client)', () => {
  it('refuses a changed body, a stale timestamp and a wrong secret', async () => {
    const r = await receiver()
    const endpoint = await register(r.url)
    await call('POST', `/v1/webhook-endpoints/${endpoint.id}/test`)
    const [got] = (await r.waitFor(1)) as Received[]
    await expect(verifyWebhook(endpoint.secret, got!.headers, got!.body)).resolves.toMatchObject({
      type: 'payment.created',
    })
    await expect(
      verifyWebhook(endpoint.secret, got!.headers, got!.body.replace('1000', '9999')),
    ).rejects.toMatchObject({
      code: 'invalid_webhook_signature',
    })
    await expect(
      verifyWebhook(endpoint.secret, got!.headers, got!.body, { now: new Date(Date.now() + 6 * 60_000) }),
    ).rejects.toMatchObject({ code: 'invalid_webhook_signature' })
    await expect(
      verifyWebhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`, got!.headers, got!.body),
    ).rejects.toMatchObject({
      code: 'invalid_webhook_signature',
    })
    // A Headers object works as well as Node's header record.
    await expect(
      verifyWebhook(endpoint.secret, new Headers(got!.headers as Record<string, string>), got!.body),
    ).resolves.toBeDefined()
  })
})
