import fc from 'fast-check'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import * as z from 'zod/mini'
import { endpoint } from '../../src/contract/endpoint.js'
import { type Endpoint, endpoints } from '../../src/contract/endpoints.js'
import { isServiceErrorCode } from '../../src/contract/errors.js'
import { defineRoute } from '../../src/server/route.js'
import { createTestServer, type TestServer } from './harness.js'
import { createMerchant, createPayment } from './helpers.js'

/** Nothing a client sends may produce a 500: every failure is a spec code with a message. */
let t: TestServer
let key: string
let walletKey: string
let merchantId: string
let paymentId: string

beforeAll(async () => {
  t = await createTestServer()
  key = (await t.createKey('test')).apiKey
  walletKey = (await t.createKey('test', 'wallet')).apiKey
  const boom = endpoint({
    method: 'GET',
    path: '/__test/boom',
    auth: 'partner',
    response: z.object({ ok: z.boolean() }),
    status: 200,
    summary: 'test',
  })
  defineRoute(t.app, boom, async () => {
    throw new Error('secret database detail')
  })
  const wrongShape = endpoint({
    method: 'GET',
    path: '/__test/shape',
    auth: 'partner',
    response: z.object({ ok: z.boolean() }),
    status: 200,
    summary: 'test',
  })
  defineRoute(t.app, wrongShape, async () => ({ ok: 'yes' }) as unknown as { ok: boolean })
})
afterAll(() => t.close())
// Earlier probes may delete the merchant or cancel the payment: each test starts from fresh ones.
beforeEach(async () => {
  merchantId = await createMerchant(t, key)
  paymentId = await createPayment(t, key, merchantId)
})

function urlOf(
  e: Endpoint,
  param = (name: string) => (name === 'merchantId' ? merchantId : name === 'id' ? paymentId : 'x'),
) {
  return e.path.replace(/:([A-Za-z]+)/g, (_, name: string) => encodeURIComponent(param(name)))
}

function expectClean(res: { statusCode: number; body: string; json: any }, label: string) {
  expect(res.statusCode, `${label}: ${res.body}`).toBeLessThan(500)
  if (res.statusCode >= 400) {
    expect(isServiceErrorCode(res.json?.code), `${label}: ${res.body}`).toBe(true)
    expect(typeof res.json.message, label).toBe('string')
    expect(res.body, label).not.toMatch(/stack|at [A-Za-z]+ \(|node_modules|SELECT|INSERT/)
  }
}

const all = Object.entries(endpoints) as [string, Endpoint][]
const baseHeaders = () => ({
  'api-key': key,
  'merchant-id': merchantId,
  'idempotency-key': `k-${Math.random()}`,
})

describe('no 500s', () => {
  it('malformed JSON, wrong JSON types and unknown fields', async () => {
    const bodies: (string | undefined)[] = [
      '{bad json',
      '{"a":',
      'null',
      '[]',
      '"string"',
      '42',
      'true',
      '{"__proto__":{"polluted":1}}',
      '{"constructor":{"prototype":{"x":1}}}',
      JSON.stringify({ unknownField: 1 }),
      JSON.stringify({
        referenceId: { nested: true },
        amount: [],
        merchantName: 1,
        settlements: 'x',
        paymentId: null,
        accounts: 5,
        optionId: [],
        results: {},
      }),
      JSON.stringify({
        referenceId: 'a'.repeat(10_000),
        amount: { unit: 'iso4217/USD', value: '9'.repeat(500) },
      }),
      '\u0000',
      '',
    ]
    for (const [name, e] of all) {
      if (e.method === 'GET') continue
      for (const body of bodies) {
        const res = await t.request({
          method: e.method,
          url: urlOf(e),
          headers: { ...baseHeaders(), 'content-type': 'application/json' },
          ...(body === undefined ? {} : { payload: body }),
        })
        expectClean(res, `${name} ${body?.slice(0, 30)}`)
      }
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })

  it('huge bodies and unsupported content types', async () => {
    const huge = JSON.stringify({ merchantName: 'x'.repeat(1_200_000), merchantEmail: 'a@example.com' })
    for (const [name, e] of all) {
      if (e.method === 'GET') continue
      const big = await t.request({
        method: e.method,
        url: urlOf(e),
        headers: { ...baseHeaders(), 'content-type': 'application/json' },
        payload: huge,
      })
      expectClean(big, `${name} huge`)
      // A route not registered in this app (another group's) answers 404 before reading the body.
      if (!big.json.message.startsWith('No route')) {
        expect(big.statusCode, `${name}: ${big.body}`).toBe(400)
        expect(big.json.code).toBe('invalid_params')
      }
      for (const type of [
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/xml',
      ]) {
        const res = await t.request({
          method: e.method,
          url: urlOf(e),
          headers: { ...baseHeaders(), 'content-type': type },
          payload: 'a=1',
        })
        expectClean(res, `${name} ${type}`)
        expect(res.statusCode).toBeGreaterThanOrEqual(400)
      }
    }
  })

  it('bad headers on every route', async () => {
    const variants: Record<string, string>[] = [
      {},
      { 'api-key': '' },
      { 'api-key': 'x'.repeat(5000) },
      { 'api-key': 'svc_test_\u00ff\u00fe' },
      { 'api-key': walletKey },
      { 'api-key': key, 'merchant-id': 'm'.repeat(5000) },
      { 'api-key': key, 'merchant-id': '\u00e9' },
      { 'api-key': key, 'pay-version': '\u00e9' },
      { 'api-key': key, 'pay-version': '9999-99-99' },
      { 'api-key': key, 'idempotency-key': '\u00e9' },
      { 'api-key': key, 'app-id': 'app_test_x' },
      { 'app-id': `app_test_${'x'.repeat(300)}`, 'client-id': 'c'.repeat(300) },
      { 'app-id': '\u00e9', 'client-id': '\u00e9' },
      { 'client-id': 'only' },
    ]
    for (const [name, e] of all) {
      for (const h of variants) {
        const res = await t.request({
          method: e.method,
          url: urlOf(e),
          headers: h,
          ...(e.body ? { payload: {} } : {}),
        })
        expectClean(res, `${name} ${JSON.stringify(h).slice(0, 60)}`)
      }
    }
  })

  it('weird path parameters and query strings', async () => {
    const params = [
      '',
      ' ',
      '%00',
      '..',
      '../..',
      'x'.repeat(2000),
      '\u00e9\u4e2d',
      `pay_${'a'.repeat(100)}`,
      "pay_1' OR '1'='1",
      '%E0%A4%A',
    ]
    for (const [name, e] of all) {
      if (!e.path.includes(':')) continue
      for (const p of params) {
        const url = e.path.replace(/:([A-Za-z]+)/g, () => (p.startsWith('%') ? p : encodeURIComponent(p)))
        const res = await t.request({
          method: e.method,
          url,
          headers: baseHeaders(),
          ...(e.body ? { payload: {} } : {}),
        })
        expectClean(res, `${name} ${p.slice(0, 20)}`)
      }
    }
    for (const q of [
      'limit=1e3',
      'limit=',
      'limit[]=1',
      'cursor=%FF',
      'status[]=x',
      'startTs=-1',
      'endTs=abc',
      'startTs=100000000000000',
      `cursor=${Buffer.from('["-200000-01-01T00:00:00.000Z","x"]').toString('base64url')}`,
      `search=${'a'.repeat(300)}`,
      'a=1&a=2',
      '%%%',
      `cursor=${'A'.repeat(600)}`,
    ]) {
      for (const url of [
        '/v1/merchants',
        '/v1/payments',
        '/v1/merchants/payments',
        `/v1/merchants/${merchantId}/payments`,
      ]) {
        const res = await t.request({ method: 'GET', url: `${url}?${q}`, headers: baseHeaders() })
        expectClean(res, `${url}?${q}`)
      }
    }
  })

  it('unknown errors are a bare 500 internal_error with the request id', async () => {
    for (const url of ['/__test/boom', '/__test/shape']) {
      const res = await t.request({ method: 'GET', url, headers: { 'api-key': key } })
      expect(res.statusCode).toBe(500)
      expect(res.json).toEqual({
        code: 'internal_error',
        message: expect.stringContaining(res.headers['request-id'] as string),
      })
      expect(res.body).not.toContain('secret')
    }
  })

  it('NUL characters never reach PostgreSQL', async () => {
    const body = await t.request({
      method: 'POST',
      url: '/v1/merchants',
      headers: { ...baseHeaders(), 'content-type': 'application/json' },
      payload: '{"merchantName":"a\\u0000b","merchantEmail":"a@example.com"}',
    })
    expect(body.statusCode).toBe(400)
    expect(body.json.code).toBe('invalid_params')
    const query = await t.request({ method: 'GET', url: '/v1/merchants?search=%00', headers: baseHeaders() })
    expect(query.statusCode).toBe(400)
  })

  it('unknown routes: 404 with a code; a method the path lacks: 405 with Allow', async () => {
    for (const [method, url] of [
      ['GET', '/v1/nothing'],
      ['GET', '/nothing'],
    ] as const) {
      const res = await t.request({ method, url })
      expect(res.statusCode).toBe(404)
      expect(res.json.code).toBe('invalid_params')
    }
    for (const [method, url, allow] of [
      ['PATCH', '/v1/payments', 'GET, HEAD, POST'],
      ['DELETE', '/v1/refunds', 'GET, HEAD, POST'],
    ] as const) {
      const res = await t.request({ method, url })
      expect([res.statusCode, res.headers.allow, res.json.code]).toEqual([405, allow, 'invalid_params'])
    }
  })

  it('random JSON bodies (property)', async () => {
    const targets = all.filter(([, e]) => e.body).map(([name, e]) => ({ name, e }))
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...targets), fc.jsonValue(), async ({ name, e }, body) => {
        const res = await t.request({
          method: e.method,
          url: urlOf(e),
          headers: { ...baseHeaders(), 'content-type': 'application/json' },
          payload: JSON.stringify(body),
        })
        expectClean(res, name)
      }),
      { numRuns: 150 },
    )
  })

  it('random payment create bodies near the valid shape (property)', async () => {
    const unit = fc.oneof(
      fc.constant('iso4217/USD'),
      fc.constant('iso4217/JPY'),
      fc.string(),
      fc.constant('caip19/eip155:1/erc20:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48'),
    )
    const value = fc.oneof(fc.bigInt({ min: -10n, max: 10n ** 40n }).map(String), fc.string(), fc.integer())
    await fc.assert(
      fc.asyncProperty(
        fc.record(
          {
            referenceId: fc.string({ maxLength: 40 }),
            amount: fc.record({ unit, value }),
            expiresAt: fc.option(fc.integer()),
          },
          { requiredKeys: [] },
        ),
        async (body) => {
          const res = await t.request({
            method: 'POST',
            url: '/v1/payments',
            headers: { 'api-key': key, 'merchant-id': merchantId },
            payload: body,
          })
          expectClean(res, JSON.stringify(body))
        },
      ),
      { numRuns: 150 },
    )
  })
})
