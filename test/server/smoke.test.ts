import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestServer, type TestServer } from './harness.js'

let t: TestServer
beforeAll(async () => {
  t = await createTestServer()
})
afterAll(async () => {
  await t?.close()
})

describe('smoke', () => {
  it('creates a merchant and a payment', async () => {
    const { apiKey } = await t.createKey('test')
    const m = await t.request({
      method: 'POST',
      url: '/v1/merchants',
      headers: { 'api-key': apiKey, 'idempotency-key': 'k1' },
      payload: { merchantName: 'Shop', merchantEmail: 'a@b.co' },
    })
    expect(m.statusCode, m.body).toBe(201)
    const merchantId = m.json.merchant.id
    const p = await t.request({
      method: 'POST',
      url: '/v1/payments',
      headers: { 'api-key': apiKey, 'merchant-id': merchantId },
      payload: { referenceId: 'order-1', amount: { unit: 'iso4217/USD', value: '1250' } },
    })
    expect(p.statusCode, p.body).toBe(201)
    const g = await t.request({
      method: 'GET',
      url: `/v1/payments/${p.json.paymentId}`,
      headers: { 'api-key': apiKey, 'merchant-id': merchantId },
    })
    expect(g.statusCode, g.body).toBe(200)
    console.log(g.body, g.headers)
  })
})
