import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestServer, type TestServer } from './harness.js'
import { createMerchant, headers, idem } from './helpers.js'

/** What an outside fuzzer (Schemathesis) found the server doing that its published contract did not say. */
describe('the server answers as its contract says', () => {
  let t: TestServer
  let key: string
  let merchant: string
  beforeAll(async () => {
    t = await createTestServer()
    key = (await t.createKey('test')).apiKey
    merchant = await createMerchant(t, key)
  })
  afterAll(() => t.close())

  it('deletes a webhook endpoint under an Idempotency-Key, and replays the deletion', async () => {
    const created = await t.request({
      method: 'POST',
      url: '/v1/webhook-endpoints',
      headers: headers(key),
      payload: { url: 'http://127.0.0.1:9/hooks' },
    })
    expect(created.statusCode, created.body).toBe(201)
    const key1 = idem()
    const del = () =>
      t.request({
        method: 'DELETE',
        url: `/v1/webhook-endpoints/${created.json.id}`,
        headers: headers(key, undefined, { 'idempotency-key': key1 }),
      })
    const first = await del()
    expect([first.statusCode, first.json]).toEqual([200, { id: created.json.id, deleted: true }])
    const again = await del()
    expect([again.statusCode, again.headers['idempotent-replayed']]).toEqual([200, 'true'])
    const read = await t.request({ url: `/v1/webhook-endpoints/${created.json.id}`, headers: headers(key) })
    expect([read.statusCode, read.json.code]).toEqual([404, 'webhook_endpoint_not_found'])
  })

  it('refuses an empty Idempotency-Key instead of creating without one', async () => {
    const create = () =>
      t.request({
        method: 'POST',
        url: '/v1/payments',
        headers: headers(key, merchant, { 'idempotency-key': '' }),
        payload: { referenceId: 'empty-key', amount: { unit: 'iso4217/USD', value: '100' } },
      })
    for (const res of [await create(), await create()]) {
      expect([res.statusCode, res.json.code]).toEqual([400, 'invalid_params'])
    }
    const listed = await t.request({
      url: '/v1/merchants/payments?referenceId=empty-key',
      headers: headers(key, merchant),
    })
    expect(listed.json.data).toEqual([])
  })

  it('refuses an empty Pay-Version instead of using the pinned one', async () => {
    const res = await t.request({
      url: '/v1/merchants',
      headers: headers(key, undefined, { 'pay-version': '' }),
    })
    expect([res.statusCode, res.json.code]).toEqual([400, 'invalid_api_version'])
  })

  it('a missing crypto settlement is 404 settlement_not_found', async () => {
    for (const method of ['PUT', 'DELETE'] as const) {
      const res = await t.request({
        method,
        url: `/v1/merchants/${merchant}/settlements/crypto/crypto_missing`,
        headers: headers(key),
        ...(method === 'PUT'
          ? { payload: { destination: 'eip155:1:0x1111111111111111111111111111111111111111' } }
          : {}),
      })
      expect([res.statusCode, res.json.code], method).toEqual([404, 'settlement_not_found'])
    }
  })

  it('webhook-endpoint lists refuse unknown query parameters like every other list', async () => {
    const endpoints = await t.request({ url: '/v1/webhook-endpoints?colour=red', headers: headers(key) })
    expect([endpoints.statusCode, endpoints.json.code]).toEqual([400, 'params_validation'])
    const deliveries = await t.request({
      url: '/v1/webhook-endpoints/whe_x/deliveries?colour=red',
      headers: headers(key),
    })
    expect([deliveries.statusCode, deliveries.json.code]).toEqual([400, 'params_validation'])
  })

  it('integer query parameters take decimal integers only', async () => {
    for (const limit of ['1.5', '1e1', '0x10', ' 5', '-1', '0', '101']) {
      const res = await t.request({
        url: `/v1/merchants?limit=${encodeURIComponent(limit)}`,
        headers: headers(key),
      })
      expect([res.statusCode, res.json.code], limit).toEqual([400, 'params_validation'])
    }
    expect((await t.request({ url: '/v1/merchants?limit=100', headers: headers(key) })).statusCode).toBe(200)
    const ts = await t.request({ url: '/v1/payments?startTs=1.5', headers: headers(key) })
    expect([ts.statusCode, ts.json.code]).toEqual([400, 'params_validation'])
  })

  it('PATCH /v1/merchants/{id} with {} is refused', async () => {
    const res = await t.request({
      method: 'PATCH',
      url: `/v1/merchants/${merchant}`,
      headers: headers(key),
      payload: {},
    })
    expect([res.statusCode, res.json.code]).toEqual([400, 'params_validation'])
  })

  it('a method a path does not have is 405 with Allow; an unknown path stays 404', async () => {
    for (const [method, url, allow] of [
      ['TRACE', '/healthz', 'GET, HEAD'],
      ['PUT', '/v1/payments', 'GET, HEAD, POST'],
      ['DELETE', '/v1/payments/pay_abc/status', 'GET, HEAD'],
      ['DELETE', '/v1/refunds', 'GET, HEAD, POST'],
      // A static path is its own route's, not a merchant id of /v1/merchants/{merchantId}.
      ['PATCH', '/v1/merchants/payments', 'GET, HEAD'],
    ] as const) {
      const res = await t.request({ method, url, headers: headers(key, merchant) })
      expect([res.statusCode, res.headers.allow, res.json.code], `${method} ${url}`).toEqual([
        405,
        allow,
        'invalid_params',
      ])
    }
    const unknown = await t.request({ url: '/v1/nothing-here', headers: headers(key) })
    expect(unknown.statusCode).toBe(404)
  })
})
