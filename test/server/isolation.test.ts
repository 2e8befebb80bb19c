import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestServer, type TestServer } from './harness.js'
import { createMerchant, createPayment, headers, idem, succeedPayment } from './helpers.js'

/**
 * Partner A's test-mode merchant, settlement and payment must be invisible (404, never 403) to:
 * A's live key, B's test key and B's live key.
 */
const asset = 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'
const wallet = 'eip155:8453:0x1111111111111111111111111111111111111111'

let t: TestServer
let owner: string
let merchantId: string
let settlementId: string
let paymentId: string
let refundId: string
const others: Record<string, { key: string; ownMerchant: string }> = {}

beforeAll(async () => {
  t = await createTestServer()
  owner = (await t.createKey('test')).apiKey
  merchantId = await createMerchant(t, owner)
  const s = await t.request({
    method: 'POST',
    url: `/v1/merchants/${merchantId}/settlements/crypto`,
    headers: headers(owner, undefined, { 'idempotency-key': idem() }),
    payload: { settlements: [{ asset, destination: wallet }] },
  })
  settlementId = s.json.settlements[0].id
  paymentId = await createPayment(t, owner, merchantId)
  await succeedPayment(t, paymentId)
  const partial = await t.request({
    method: 'POST',
    url: '/v1/refunds',
    headers: headers(owner, merchantId),
    payload: { paymentId, amount: { unit: 'iso4217/USD', value: '1' } },
  })
  expect(partial.statusCode, partial.body).toBe(201)
  refundId = partial.json.refundId
  const partnerB = await t.createPartner()
  for (const [name, mode, partner] of [
    ['A live', 'live', t.partnerId],
    ['B test', 'test', partnerB],
    ['B live', 'live', partnerB],
  ] as const) {
    const key = (await t.createKey(mode, 'partner', partner)).apiKey
    others[name] = { key, ownMerchant: await createMerchant(t, key) }
  }
})
afterAll(() => t.close())

type Probe = {
  name: string
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  url: string
  merchant?: 'victim' | 'own'
  payload?: object
  code: string
}

const probes = (): Probe[] => [
  { name: 'read merchant', method: 'GET', url: `/v1/merchants/${merchantId}`, code: 'merchant_not_found' },
  {
    name: 'patch merchant',
    method: 'PATCH',
    url: `/v1/merchants/${merchantId}`,
    payload: { merchantName: 'x' },
    code: 'merchant_not_found',
  },
  {
    name: 'delete merchant',
    method: 'DELETE',
    url: `/v1/merchants/${merchantId}`,
    code: 'merchant_not_found',
  },
  {
    name: 'list settlements',
    method: 'GET',
    url: `/v1/merchants/${merchantId}/settlements`,
    code: 'merchant_not_found',
  },
  {
    name: 'add settlement',
    method: 'POST',
    url: `/v1/merchants/${merchantId}/settlements/crypto`,
    payload: { settlements: [{ asset: asset.replace('0x83', '0x84'), destination: wallet }] },
    code: 'merchant_not_found',
  },
  {
    name: 'put settlement',
    method: 'PUT',
    url: `/v1/merchants/${merchantId}/settlements/crypto/${settlementId}`,
    payload: { destination: wallet },
    code: 'merchant_not_found',
  },
  {
    name: 'delete settlement',
    method: 'DELETE',
    url: `/v1/merchants/${merchantId}/settlements/crypto/${settlementId}`,
    code: 'merchant_not_found',
  },
  {
    name: 'deprecated payment list',
    method: 'GET',
    url: `/v1/merchants/${merchantId}/payments`,
    code: 'merchant_not_found',
  },
  {
    name: 'payment list by merchantId',
    method: 'GET',
    url: `/v1/payments?merchantId=${merchantId}`,
    code: 'merchant_not_found',
  },
  {
    name: 'create payment (victim merchant)',
    method: 'POST',
    url: '/v1/payments',
    merchant: 'victim',
    payload: { referenceId: 'x', amount: { unit: 'iso4217/USD', value: '1' } },
    code: 'merchant_not_found',
  },
  {
    name: 'merchant payments (victim merchant)',
    method: 'GET',
    url: '/v1/merchants/payments',
    merchant: 'victim',
    code: 'merchant_not_found',
  },
  {
    name: 'read payment (victim merchant)',
    method: 'GET',
    url: `/v1/payments/${paymentId}`,
    merchant: 'victim',
    code: 'merchant_not_found',
  },
  {
    name: 'read payment (own merchant)',
    method: 'GET',
    url: `/v1/payments/${paymentId}`,
    merchant: 'own',
    code: 'payment_not_found',
  },
  {
    name: 'payment status (own merchant)',
    method: 'GET',
    url: `/v1/payments/${paymentId}/status`,
    merchant: 'own',
    code: 'payment_not_found',
  },
  {
    name: 'cancel payment (own merchant)',
    method: 'POST',
    url: `/v1/payments/${paymentId}/cancel`,
    merchant: 'own',
    code: 'payment_not_found',
  },
  {
    name: 'refund (own merchant)',
    method: 'POST',
    url: '/v1/refunds',
    merchant: 'own',
    payload: { paymentId },
    code: 'payment_not_found',
  },
  {
    name: 'refund (victim merchant)',
    method: 'POST',
    url: '/v1/refunds',
    merchant: 'victim',
    payload: { paymentId },
    code: 'merchant_not_found',
  },
  {
    name: 'read refund (own merchant)',
    method: 'GET',
    url: `/v1/refunds/${refundId}`,
    merchant: 'own',
    code: 'refund_not_found',
  },
  {
    name: 'read refund (victim merchant)',
    method: 'GET',
    url: `/v1/refunds/${refundId}`,
    merchant: 'victim',
    code: 'merchant_not_found',
  },
]

describe('isolation matrix', () => {
  for (const who of ['A live', 'B test', 'B live']) {
    describe(who, () => {
      it('gets 404 on every resource of partner A in test mode', async () => {
        const { key, ownMerchant } = others[who]!
        for (const probe of probes()) {
          const merchant =
            probe.merchant === 'victim' ? merchantId : probe.merchant === 'own' ? ownMerchant : undefined
          const res = await t.request({
            method: probe.method,
            url: probe.url,
            headers: headers(key, merchant, probe.method === 'POST' ? { 'idempotency-key': idem() } : {}),
            ...(probe.payload ? { payload: probe.payload } : {}),
          })
          expect(res.statusCode, `${who}: ${probe.name}`).toBe(404)
          expect(res.json.code, `${who}: ${probe.name}`).toBe(probe.code)
        }
      })

      it('sees none of it in listings', async () => {
        const { key, ownMerchant } = others[who]!
        const merchants = await t.request({ method: 'GET', url: '/v1/merchants', headers: headers(key) })
        expect(merchants.json.data.map((m: { id: string }) => m.id)).toEqual([ownMerchant])
        const payments = await t.request({ method: 'GET', url: '/v1/payments', headers: headers(key) })
        expect(payments.json.data).toEqual([])
        const refunds = await t.request({
          method: 'GET',
          url: '/v1/refunds',
          headers: headers(key, ownMerchant),
        })
        expect(refunds.json.data).toEqual([])
        const search = await t.request({
          method: 'GET',
          url: `/v1/merchants?search=${merchantId}`,
          headers: headers(key),
        })
        expect(search.json.data).toEqual([])
      })
    })
  }

  it('the owner still reaches everything (and the refund still happens once)', async () => {
    expect(
      (await t.request({ method: 'GET', url: `/v1/merchants/${merchantId}`, headers: headers(owner) }))
        .statusCode,
    ).toBe(200)
    expect(
      (
        await t.request({
          method: 'GET',
          url: `/v1/payments/${paymentId}`,
          headers: headers(owner, merchantId),
        })
      ).statusCode,
    ).toBe(200)
    const list = await t.request({ method: 'GET', url: '/v1/payments', headers: headers(owner) })
    expect(list.json.data.map((p: { paymentId: string }) => p.paymentId)).toEqual([paymentId])
    const refund = await t.request({
      method: 'POST',
      url: '/v1/refunds',
      headers: headers(owner, merchantId),
      payload: { paymentId },
    })
    expect([refund.statusCode, refund.json.amount.value]).toEqual([201, '1249'])
    const again = await t.request({
      method: 'POST',
      url: '/v1/refunds',
      headers: headers(owner, merchantId),
      payload: { paymentId },
    })
    expect(again.json.code).toBe('already_refunded')
    const settlements = await t.request({
      method: 'GET',
      url: `/v1/merchants/${merchantId}/settlements`,
      headers: headers(owner),
    })
    expect(settlements.json.crypto).toHaveLength(1)
  })

  it('stores the mode on every row', async () => {
    for (const table of ['merchants', 'crypto_settlements', 'payments', 'api_keys'] as const) {
      const rows = await t.db.selectFrom(table).select('mode').execute()
      for (const row of rows) expect(['test', 'live']).toContain(row.mode)
    }
    // The column's CHECK already forbids anything else: what matters is the mode of the key that made it.
    const modeOf = async (table: 'merchants' | 'crypto_settlements' | 'payments', id: string) =>
      (await t.db.selectFrom(table).select('mode').where('id', '=', id).executeTakeFirstOrThrow()).mode
    expect(await modeOf('merchants', merchantId)).toBe('test')
    expect(await modeOf('crypto_settlements', settlementId)).toBe('test')
    expect(await modeOf('payments', paymentId)).toBe('test')
    for (const [name, { ownMerchant }] of Object.entries(others)) {
      expect(await modeOf('merchants', ownMerchant), name).toBe(name.endsWith('live') ? 'live' : 'test')
    }
  })
})
